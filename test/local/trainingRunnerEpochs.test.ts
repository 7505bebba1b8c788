/**
 * The local runner records the epochs an encoder trainer sized from the dataset (`schedule` event) on
 * the job, which the API and console show ("N epochs"). A failed record write is retried, and one
 * that keeps failing is logged with the job id and said in the job's own log — never dropped silently.
 *
 * The record store is the real in-memory one with writes of `nr_epochs` made to fail (the fault under
 * test); the trainer is a stand-in Python module that emits the `schedule` event and then fails, since
 * only the runner's handling of that event is tested here (test/training runs the real trainer).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MemoryServices } from '../../src/adapters/memory/services';
import { baseModelManifestKey } from '../../src/core/modelLayout';
import type { RecordUpdate } from '../../src/core/ports';
import { readLogs } from '../../src/core/training/artifacts';
import { createTrainingJob, getTrainingJob } from '../../src/core/trainingJobs';
import { LocalTrainingRunner } from '../../src/local/trainingRunner';
import { ENCODER, teamWithDataset } from '../helpers/memoryDomain';

const PLANNED = 37;
const TRAINER = `
import json, os, pathlib
print(json.dumps({"event": "schedule", "epochs": ${PLANNED}, "steps_per_epoch": 1}), flush=True)
out = pathlib.Path(os.environ["SIFT_JOB_DIR"], "output")
out.mkdir(parents=True, exist_ok=True)
(out / "failure").write_text("stand-in trainer: stops after planning")
raise SystemExit(1)
`;

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-runner-epochs-'));
  await mkdir(join(dir, 'trainer', 'sift_trainer'), { recursive: true });
  await writeFile(join(dir, 'trainer', 'sift_trainer', '__init__.py'), '');
  await writeFile(join(dir, 'trainer', 'sift_trainer', 'job.py'), TRAINER);
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

/** Makes the store's next `failures` writes of nr_epochs throw, as a store that is briefly unreachable does. */
function failEpochWrites(svc: MemoryServices, failures: number): void {
  const update = svc.records.update.bind(svc.records);
  let left = failures;
  svc.records.update = (async (pk: string, sk: string, change: RecordUpdate) => {
    if ('nr_epochs' in (change.set ?? {}) && left-- > 0) throw new Error('record store unreachable');
    return update(pk, sk, change);
  }) as typeof svc.records.update;
}

async function runOneJob(failures: number) {
  const { svc, teamId } = await teamWithDataset();
  await svc.blobs.put(baseModelManifestKey(ENCODER), JSON.stringify({ files: {} }));
  const job = await createTrainingJob(svc, teamId, {
    model_name: 'planned',
    base_model: ENCODER,
    datasets: [{ name: 'ner-set' }],
  });
  expect(job.epochs_from_data).toBe(true);
  failEpochWrites(svc, failures);
  const logged: { level: string; message: string; extra: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (message: string, extra: Record<string, unknown> = {}) =>
      void logged.push({ level, message, extra });
  const runner = new LocalTrainingRunner(() => svc, {
    workDir: join(dir, 'work'),
    python: 'python3',
    trainerDir: join(dir, 'trainer'),
    maxConcurrent: 1,
    stopGraceMs: 1000,
    logger: { info: at('info'), warn: at('warn'), error: at('error') },
  });
  await runner.submit(teamId, job.id);
  await runner.idle();
  const after = await getTrainingJob(svc, teamId, job.id);
  const jobLog = (await readLogs(svc, teamId, job.id, 0, 1000)).map((l) => l.line);
  return { job: after, defaultEpochs: job.nr_epochs, logged, jobLog };
}

describe('local runner: the planned epochs of a job that left them to the trainer', () => {
  it('are recorded on the job even when the first writes fail', async () => {
    const { job, defaultEpochs, logged } = await runOneJob(2);
    expect(job.error).toContain('stand-in trainer');
    expect(defaultEpochs).not.toBe(PLANNED);
    expect(job.nr_epochs).toBe(PLANNED);
    expect(logged.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('are logged with the job id, and said in the job log, when the write keeps failing', async () => {
    const { job, defaultEpochs, logged, jobLog } = await runOneJob(Number.POSITIVE_INFINITY);
    expect(job.nr_epochs).toBe(defaultEpochs);
    const errors = logged.filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]?.extra).toMatchObject({ job_id: job.id, epochs: PLANNED });
    expect(String((errors[0]!.extra.error as Error).message)).toBe('record store unreachable');
    expect(jobLog.some((l) => l.includes(`planned ${PLANNED} epochs`) && l.includes('record store unreachable'))).toBe(
      true,
    );
  });
});

/**
 * The training lifecycle (src/core/training/lifecycle.ts), one set of assertions run through each
 * runtime's launcher: test/local/trainingLifecycle.test.ts (the subprocess runner, a stand-in trainer)
 * and test/aws/trainingLifecycle.test.ts (the deployed training ASL, the workflow tasks, a SageMaker
 * stand-in, the emulators). A launcher only moves bytes and reports events; everything asserted here
 * is the lifecycle's, so a runtime that decides any of it on its own fails here.
 *
 * The services' clock is the test's: every time the service writes (the job's start and end, the
 * checkpoints it learns of, the model's own final checkpoint) must be one it handed out.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buffer } from 'node:stream/consumers';
import type { Services } from '../../src/core/context';
import { archiveKey, listCheckpoints, modelPrefix, type Checkpoint } from '../../src/core/training/artifacts';
import { createTrainingJob, getTrainingJob, stopTrainingJob, type TrainingJob } from '../../src/core/trainingJobs';
import { TRAINED_STEPS, writeInterruptedAttempt, writeTrainerOutput, type TrainerOutput } from './trainerOutput';

export const LIFECYCLE_ROWS = [
  {
    text: 'Tim Cook runs Apple.',
    entities: [
      ['Tim Cook', 'person'],
      ['Apple', 'company'],
    ],
  },
  {
    text: 'Satya Nadella visited Paris.',
    entities: [
      ['Satya Nadella', 'person'],
      ['Paris', 'city'],
    ],
  },
];

/**
 * What the trainer does: finish with its model (after all its checkpoints), fail (after its epoch
 * checkpoints) with this failure file, or save its first checkpoint and run until stopped: the
 * harness calls `stop` (a caller's POST …/stop) once the trainer is running with that checkpoint.
 */
export type LifecycleScenario =
  | { kind: 'complete'; output: TrainerOutput; interrupted?: string }
  | { kind: 'fail'; output: TrainerOutput; failureFile: string }
  | { kind: 'stop'; output: TrainerOutput; stop: () => Promise<void> };

export type Logged = { level: 'info' | 'warn' | 'error'; message: string; extra: Record<string, unknown> };

export interface LifecycleHarness {
  /** Services with `now` = the given clock, a team whose dataset `dataset` (LIFECYCLE_ROWS) is ready, and `baseModel`'s weights in the model store. */
  setup(now: () => Date): Promise<{ svc: Services; teamId: string; dataset: string; baseModel: string }>;
  /** Runs the job through this runtime's launcher until it has ended. `logged`: what the launcher's and the lifecycle's logger were told. */
  run(job: TrainingJob, scenario: LifecycleScenario, logged: Logged[]): Promise<void>;
  teardown(): Promise<void>;
  /** The platform restarts an interrupted job (SageMaker managed spot): `interrupted` scenarios apply. */
  restarts?: boolean;
}

/** A clock that moves one millisecond a call, remembering every time it gave. */
function testClock() {
  const given = new Set<string>();
  let t = Date.UTC(2031, 4, 6, 7, 8, 9);
  return {
    now: () => {
      t += 1;
      const d = new Date(t);
      given.add(d.toISOString());
      return d;
    },
    gave: (iso: unknown) => typeof iso === 'string' && given.has(iso),
  };
}

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

export function describeTrainingLifecycle(runtime: string, harness: LifecycleHarness): void {
  describe(`the training lifecycle, through the ${runtime} launcher`, () => {
    let svc: Services;
    let teamId: string;
    let dataset: string;
    let baseModel: string;
    let dir: string;
    const clock = testClock();

    beforeAll(async () => {
      ({ svc, teamId, dataset, baseModel } = await harness.setup(clock.now));
      dir = await mkdtemp(join(tmpdir(), 'sift-lifecycle-'));
    }, 120_000);
    afterAll(async () => {
      await harness.teardown();
      if (dir) await rm(dir, { recursive: true, force: true });
    });

    async function runJob(
      name: string,
      scenario: (output: TrainerOutput, stop: () => Promise<void>) => LifecycleScenario,
      extraMetrics?: Record<string, unknown>,
    ) {
      const output = await writeTrainerOutput(join(dir, name), {
        validationRows: LIFECYCLE_ROWS,
        weightsBytes: 64 * 1024,
        ...(extraMetrics ? { extraMetrics } : {}),
      });
      const created = await createTrainingJob(svc, teamId, {
        model_name: name,
        base_model: baseModel,
        datasets: [{ name: dataset }],
        training_type: 'lora',
        nr_epochs: 2,
      });
      const logged: Logged[] = [];
      const stop = async () => void (await stopTrainingJob(svc, teamId, created.id));
      await harness.run(created, scenario(output, stop), logged);
      const job = await getTrainingJob(svc, teamId, created.id);
      const checkpoints = await listCheckpoints(svc, teamId, created.id);
      return { output, job, checkpoints, logged };
    }

    const bestOf = (all: Checkpoint[]) => Math.max(...all.map((c) => c.metrics?.f1 ?? -1));

    it("completes from the model files: the model and its archive, every checkpoint, one final at the step trained, the best marked, the trainer's metrics (the engine could not score), dates from the service clock", async () => {
      const { output, job, checkpoints, logged } = await runJob('completes', (o) => ({ kind: 'complete', output: o }));
      expect(job).toMatchObject({
        status: 'complete',
        error: null,
        metrics: { f1: 0.8125, precision: 0.8667, recall: 0.7647 },
        warnings: [],
      });
      expect(clock.gave(job.started_at)).toBe(true);
      expect(clock.gave(job.finished_at)).toBe(true);
      expect(job.started_at! <= job.finished_at!).toBe(true);

      // the model's files, byte for byte, under the job's model prefix; the archive as the download
      const prefix = modelPrefix(teamId, job.id);
      expect((await svc.blobs.list(prefix)).map((k) => k.slice(prefix.length)).sort()).toEqual(
        [...output.modelFiles.keys()].sort(),
      );
      for (const [rel, body] of output.modelFiles)
        expect([rel, sha(await buffer(await svc.blobs.stream(prefix + rel)))]).toEqual([rel, sha(body)]);
      expect(await svc.blobs.head(archiveKey(teamId, job.id))).toBeTruthy();

      // every checkpoint the trainer saved, as it described it
      for (const c of output.checkpoints) {
        const listed = checkpoints.find((l) => l.id === c.meta.id);
        expect(listed).toMatchObject({ step: c.meta.step, epoch: c.meta.epoch, metrics: c.meta.metrics });
        // dated when the service learned of it, or (files found together at the end) by the trainer
        expect(clock.gave(listed!.created_at) || listed!.created_at === c.meta.created_at).toBe(true);
      }
      // one final checkpoint, the job's: at the step the trainer reached and the job's epochs, dated by the service
      const finals = checkpoints.filter((c) => c.is_final);
      expect(finals).toHaveLength(1);
      expect(finals[0]).toMatchObject({ id: job.final_checkpoint_id, step: TRAINED_STEPS, epoch: 2 });
      expect(clock.gave(finals[0]!.created_at)).toBe(true);
      // one best, by validation f1
      const best = checkpoints.filter((c) => c.is_best);
      expect(best).toHaveLength(1);
      expect(best[0]!.metrics?.f1).toBe(bestOf(checkpoints));
      // checkpoint metrics are numbers (the API's schema), never the trainer's per-entity tables
      for (const c of checkpoints) for (const v of Object.values(c.metrics ?? {})) expect(typeof v).toBe('number');

      // the serving engine could not load the stand-in's weights: said, with the job, not silent
      expect(logged).toContainEqual(
        expect.objectContaining({
          level: 'warn',
          message: expect.stringContaining('could not score'),
          extra: expect.objectContaining({ job_id: job.id }),
        }),
      );
    });

    it('warns when the model does not beat its base model on the held-out rows (learningWarnings, from metrics.json)', async () => {
      const { job } = await runJob('no-better', (o) => ({ kind: 'complete', output: o }), { baseline_f1: 0.9 });
      expect(job.status).toBe('complete');
      expect(job.warnings).toEqual([
        expect.stringMatching(/^validation F1 0\.8125 does not beat the base model's 0\.9000/),
      ]);
    });

    (harness.restarts ? it : it.skip)(
      'a job the platform restarted (a spot interruption) registers the checkpoints of the run that finished, not what the interrupted attempt left half-written',
      async () => {
        const earlier = await writeInterruptedAttempt(join(dir, 'restarted-attempt-1'));
        const { output, job, checkpoints } = await runJob('restarted', (o) => ({
          kind: 'complete',
          output: o,
          interrupted: earlier.dir,
        }));
        expect(job.status).toBe('complete');
        expect(checkpoints.map((c) => c.id)).not.toContain(earlier.partialId);
        expect(
          checkpoints
            .filter((c) => !c.is_final)
            .map((c) => c.id)
            .sort(),
        ).toEqual(output.checkpoints.map((c) => c.meta.id).sort());
      },
    );

    it("fails with the trainer's reason, keeping the checkpoints it saved (none final) with the best marked", async () => {
      const failureFile = "invalid dataset: row 2: entity 'Paris' is not in the text\n";
      const { output, job, checkpoints } = await runJob('fails', (o) => ({ kind: 'fail', output: o, failureFile }));
      expect(job).toMatchObject({ status: 'failed', metrics: null });
      expect(job.error).toContain(failureFile.trim());
      expect(clock.gave(job.finished_at)).toBe(true);
      const saved = output.checkpoints.filter((c) => !c.meta.is_final);
      expect(checkpoints.map((c) => c.id).sort()).toEqual(saved.map((c) => c.meta.id).sort());
      expect(checkpoints.filter((c) => c.is_final)).toEqual([]);
      const best = checkpoints.filter((c) => c.is_best);
      expect(best).toHaveLength(1);
      expect(best[0]!.metrics?.f1).toBe(bestOf(checkpoints));
      expect(await svc.blobs.head(archiveKey(teamId, job.id))).toBeFalsy();
    });

    it("a stop while the trainer runs: the job ends stopped (the stop wins over the trainer's exit), with the checkpoint it saved, marked best", async () => {
      const { output, job, checkpoints } = await runJob('stopped', (o, stop) => ({ kind: 'stop', output: o, stop }));
      expect(job).toMatchObject({ status: 'stopped', error: null, metrics: null });
      expect(clock.gave(job.finished_at)).toBe(true);
      expect(checkpoints.map((c) => c.id)).toEqual([output.checkpoints[0]!.meta.id]);
      expect(checkpoints[0]).toMatchObject({ is_final: false, is_best: true, step: output.checkpoints[0]!.meta.step });
      expect(await svc.blobs.head(archiveKey(teamId, job.id))).toBeFalsy();
    });
  });
}

/**
 * The training lifecycle's assertions (test/helpers/trainingLifecycleContract.ts) through the local
 * launcher: LocalTrainingRunner runs a stand-in trainer as its subprocess — a Python module that
 * replays what the real one prints and writes (its `checkpoint` events over the checkpoint
 * directories of test/helpers/trainerOutput.ts, /opt/ml/model, `completed` or the failure file) —
 * on the in-memory stores, as the other test/local runner tests do. test/training runs the real trainer.
 */
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { baseModelManifestKey } from '../../src/core/modelLayout';
import { listCheckpoints } from '../../src/core/training/artifacts';
import { LocalTrainingRunner } from '../../src/local/trainingRunner';
import {
  describeTrainingLifecycle,
  LIFECYCLE_ROWS,
  type LifecycleScenario,
  type Logged,
} from '../helpers/trainingLifecycleContract';
import { ENCODER, readyDataset, teamWithDataset } from '../helpers/memoryDomain';
import type { MemoryServices } from '../../src/adapters/memory/services';

/** Replays PLAN (JSON, below): checkpoint events, then the model and `completed`, the failure file, or a wait for SIGTERM. */
const REPLAY = `
import json, os, pathlib, shutil, sys, time
plan = json.loads(PLAN)
job = pathlib.Path(os.environ["SIFT_JOB_DIR"])
for meta in plan["checkpoints"]:
    print(json.dumps({"event": "checkpoint", **meta}), flush=True)
if plan["kind"] == "stop":
    time.sleep(120)  # until the runner's SIGTERM
if plan["kind"] == "fail":
    (job / "output").mkdir(parents=True, exist_ok=True)
    (job / "output" / "failure").write_text(plan["failure"])
    sys.exit(1)
shutil.copytree(plan["model_dir"], job / "model", dirs_exist_ok=True)
print(json.dumps({"event": "completed", "metrics": plan["summary"], "model_dir": str(job / "model"), "steps": plan["steps"]}), flush=True)
`;

const PYTHON = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();

let dir: string;
let svc: MemoryServices;
let teamId: string;

describeTrainingLifecycle('local', {
  async setup(now) {
    dir = await mkdtemp(join(tmpdir(), 'sift-lifecycle-local-'));
    ({ svc, teamId } = await teamWithDataset({ now }));
    await readyDataset(svc, teamId, 'people', LIFECYCLE_ROWS);
    await svc.blobs.put(baseModelManifestKey(ENCODER), JSON.stringify({ format: 'sift-model/1', family: 'encoder' }));
    return { svc, teamId, dataset: 'people', baseModel: ENCODER };
  },

  async run(job, scenario: LifecycleScenario, logged: Logged[]) {
    const { output } = scenario;
    // as in the SageMaker stand-in: a failing trainer got through its epochs (no `final`), a stopped one through its first
    const kept =
      scenario.kind === 'fail'
        ? output.checkpoints.filter((c) => !c.meta.is_final)
        : scenario.kind === 'stop'
          ? output.checkpoints.slice(0, 1)
          : output.checkpoints;
    const checkpoints = kept.map((c) => ({ ...c.meta, path: c.dir }));
    const plan = {
      kind: scenario.kind,
      checkpoints,
      failure: scenario.kind === 'fail' ? scenario.failureFile : '',
      model_dir: output.modelDir,
      summary: { f1: output.metrics.f1, precision: output.metrics.precision, recall: output.metrics.recall },
      steps: Math.max(...output.checkpoints.map((c) => c.meta.step)),
    };
    const trainer = join(dir, `trainer-${job.id}`);
    await mkdir(join(trainer, 'sift_trainer'), { recursive: true });
    await writeFile(join(trainer, 'sift_trainer', '__init__.py'), '');
    await writeFile(
      join(trainer, 'sift_trainer', 'job.py'),
      `PLAN = ${JSON.stringify(JSON.stringify(plan))}\n${REPLAY}`,
    );
    const at =
      (level: Logged['level']) =>
      (message: string, extra: Record<string, unknown> = {}) =>
        void logged.push({ level, message, extra });
    const runner = new LocalTrainingRunner(() => svc, {
      workDir: join(dir, 'work'),
      python: PYTHON,
      trainerDir: trainer,
      maxConcurrent: 1,
      stopGraceMs: 1000,
      logger: { info: at('info'), warn: at('warn'), error: at('error') },
    });
    svc.training = runner; // what POST …/stop reaches (for this job only: the next one is created without a launcher)
    try {
      await runner.submit(teamId, job.id);
      if (scenario.kind === 'stop') {
        while ((await listCheckpoints(svc, teamId, job.id)).length === 0) await new Promise((r) => setTimeout(r, 20));
        await scenario.stop();
      }
      await runner.idle();
    } finally {
      delete svc.training;
    }
  },

  async teardown() {
    if (dir) await rm(dir, { recursive: true, force: true });
  },
});

/**
 * The LoRA learning-rate rule is written twice: the API picks a job's rate from the rows it is given
 * (src/core/catalog.ts `defaultLearningRate`: 1e-3 from 300 rows, else 3e-4), and the trainer picks
 * it for jobs run without the API from the rows it trains on after its 10 % validation split
 * (containers/training/sift_trainer/encoder/schedule.py: 1e-3 from 270). This test runs the
 * trainer's own split and schedule in the training venv and asks both for the same row counts, so
 * moving either threshold or either rate alone turns it red. Fails (never skips) without the venv.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { defaultLearningRate, findBaseModel } from '../../../src/core/catalog';
import { DEFAULT_PYTHON, REPO_ROOT } from '../../../src/paths';

const TRAINER_DIR = join(REPO_ROOT, 'containers', 'training');

/** What the trainer chooses for a LoRA job on `rows` rows (default validation split and seed). */
const TRAINER_RATES = `
import json, sys
from sift_trainer.data.rows import split
from sift_trainer.encoder import schedule
from sift_trainer.job.hyperparameters import Hyperparameters
hp = Hyperparameters.from_dict({"base_model_path": "/base", "training_type": "lora"})
out = {}
for n in json.loads(sys.argv[1]):
    train, _ = split(list(range(n)), hp.validation_split, hp.seed)
    plan = schedule.plan(hp, len(train))
    out[n] = [plan.task_lr, plan.encoder_lr, len(train)]
print(json.dumps(out))
`;

function trainerRates(rows: number[]): Record<string, [number, number, number]> {
  if (!existsSync(DEFAULT_PYTHON))
    throw new Error(
      `the training venv's python (${DEFAULT_PYTHON}) is absent: build it with \`node scripts/setup.mjs\` (npm test does) or set SIFT_VENV`,
    );
  const r = spawnSync(DEFAULT_PYTHON, ['-c', TRAINER_RATES, JSON.stringify(rows)], {
    cwd: TRAINER_DIR,
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (r.status !== 0)
    throw new Error(
      `the trainer's schedule did not run (status ${r.status}): ${r.stderr.slice(-2000)}${r.error ? String(r.error) : ''}`,
    );
  return JSON.parse(r.stdout.trim().split('\n').at(-1)!) as Record<string, [number, number, number]>;
}

describe("an encoder LoRA job's default learning rate", () => {
  const mini = findBaseModel('sift/gliner2-mini-v1')!;

  it('is 3e-4 below 300 rows and 1e-3 from 300 rows (the measured rule, d6c386b)', () => {
    expect(mini.type).toBe('encoder');
    expect(defaultLearningRate(mini, 'lora', 0)).toBe(3e-4);
    expect(defaultLearningRate(mini, 'lora', 299)).toBe(3e-4);
    expect(defaultLearningRate(mini, 'lora', 300)).toBe(1e-3);
    expect(defaultLearningRate(mini, 'lora', 5_000)).toBe(1e-3);
  });

  it('is the one the trainer picks for the same rows after its validation split', () => {
    const rows = [4, 10, 100, 200, ...Array.from({ length: 61 }, (_, i) => 270 + i), 333, 1_000, 5_000];
    const trainer = trainerRates(rows);
    // the split the rule relies on: 300 rows leave 270 to train on, 299 leave 269
    expect([trainer['299']![2], trainer['300']![2]]).toEqual([269, 270]);
    expect([trainer['299']![0], trainer['300']![0]]).toEqual([3e-4, 1e-3]);
    const mismatched = rows
      .map((n) => ({
        rows: n,
        api: defaultLearningRate(mini, 'lora', n),
        trainer: trainer[String(n)]![0],
        trainerEncoder: trainer[String(n)]![1],
      }))
      .filter((x) => x.api !== x.trainer || x.api !== x.trainerEncoder);
    expect(mismatched).toEqual([]);
  });
});

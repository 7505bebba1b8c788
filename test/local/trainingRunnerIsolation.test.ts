/**
 * What the local runner hands a trainer, and what it does with what comes back (security review F15c,
 * F12, and errors that were turned into silence):
 * - the trainer sees an allow-listed environment: never SIFT_ADMIN_KEY or AWS credentials;
 * - the base-model cache copies a blob key's suffix only to a path inside the cache directory;
 * - a failure file it cannot read, or a job record it cannot read, is an error that is said, not
 *   "no failure file" or a job that silently never runs.
 *
 * The record and blob stores are the in-memory ones; the trainer is a stand-in Python module (the
 * real one runs in test/training).
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { MemoryServices } from '../../src/adapters/memory/services';
import { baseModelManifestKey } from '../../src/core/modelLayout';
import { createTrainingJob, getTrainingJob } from '../../src/core/trainingJobs';
import { LocalTrainingRunner, TRAINER_ENV_NAMES } from '../../src/local/trainingRunner';
import { ENCODER, teamWithDataset } from '../helpers/memoryDomain';

/** Writes its whole environment as the failure text, so the job's `error` shows what it saw. */
const DUMP_ENV = `
import json, os, pathlib
out = pathlib.Path(os.environ["SIFT_JOB_DIR"], "output")
out.mkdir(parents=True, exist_ok=True)
(out / "failure").write_text(json.dumps(dict(os.environ)))
raise SystemExit(1)
`;

/** Leaves a directory where the failure file goes: reading it fails with EISDIR, not ENOENT. */
const UNREADABLE_FAILURE = `
import os, pathlib
pathlib.Path(os.environ["SIFT_JOB_DIR"], "output", "failure").mkdir(parents=True, exist_ok=True)
raise SystemExit(1)
`;

/** The interpreter itself, not a version manager's shim (a shim adds its own variables and PATH entries). */
const PYTHON = execFileSync('python3', ['-c', 'import sys; print(sys.executable)'], { encoding: 'utf8' }).trim();

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-runner-isolation-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

async function trainer(code: string): Promise<string> {
  const at = join(dir, 'trainer');
  await mkdir(join(at, 'sift_trainer'), { recursive: true });
  await writeFile(join(at, 'sift_trainer', '__init__.py'), '');
  await writeFile(join(at, 'sift_trainer', 'job.py'), code);
  return at;
}

async function runJob(
  svc: MemoryServices,
  teamId: string,
  trainerDir: string,
  extra: { whenBuilt?: () => Promise<void>; beforeRun?: () => void } = {},
) {
  const { beforeRun, ...options } = extra;
  const job = await createTrainingJob(svc, teamId, {
    model_name: 'isolated',
    base_model: ENCODER,
    datasets: [{ name: 'ner-set' }],
  });
  beforeRun?.();
  const logged: { level: string; message: string; extra: Record<string, unknown> }[] = [];
  const at =
    (level: string) =>
    (message: string, e: Record<string, unknown> = {}) =>
      void logged.push({ level, message, extra: e });
  const runner = new LocalTrainingRunner(() => svc, {
    workDir: join(dir, 'work'),
    python: PYTHON,
    trainerDir,
    maxConcurrent: 1,
    stopGraceMs: 1000,
    logger: { info: at('info'), warn: at('warn'), error: at('error') },
    ...options,
  });
  await runner.submit(teamId, job.id);
  await runner.idle();
  return { job: await getTrainingJob(svc, teamId, job.id), logged };
}

async function withBaseModel(extraKeys: Record<string, string> = {}) {
  const { svc, teamId } = await teamWithDataset();
  await svc.blobs.put(baseModelManifestKey(ENCODER), JSON.stringify({ files: {} }));
  for (const [key, body] of Object.entries(extraKeys)) await svc.blobs.put(key, body);
  return { svc, teamId };
}

describe('local runner: the trainer environment', () => {
  const secrets = {
    SIFT_ADMIN_KEY: 'svc_sk_test-operator-key-0123456789abcdefghijklmnop',
    AWS_ACCESS_KEY_ID: 'AKIAEXAMPLE',
    AWS_SECRET_ACCESS_KEY: 'secret-example',
    AWS_SESSION_TOKEN: 'token-example',
    SIFT_INTERNAL_TOKEN: 'internal-token-example-0123456789abcdef',
    SM_MODEL_DIR: '/somewhere/else',
  };
  const saved: Record<string, string | undefined> = {};
  beforeEach(() => {
    for (const [k, v] of Object.entries({ ...secrets, SIFT_TORCH_THREADS: '3' })) {
      saved[k] = process.env[k];
      process.env[k] = v;
    }
  });
  afterEach(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  it('holds the allow-listed variables and the job settings, and none of the service secrets', async () => {
    const { svc, teamId } = await withBaseModel();
    const { job } = await runJob(svc, teamId, await trainer(DUMP_ENV));
    const seen = JSON.parse(job.error as string) as Record<string, string>;
    for (const name of Object.keys(secrets)) expect(seen[name]).toBeUndefined();
    expect(Object.values(seen).join('\n')).not.toMatch(/svc_sk_|secret-example|token-example|internal-token/);
    expect(seen).toMatchObject({
      SIFT_TORCH_THREADS: '3',
      PATH: process.env.PATH,
      HF_HUB_OFFLINE: '1',
      PYTHONUNBUFFERED: '1',
    });
    expect(seen.SIFT_JOB_DIR).toBe(join(dir, 'work', 'jobs', job.id));
    // nothing outside the allow-list and the job's own settings
    const allowed = new Set<string>([
      ...TRAINER_ENV_NAMES,
      'SIFT_JOB_DIR',
      'PYTHONUNBUFFERED',
      'HF_HUB_OFFLINE',
      'TRANSFORMERS_OFFLINE',
      'TOKENIZERS_PARALLELISM',
      'SIFT_RESUME_STATE',
    ]);
    expect(seen.SIFT_RESUME_STATE).toBe('0');
    expect(Object.keys(seen).filter((k) => !allowed.has(k))).toEqual([]);
  });
});

describe('local runner: the base-model cache', () => {
  it('refuses a model-store key that would land outside the cache directory, naming it', async () => {
    const hostile = `models/${ENCODER}/onnx/../../../../../escaped.txt`;
    const { svc, teamId } = await withBaseModel({ [hostile]: 'hostile' });
    const { job } = await runJob(svc, teamId, await trainer(DUMP_ENV));
    expect(job.status).toBe('failed');
    expect(job.error).toContain(
      `model store key ${hostile} names an unsafe path "onnx/../../../../../escaped.txt": it climbs out with ".."`,
    );
    const work = join(dir, 'work');
    expect(
      existsSync(join(dir, 'escaped.txt')) ||
        existsSync(join(work, 'escaped.txt')) ||
        existsSync(join(work, 'cache', 'escaped.txt')),
    ).toBe(false);
    expect(await readdir(dir)).not.toContain('escaped.txt');
  });
});

describe('local runner: errors are said', () => {
  it('a failure file that cannot be read fails the job with that error, not "wrote no failure file"', async () => {
    const { svc, teamId } = await withBaseModel();
    const { job } = await runJob(svc, teamId, await trainer(UNREADABLE_FAILURE));
    expect(job.status).toBe('failed');
    expect(job.error).toMatch(/EISDIR/);
    expect(job.error).not.toMatch(/wrote no failure file/);
  });

  it('a job record that cannot be read is logged as a runner failure, not skipped as deleted', async () => {
    const { svc, teamId } = await withBaseModel();
    const get = svc.records.get.bind(svc.records);
    let failing = false;
    svc.records.get = (async (pk: string, sk: string) => {
      if (failing && sk.startsWith('JOB#')) {
        failing = false; // once: the runner's first read of the job
        throw new Error('record store unreachable');
      }
      return get(pk, sk);
    }) as typeof svc.records.get;
    // with a build to wait for, the runner reads the job first (to know its base model)
    const { logged } = await runJob(svc, teamId, await trainer(DUMP_ENV), {
      whenBuilt: async () => {},
      beforeRun: () => {
        failing = true;
      },
    });
    const errors = logged.filter((l) => l.level === 'error');
    expect(errors).toHaveLength(1);
    expect(errors[0]!.message).toBe('training runner failed');
    expect(String((errors[0]!.extra.error as Error).message)).toBe('record store unreachable');
  });
});

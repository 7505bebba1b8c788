/**
 * scripts/setup.mjs (what `npm start` / `npm test` run first): start mode returns without waiting for
 * the venv and model build, which goes on detached and reports through its status file; test mode
 * builds in the foreground. Python is stood in by test/fixtures/fake-python.mjs (the real build takes
 * 20+ minutes and is exercised by `npm test`'s own set-up); setup.sh, the lock, the detached process,
 * the event parsing and the status file are the real ones.
 */
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CACHE_DIR, REPO_ROOT } from '../../src/paths';

const MINI = 'sift/gliner2-mini-v1';
const fakePython = join(REPO_ROOT, 'test', 'fixtures', 'fake-python.mjs');
let cacheDir: string;

const statusOf = async () => JSON.parse(await readFile(join(cacheDir, 'models', '.sift-build.json'), 'utf8'));

function setup(args: string[], env: Record<string, string> = {}) {
  const base = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !['SIFT_VENV', 'SIFT_MODELS_DIR', 'SIFT_SKIP_MODELS', 'NODE_OPTIONS'].includes(k),
    ),
  );
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'scripts', 'setup.mjs'), ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
    // the tests' own venvs are the real ones (set up once per machine): not this test's subject
    env: {
      ...base,
      SIFT_CACHE_DIR: cacheDir,
      SIFT_PYTHON: fakePython,
      SIFT_BUILD_MODELS: MINI,
      SIFT_API_CHECK_VENV: process.env.SIFT_API_CHECK_VENV ?? join(CACHE_DIR, 'venv-api-check'),
      SIFT_CLIENTS_VENV: process.env.SIFT_CLIENTS_VENV ?? join(CACHE_DIR, 'venv-clients'),
      ...env,
    },
    timeout: 60_000,
  });
  return r;
}

/** `sift models status`, the CLI's view of the same status file. */
const modelsStatus = () =>
  promisify(execFile)(
    process.execPath,
    ['--no-warnings', '--import', 'tsx', 'bin/sift.ts', 'models', 'status', '--models-dir', join(cacheDir, 'models')],
    { cwd: REPO_ROOT, encoding: 'utf8' },
  ).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
  );

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await probe().catch(() => undefined);
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(() => {
  // setup.mjs runs `npm install` when node_modules does not match the lock file; never here
  const stamp = join(REPO_ROOT, 'node_modules', '.sift-setup');
  const want = createHash('sha256')
    .update(readFileSync(join(REPO_ROOT, 'package-lock.json')))
    .digest('hex');
  if (!existsSync(stamp) || readFileSync(stamp, 'utf8') !== want)
    throw new Error('node_modules does not match package-lock.json: run `npm install` first');
});
beforeEach(async () => {
  cacheDir = await mkdtemp(join(tmpdir(), 'sift-setup-'));
});
afterEach(async () => {
  // never leave a build behind: open its gate, stop its process
  await writeFile(join(cacheDir, 'gate'), '');
  const pid = await statusOf().then(
    (s) => s.pid as number,
    () => undefined,
  );
  if (pid && alive(pid)) process.kill(pid, 'SIGTERM');
  await rm(cacheDir, { recursive: true, force: true });
});

it('start mode returns while the build goes on in the background, reporting progress, and one build at a time', async () => {
  const gate = join(cacheDir, 'gate');
  const first = setup([], { FAKE_BUILD_GATE: gate });
  expect(first.status).toBe(0);
  expect(first.stderr).toContain('building the training venv and offline models in the background');
  // it returned while the fake build still waits at its gate (opened only below): no waiting on the build

  // the fake build waits at its gate after step 30 of 100: the status file shows how far it got
  const progress = await until('progress in the status file', async () => {
    const s = await statusOf();
    return s.models?.[MINI]?.step === 30 ? s : undefined;
  });
  expect(progress).toMatchObject({
    state: 'running',
    venv: { state: 'done' },
    stage: MINI,
    models: { [MINI]: { state: 'building', stage: 'training', step: 30, total: 100 } },
  });
  expect(progress.models[MINI].eta_seconds).toEqual(expect.any(Number));
  expect(alive(progress.pid)).toBe(true);
  const cli = await modelsStatus();
  expect(cli.code).toBe(0);
  expect(cli.stdout).toContain('model build: running');
  expect(cli.stdout).toMatch(
    /training venv: done\n {2}sift\/gliner2-mini-v1: being built \(training, step 30\/100(, about \d+ min left)?\)/,
  );

  // a second start while it runs leaves the build to the first
  const second = setup([], { FAKE_BUILD_GATE: gate });
  expect(second.status).toBe(0);
  expect(second.stderr).toContain(`already running (pid ${progress.pid}`);

  await writeFile(gate, '');
  const done = await until('the build to finish', async () => {
    const s = await statusOf();
    return s.state === 'done' ? s : undefined;
  });
  expect(done.models[MINI]).toMatchObject({ state: 'done', stage: 'built' });
  expect(existsSync(join(cacheDir, 'models', 'sift--gliner2-mini-v1', 'manifest.json'))).toBe(true);
  // the detached build's output went to its log
  const log = await readFile(join(cacheDir, 'models', '.sift-build.log'), 'utf8');
  expect(log).toContain('"event":"build_done"');
  expect(log).toContain('build-models: done');
}, 60_000);

it('reports a failed build with its reason instead of hanging', async () => {
  expect(setup([], { FAKE_BUILD_FAIL: '1' }).status).toBe(0);
  const failed = await until('the build to fail', async () => {
    const s = await statusOf();
    return s.state === 'failed' ? s : undefined;
  });
  expect(failed.models[MINI]).toMatchObject({
    state: 'failed',
    error: 'sift_trainer.build.build_mini: RuntimeError: out of memory (fake)',
  });
  expect(failed.error).toContain('out of memory (fake)');
  const cli = await modelsStatus();
  expect(cli.code).toBe(1);
  expect(cli.stdout).toContain(
    'sift/gliner2-mini-v1: build failed: sift_trainer.build.build_mini: RuntimeError: out of memory (fake)',
  );
});

it('a build stopped by a signal says so, for every part it had not finished', async () => {
  expect(setup([], { FAKE_BUILD_GATE: join(cacheDir, 'gate') }).status).toBe(0);
  const running = await until('the build to reach its gate', async () => {
    const s = await statusOf();
    return s.models?.[MINI]?.step === 30 ? s : undefined;
  });
  process.kill(running.pid, 'SIGTERM');
  const stopped = await until('the build to stop', async () => {
    const s = await statusOf();
    return s.state === 'failed' ? s : undefined;
  });
  expect(stopped).toMatchObject({
    error: 'the build was stopped (SIGTERM)',
    models: { [MINI]: { state: 'failed', error: 'the build was stopped (SIGTERM)' } },
  });
  await until('the build process to exit', async () => (alive(running.pid) ? undefined : true));
});

it('test mode builds in the foreground: the models are there when it returns', async () => {
  const r = setup(['--for-tests']);
  expect(r.status).toBe(0);
  expect(await statusOf()).toMatchObject({ state: 'done', models: { [MINI]: { state: 'done' } } });
  expect(existsSync(join(cacheDir, 'models', 'sift--gliner2-mini-v1', 'manifest.json'))).toBe(true);

  // and a failed build fails `npm test`'s set-up
  await rm(join(cacheDir, 'models', 'sift--gliner2-mini-v1'), { recursive: true });
  expect(setup(['--for-tests'], { FAKE_BUILD_FAIL: '1' }).status).not.toBe(0);
});

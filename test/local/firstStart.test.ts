/**
 * A first `npm start`: the server answers while the venv and models build in the background
 * (scripts/build-models.mjs writes `<modelsDir>/.sift-build.json`). Here the build is played by
 * writing that status file and, when it "finishes", the built mini model (copied from the cache the
 * real build filled) — the real build is covered by the trainer's tests and `npm test`'s set-up.
 */
import { spawnSync } from 'node:child_process';
import { cp, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_MODELS_DIR } from '../../src/paths';
import { jsonl, TestStack } from '../helpers/localStack';

const MINI = 'sift/gliner2-mini-v1';
const DECODER = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const text = 'Tim Cook visited the Apple office in Paris.';
const schema = { entities: ['person', 'company', 'city'] };

let modelsDir: string;
let stack: TestStack | undefined;

const writeStatus = (status: Record<string, unknown>) =>
  writeFile(join(modelsDir, '.sift-build.json'), JSON.stringify(status));
const building = (over: Record<string, unknown> = {}) => ({
  state: 'running',
  pid: process.pid, // alive for the whole test
  log: join(modelsDir, '.sift-build.log'),
  stage: MINI,
  venv: { state: 'done' },
  models: {
    [MINI]: { state: 'building', stage: 'training', step: 120, total: 700, eta_seconds: 90 },
    [DECODER]: { state: 'pending' },
  },
  ...over,
});

async function until<T>(what: string, probe: () => Promise<T | undefined>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const got = await probe();
    if (got !== undefined) return got;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeEach(async () => {
  modelsDir = await mkdtemp(join(tmpdir(), 'sift-first-start-'));
});
afterEach(async () => {
  await stack?.stop();
  stack = undefined;
  await rm(modelsDir, { recursive: true, force: true });
});

it('reports a building model, answers 503 + Retry-After for it, and serves it once built without a restart', async () => {
  await writeStatus(building());
  stack = await TestStack.start({ modelsDir, buildPollMs: 100 });
  const s = stack;

  const ready = await s.call('GET', '/ready', { key: null });
  expect(ready.status).toBe(503);
  expect(ready.body.checks[`build:${MINI}`]).toMatchObject({
    ok: false,
    detail: expect.stringContaining('step 120/700'),
  });
  expect(ready.body.builds[MINI]).toMatchObject({ state: 'building', step: 120, total: 700, eta_seconds: 90 });
  expect(ready.body.builds[DECODER]).toMatchObject({ state: 'pending' });

  const catalog = (await s.call('GET', '/base-models')).body.data as any[];
  expect(catalog.find((m) => m.id === MINI)).toMatchObject({
    available: false,
    build: { state: 'building', stage: 'training', step: 120, total: 700, eta_seconds: 90 },
  });
  // a model the build does not make says nothing about it
  expect(catalog.find((m) => m.id === 'fastino/gliner2-base-v1')).not.toHaveProperty('build');

  const early = await s.call('POST', '/inference', { body: { model_id: MINI, text, schema } });
  expect(early.status).toBe(503);
  expect(early.headers.get('retry-after')).toBe('90');
  expect(early.body.detail).toContain(`Model '${MINI}' is not available yet`);
  expect(early.body.detail).toContain('step 120/700, about 2 min left');

  // progress moves on: the server reads the file again
  await writeStatus(
    building({
      models: {
        [MINI]: { state: 'building', stage: 'training', step: 600, total: 700, eta_seconds: 20 },
        [DECODER]: { state: 'pending' },
      },
    }),
  );
  await until('the new progress', async () =>
    (await s.call('GET', '/base-models')).body.data.find((m: any) => m.id === MINI)?.build?.step === 600
      ? true
      : undefined,
  );

  // the build finishes: its output lands in the models dir, then the status says done
  await cp(join(DEFAULT_MODELS_DIR, 'sift--gliner2-mini-v1'), join(modelsDir, 'sift--gliner2-mini-v1'), {
    recursive: true,
  });
  await writeStatus(
    building({
      models: { [MINI]: { state: 'done', stage: 'built' }, [DECODER]: { state: 'building', stage: 'starting' } },
    }),
  );
  const mini = await until('the mini model to be published', async () => {
    const m = (await s.call('GET', '/base-models')).body.data.find((x: any) => x.id === MINI);
    return m?.available ? m : undefined;
  });
  expect(mini).not.toHaveProperty('build');

  const served = await s.call('POST', '/inference', { body: { model_id: MINI, text, schema } });
  expect(served.status).toBe(200);
  expect(JSON.stringify(served.body)).toContain('Tim Cook');
  // the decoder is still building: not ready yet, and only it is named
  const stillBuilding = await s.call('GET', '/ready', { key: null });
  expect(stillBuilding.status).toBe(503);
  expect(Object.keys(stillBuilding.body.builds)).toEqual([DECODER]);
}, 120_000);

it('keeps a training job requested while the venv builds, and fails it with the reason when the build dies', async () => {
  await writeStatus(building({ stage: 'venv', venv: { state: 'building' }, models: { [MINI]: { state: 'pending' } } }));
  stack = await TestStack.start({ modelsDir, buildPollMs: 100, maxTrainingJobs: 1 });
  const s = stack;
  expect(
    (await s.uploadDataset('ner-set', jsonl([{ text: 'Tim Cook leads Apple.', entities: [['Tim Cook', 'person']] }])))
      .status,
  ).toBe('ready');
  const created = await s.call('POST', '/core/training-jobs', {
    body: { model_name: 'early', base_model: MINI, datasets: [{ name: 'ner-set' }] },
  });
  expect(created.status).toBe(201);
  const job = () => s.call('GET', `/core/training-jobs/${created.body.id}`).then((r) => r.body);

  // several polls of the status file later it still waits
  await new Promise((r) => setTimeout(r, 700));
  expect((await job()).status).toBe('requested');

  // the build process dies without finishing (its status file still says running)
  const dead = spawnSync(process.execPath, ['-e', '0']).pid;
  await writeStatus(
    building({ pid: dead, stage: 'venv', venv: { state: 'building' }, models: { [MINI]: { state: 'pending' } } }),
  );
  const failed = await until('the job to fail', async () => {
    const j = await job();
    return j.status === 'failed' ? j : undefined;
  });
  expect(failed.error).toContain('cannot train yet: the training venv could not be installed');
  expect(failed.error).toContain(`the build process (pid ${dead}) ended without finishing`);

  // the catalog and inference say the same, and a failed build gets no Retry-After
  const mini = (await s.call('GET', '/base-models')).body.data.find((m: any) => m.id === MINI);
  expect(mini.build).toMatchObject({
    state: 'failed',
    error: expect.stringContaining('ended without finishing'),
    log: join(modelsDir, '.sift-build.log'),
  });
  const res = await s.call('POST', '/inference', { body: { model_id: MINI, text, schema } });
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBeNull();
  expect(res.body.detail).toContain('its build failed');

  // a build stopped while the decoder was still queued: the decoder is reported failed, not queued
  await writeStatus(
    building({
      state: 'failed',
      error: 'the build was stopped (SIGTERM)',
      venv: { state: 'done' },
      models: { [MINI]: { state: 'failed', error: 'x' }, [DECODER]: { state: 'pending' } },
    }),
  );
  const decoder = await until('the stopped build', async () => {
    const m = (await s.call('GET', '/base-models')).body.data.find((x: any) => x.id === DECODER);
    return m?.build?.state === 'failed' ? m : undefined;
  });
  expect(decoder.build.error).toBe('the build was stopped (SIGTERM)');
}, 120_000);

it('leaves a job that waits for the build requested across a restart', async () => {
  await writeStatus(building({ stage: 'venv', venv: { state: 'building' }, models: { [MINI]: { state: 'pending' } } }));
  const dataDir = join(modelsDir, 'data');
  await mkdir(dataDir);
  const first = await TestStack.start({ dataDir, modelsDir, buildPollMs: 100, maxTrainingJobs: 1 });
  expect(
    (
      await first.uploadDataset(
        'ner-set',
        jsonl([{ text: 'Tim Cook leads Apple.', entities: [['Tim Cook', 'person']] }]),
      )
    ).status,
  ).toBe('ready');
  const id = (
    await first.call('POST', '/core/training-jobs', {
      body: { model_name: 'early', base_model: MINI, datasets: [{ name: 'ner-set' }] },
    })
  ).body.id as string;
  await new Promise((r) => setTimeout(r, 300));
  await first.stop();

  stack = await TestStack.start({ dataDir, modelsDir, buildPollMs: 100, maxTrainingJobs: 1 });
  const job = (await stack.call('GET', `/core/training-jobs/${id}`)).body;
  expect(job).toMatchObject({ status: 'requested', error: null });
}, 120_000);

it('starts a waiting job once the venv and its base model are built', async () => {
  await writeStatus(building({ stage: 'venv', venv: { state: 'building' }, models: { [MINI]: { state: 'pending' } } }));
  // the trainer itself is not under test: a "python" that exits at once with an error will do
  const trainer = join(modelsDir, 'trainer-stand-in');
  await writeFile(trainer, '#!/bin/sh\necho "stand-in trainer: not run in this test" >&2\nexit 3\n', { mode: 0o755 });
  stack = await TestStack.start({ modelsDir, buildPollMs: 100, maxTrainingJobs: 1, python: trainer });
  const s = stack;
  expect(
    (await s.uploadDataset('ner-set', jsonl([{ text: 'Tim Cook leads Apple.', entities: [['Tim Cook', 'person']] }])))
      .status,
  ).toBe('ready');
  const id = (
    await s.call('POST', '/core/training-jobs', {
      body: { model_name: 'early', base_model: MINI, datasets: [{ name: 'ner-set' }] },
    })
  ).body.id as string;
  const job = () => s.call('GET', `/core/training-jobs/${id}`).then((r) => r.body);

  // the venv is done, the base model still builds: it keeps waiting
  await writeStatus(building({ models: { [MINI]: { state: 'building', stage: 'training', step: 5, total: 700 } } }));
  await new Promise((r) => setTimeout(r, 500));
  expect((await job()).status).toBe('requested');

  await cp(join(DEFAULT_MODELS_DIR, 'sift--gliner2-mini-v1'), join(modelsDir, 'sift--gliner2-mini-v1'), {
    recursive: true,
  });
  await writeStatus(building({ state: 'done', stage: 'done', models: { [MINI]: { state: 'done', stage: 'built' } } }));
  // it ran: the base model was fetched from the store and the trainer started (and, being a stand-in, failed)
  const ran = await until('the job to run', async () => {
    const j = await job();
    return j.status === 'failed' ? j : undefined;
  });
  expect(ran.started_at).toEqual(expect.any(String));
  expect(ran.error).toBe('the trainer exited with code 3 and wrote no failure file');
}, 120_000);

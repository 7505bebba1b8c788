import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rowsKey } from '../../src/core/datasets/service';
import { startCycle } from '../../src/core/adaptive/cycles';
import { createEvaluation } from '../../src/core/evaluations';
import { transitionJob } from '../../src/core/trainingJobs';
import { silentLogger } from '../../src/http/logger';
import { startLocal } from '../../src/runtimes/local/main';
import { OPERATOR_KEY, TestStack, jsonl } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-local-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

describe('local mode', () => {
  it('creates and returns one operator key on first start when none is given, and not again', async () => {
    const first = await startLocal({ port: 0, dataDir: dir, logger: silentLogger, modelsDir: join(dir, 'no-models') });
    expect(first.createdAdminKey).toMatch(/^svc_sk_/);
    const key = first.createdAdminKey as string;
    await first.close();
    const second = await startLocal({ port: 0, dataDir: dir, logger: silentLogger, modelsDir: join(dir, 'no-models') });
    expect(second.createdAdminKey).toBeUndefined();
    const res = await fetch(`${second.url}/teams`, { headers: { 'x-api-key': key } });
    expect(res.status).toBe(200);
    await second.close();
  });

  it('keeps state across restarts: keys, datasets with their files, projects', async () => {
    const a = await TestStack.start({ dataDir: dir });
    const ready = await a.uploadDataset('persisted', jsonl([{ text: 'a b', label: 'x' }]));
    expect(ready.status).toBe('ready');
    const member = (await a.call('POST', '/api-keys', { body: { name: 'm' } })).body.key;
    await a.call('POST', '/projects', { body: { name: 'kept' } });
    await a.stop();

    const b = await TestStack.start({ dataDir: dir });
    expect((await b.call('GET', '/core/datasets/persisted/1')).body).toMatchObject({ status: 'ready', row_count: 1 });
    expect((await b.call('GET', '/projects/kept', { key: member })).status).toBe(200);
    const team = (await b.call('GET', '/billing/usage/requests')).body.team_id;
    expect(await b.svc.blobs.getText(rowsKey(team, 'persisted', 1))).toContain('"label":"x"');
    await b.stop();
  });

  it('adds a new SIFT_ADMIN_KEY to an existing installation', async () => {
    const a = await TestStack.start({ dataDir: dir });
    await a.stop();
    const rotated = 'svc_sk_rotated-operator-key-abcdefghijklmnopqrstuv';
    const b = await TestStack.start({ dataDir: dir, adminKey: rotated });
    expect((await b.call('GET', '/teams', { key: rotated })).status).toBe(200);
    expect((await b.call('GET', '/teams', { key: OPERATOR_KEY })).status).toBe(200);
    await b.stop();
  });

  it('rejects a SIFT_ADMIN_KEY that is not an API key', async () => {
    await expect(startLocal({ port: 0, dataDir: dir, adminKey: 'hunter2', logger: silentLogger })).rejects.toThrow(
      /svc_sk_/,
    );
  });

  it('resumes a dataset version left processing by a crash', async () => {
    const a = await TestStack.start({ dataDir: dir });
    const url = (
      await a.call('POST', '/core/datasets/upload/url', { body: { dataset_name: 'crashy', file_name: 'r.jsonl' } })
    ).body;
    await fetch(url.upload_url, { method: 'PUT', body: jsonl([{ text: 'hello', label: 'greeting' }]) });
    const team = (await a.call('GET', '/billing/usage/requests')).body.team_id;
    // Simulate a crash between "processing" being recorded and the worker running.
    await a.svc.records.update(`TEAM#${team}`, 'DSV#crashy#000001', { set: { status: 'processing' } });
    await a.stop();
    const b = await TestStack.start({ dataDir: dir });
    await b.service.idle();
    expect((await b.call('GET', '/core/datasets/crashy/1')).body.status).toBe('ready');
    await b.stop();
  });

  it('never leaves a job looking alive after a crash: running → failed with the reason, requested stays queued', async () => {
    const a = await TestStack.start({ dataDir: dir });
    await a.uploadDataset('jobs-data', jsonl([{ text: 'Tim Cook runs Apple', entities: [['Tim Cook', 'person']] }]));
    const team = (await a.call('GET', '/billing/usage/requests')).body.team_id;
    const body = { model_name: 'm', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'jobs-data' }] };
    const wasRunning = (await a.call('POST', '/core/training-jobs', { body })).body.id;
    const wasQueued = (await a.call('POST', '/core/training-jobs', { body })).body.id;
    await transitionJob(a.svc, team, wasRunning, 'running');
    await a.stop();
    const b = await TestStack.start({ dataDir: dir });
    const crashed = (await b.call('GET', `/core/training-jobs/${wasRunning}`)).body;
    expect(crashed.status).toBe('failed');
    expect(crashed.error).toMatch(/stopped while this job was running/);
    expect((await b.call('GET', `/core/training-jobs/${wasQueued}`)).body.status).toBe('requested');
    await b.stop();
  });

  it('restarts an evaluation that a stop interrupted, which then completes', async () => {
    const a = await TestStack.start({ dataDir: dir, withModels: true });
    await a.uploadDataset('eval-data', jsonl([{ text: 'Tim Cook runs Apple', entities: [['Tim Cook', 'person']] }]));
    const team = (await a.call('GET', '/billing/usage/requests')).body.team_id;
    // the record as a crash leaves it: running, with no execution behind it
    const interrupted = await createEvaluation({ ...a.svc, workflows: { start: async () => {} } }, team, {
      base_model: 'sift/gliner2-mini-v1',
      dataset_name: 'eval-data',
    });
    await a.stop();
    const b = await TestStack.start({ dataDir: dir, withModels: true });
    await b.service.idle();
    const after = (await b.call('GET', `/core/evaluations/${interrupted.id}`)).body;
    expect(after.status).toBe('complete');
    expect(after.metrics.support.rows).toBe(1);
    await b.stop();
  }, 120_000);

  it('resumes an adaptive cycle that a stop interrupted; it finishes and frees its project', async () => {
    const a = await TestStack.start({ dataDir: dir, withModels: true });
    await a.uploadDataset(
      'adaptive-seed',
      jsonl([{ text: 'Tim Cook runs Apple', entities: [['Tim Cook', 'person']] }]),
    );
    const team = (await a.call('GET', '/billing/usage/requests')).body.team_id;
    const job = await seedCompleteEncoderJob(a, team, 'adaptive-seed');
    await a.call('POST', '/projects', { body: { name: 'resumed' } });
    expect((await a.call('POST', '/projects/resumed/deployments', { body: { training_job_id: job.id } })).status).toBe(
      201,
    );
    // the records as a crash leaves them: a running cycle holding its project, no execution behind it
    const cycle = await startCycle({ ...a.svc, workflows: { start: async () => {} } }, team, 'resumed');
    expect((await a.call('GET', '/projects/resumed')).body.adaptive_cycle_id).toBe(cycle.id);
    await a.stop();
    const b = await TestStack.start({ dataDir: dir, withModels: true });
    await b.service.idle();
    const after = (await b.call('GET', `/projects/resumed/adaptive-cycles/${cycle.id}`)).body;
    expect(after).toMatchObject({ status: 'skipped', stage: 'done' });
    expect(after.reason).toMatch(/0 reviewed traces/);
    expect((await b.call('GET', '/projects/resumed')).body.adaptive_cycle_id).toBeUndefined();
    await b.stop();
  }, 120_000);
});

/**
 * Finance's CloudWatch view: a billed request in local mode writes EMF lines, and a finished
 * training job its GPU minutes; every metric + dimension set the synthesized finance dashboard
 * queries must be among them (else the widget shows nothing on AWS).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newUuid } from '../../src/core/ids';
import { jobItem } from '../../src/core/recordKeys';
import { transitionJob } from '../../src/core/trainingJobs';
import { trainingCostMicros } from '../../src/core/billing/prices';
import { silentLogger } from '../../src/http/logger';
import { startLocal, type LocalService } from '../../src/runtimes/local/main';
import { buildApp } from '../cdk/helpers';
import { FAKE_MODEL, startFakeVllm, type FakeVllm } from '../helpers/fakeVllm';
import { dashboardBody, dashboardQueries, emfMetrics } from '../helpers/financeDashboard';
import { configureDecoder, OpenAiUpstreamDecoder } from '../../src/adapters/decoder';

const OPERATOR = 'svc_sk_test-operator-key-0123456789abcdefghijklmnop';
let service: LocalService;
let vllm: FakeVllm;
let dataDir: string;
const lines: string[] = [];

beforeAll(async () => {
  vllm = await startFakeVllm();
  dataDir = await mkdtemp(join(tmpdir(), 'sift-emf-'));
  service = await startLocal({
    port: 0,
    dataDir,
    adminKey: OPERATOR,
    logger: silentLogger,
    maxTrainingJobs: 0,
    modelsDir: join(dataDir, 'none'),
    metricsOut: (l) => lines.push(l),
  });
  configureDecoder(service.svc, { backend: new OpenAiUpstreamDecoder({ baseUrl: vllm.url }) });
}, 60_000);
afterAll(async () => {
  await service?.close();
  await vllm?.close();
  await rm(dataDir, { recursive: true, force: true });
});

it('a billed request and a finished training job emit every metric the finance dashboard reads', async () => {
  const res = await fetch(`${service.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'x-api-key': OPERATOR, 'content-type': 'application/json' },
    body: JSON.stringify({ model: FAKE_MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 10 }),
  });
  expect(res.status).toBe(200);
  const billedLine = lines.map((l) => JSON.parse(l)).find((d) => d.endpoint === '/v1/chat/completions');
  expect(billedLine).toMatchObject({
    model: FAKE_MODEL,
    Requests: 1,
    InputTokens: 1000,
    OutputTokens: 100,
    CacheReadTokens: 0,
    CacheWriteTokens: 0,
  });
  expect(billedLine.CostUsd).toBeCloseTo(0.00006, 10);
  expect(billedLine.service).toBeUndefined(); // SCHEMA(…) matches the exact dimension set

  // a training job that trained 90 s on an ml.g5.xlarge ends: its cost is billed (one line, like a
  // request's) and its GPU minutes are emitted, once — a repeated completion changes nothing
  const svc = service.svc;
  const usage = (await (
    await fetch(`${service.url}/billing/usage/requests`, { headers: { 'x-api-key': OPERATOR } })
  ).json()) as { team_id: string };
  const teamId = usage.team_id;
  const id = newUuid();
  const started = new Date(Date.now() - 90_000).toISOString();
  await svc.records.put(jobItem(teamId, id), {
    id,
    status: 'running',
    base_model: 'sift/gliner2-mini-v1',
    root_model: 'sift/gliner2-mini-v1',
    started_at: started,
    finished_at: null,
    instance_type: 'ml.g5.xlarge',
  });
  await transitionJob(svc, teamId, id, 'complete', { compute_seconds: 90 });
  await expect(transitionJob(svc, teamId, id, 'complete', { compute_seconds: 90 })).rejects.toThrow(/is complete/);
  const allTraining = () => lines.map((l) => JSON.parse(l)).filter((d) => d.endpoint === '/core/training-jobs');
  expect(allTraining()).toHaveLength(2);
  const costLine = allTraining().find((d) => 'CostUsd' in d);
  expect(costLine).toMatchObject({ model: 'sift/gliner2-mini-v1', Requests: 1, InputTokens: 0, OutputTokens: 0 });
  expect(costLine.CostUsd).toBeCloseTo(trainingCostMicros('ml.g5.xlarge', 90) / 1e6, 10);
  expect(costLine.CostUsd).toBeCloseTo((90 / 3600) * 1.408 * 1.25, 4); // AWS's hourly price × the markup
  expect(allTraining().filter((d) => 'GpuMinutes' in d)).toEqual([
    expect.objectContaining({ model: 'sift/gliner2-mini-v1', GpuMinutes: 1.5 }),
  ]);

  // a job without SageMaker's count and without a recorded instance: its minutes come from
  // started_at → finished_at (90 s, give or take the test's own seconds) on the stage's
  // SIFT_TRAINING_INSTANCE_TYPE (one GPU); ended twice, it still emits one GpuMinutes line
  // as the service would have read SIFT_TRAINING_INSTANCE_TYPE at start (configuration is read once per process)
  const previous = svc.config.trainingInstanceType;
  svc.config.trainingInstanceType = 'ml.g5.xlarge';
  try {
    const timed = newUuid();
    await svc.records.put(jobItem(teamId, timed), {
      id: timed,
      status: 'running',
      base_model: 'sift/gliner2-mini-v1',
      root_model: 'sift/gliner2-mini-v1',
      started_at: new Date(Date.now() - 90_000).toISOString(),
      finished_at: null,
    });
    const before = allTraining().length;
    await transitionJob(svc, teamId, timed, 'complete');
    await expect(transitionJob(svc, teamId, timed, 'complete')).rejects.toThrow(/is complete/);
    const emitted = allTraining().slice(before);
    expect(emitted).toHaveLength(2); // its cost line and its GPU minutes, each once
    const minutes = emitted.filter((d) => 'GpuMinutes' in d);
    expect(minutes).toHaveLength(1);
    expect(minutes[0].GpuMinutes).toBeGreaterThanOrEqual(1.5);
    expect(minutes[0].GpuMinutes).toBeLessThan(1.6); // 90 s to 96 s: the seconds, in minutes, × 1 GPU
  } finally {
    svc.config.trainingInstanceType = previous;
  }

  const built = buildApp();
  const queries = dashboardQueries(dashboardBody(built.template(built.stacks.observability), 'FinanceDashboard'));
  expect(queries.length).toBeGreaterThan(10);
  const emitted = new Set(lines.flatMap(emfMetrics).map((m) => `${m.namespace}/${m.metric}/${m.dimensions.join(',')}`));
  const missing = queries
    .map((q) => `${q.namespace}/${q.metric}/${q.dimensions.join(',')}`)
    .filter((q) => !emitted.has(q));
  expect(missing).toEqual([]);
  for (const metric of [
    'Requests',
    'InputTokens',
    'OutputTokens',
    'CacheReadTokens',
    'CacheWriteTokens',
    'CostUsd',
    'GpuMinutes',
  ]) {
    expect(queries.some((q) => q.metric === metric)).toBe(true);
  }
}, 120_000);

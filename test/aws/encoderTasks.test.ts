/**
 * The AWS path of engine-bound workflow tasks: the workflow Lambda's forwarder
 * (src/aws/encoderTasks.ts) calling the encoder service's internal route over real HTTP, as
 * `sift serve-aws` mounts it, on the local stack's stores and the mini model.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { runOnEncoderService } from '../../src/aws/encoderTasks';
import { createEvaluation } from '../../src/core/evaluations';
import { SiftApp } from '../../src/http/app';
import { silentLogger } from '../../src/http/logger';
import { allRoutes } from '../../src/http/routes';
import { internalRoutes } from '../../src/http/routes/internal';
import { nodeHandler } from '../../src/runtimes/node/httpAdapter';
import { jsonl, TestStack } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';

const TOKEN = 'internal-token-for-tests-0123456789abcdef';
let stack: TestStack;
let server: Server;
let baseUrl: string;
let teamId: string;
let evaluationId: string;
const saved = process.env.SIFT_INTERNAL_TOKEN;

beforeAll(async () => {
  process.env.SIFT_INTERNAL_TOKEN = TOKEN;
  stack = await TestStack.start({ withModels: true });
  teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
  await stack.uploadDataset(
    'people',
    jsonl([
      {
        text: 'Tim Cook visited Paris.',
        entities: [
          ['Tim Cook', 'person'],
          ['Paris', 'city'],
        ],
      },
    ]),
  );
  // the record only: this test drives the shard task itself
  const svc = { ...stack.svc, workflows: { start: async () => {} } };
  evaluationId = (await createEvaluation(svc, teamId, { base_model: 'sift/gliner2-mini-v1', dataset_name: 'people' }))
    .id;
  const app = new SiftApp(stack.svc, [...allRoutes(), ...internalRoutes()], silentLogger);
  server = createServer(nodeHandler(app, stack.svc.config.maxBodyBytes));
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}, 120_000);
afterAll(async () => {
  await new Promise<void>((ok) => server?.close(() => ok()));
  await stack?.stop();
  if (saved === undefined) delete process.env.SIFT_INTERNAL_TOKEN;
  else process.env.SIFT_INTERNAL_TOKEN = saved;
});

const input = () => ({ evaluationId, teamId, shard: { offset: 0, count: 1 } });

it('runs evaluation.shard on the encoder service, which stores the counts and returns their key', async () => {
  const result = (await runOnEncoderService('evaluation.shard', input(), { baseUrl, token: TOKEN })) as {
    key: string;
    rows: number;
  };
  expect(result.rows).toBe(1);
  const counts = JSON.parse(await stack.svc.blobs.getText(result.key)) as {
    per_entity: Record<string, { tp: number; fn: number }>;
  };
  expect(counts.per_entity.person!.tp + counts.per_entity.person!.fn).toBe(1);
});

it("runs training.validate: the job's headline metrics from the engine on its held-out rows", async () => {
  const job = await seedCompleteEncoderJob(stack, teamId, 'people');
  const rows = [
    {
      text: 'Tim Cook visited Paris.',
      entities: [
        { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
        { text: 'Paris', label: 'city', start: 17, end: 22 },
      ],
    },
  ];
  await stack.svc.blobs.put(`jobs/${teamId}/${job.id}/model/validation.jsonl`, jsonl(rows));
  const metrics = (await runOnEncoderService(
    'training.validate',
    { teamId, jobId: job.id },
    { baseUrl, token: TOKEN },
  )) as Record<string, any>;
  expect(metrics.support.rows).toBe(1);
  expect(Object.keys(metrics.per_entity).sort()).toEqual(['city', 'person']);
  expect(metrics.f1).toBeGreaterThan(0);
});

it('a wrong token gets 404 (the route does not exist for it) and fails the task for good', async () => {
  await expect(
    runOnEncoderService('evaluation.shard', input(), { baseUrl, token: 'x'.repeat(40) }),
  ).rejects.toMatchObject({ name: 'Sift.TaskFailed', message: expect.stringContaining('404') });
  const direct = await fetch(`${baseUrl}/internal/tasks/evaluation.shard`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(input()),
  });
  expect(direct.status).toBe(404);
});

it('bad input is a 422 (not retried); an unreachable service is transient (retried)', async () => {
  await expect(
    runOnEncoderService('evaluation.shard', { evaluationId, teamId }, { baseUrl, token: TOKEN }),
  ).rejects.toMatchObject({ name: 'Sift.TaskFailed', message: expect.stringContaining('422') });
  await expect(
    runOnEncoderService('evaluation.shard', input(), { baseUrl: 'http://127.0.0.1:9', token: TOKEN, timeoutMs: 2000 }),
  ).rejects.toMatchObject({ name: 'Sift.TransientError' });
});

it("the ALB's own 503 (HTML, no Retry-After: the service is at zero or booting) is Sift.ServiceWaking; the gateway's 503 with Retry-After stays transient", async () => {
  const answer =
    (status: number, body: string, headers: Record<string, string>): typeof fetch =>
    async () =>
      new Response(body, { status, headers });
  const albAtZero = answer(
    503,
    '<html><head><title>503 Service Temporarily Unavailable</title></head><body><center><h1>503 Service Temporarily Unavailable</h1></center></body></html>',
    { 'content-type': 'text/html' },
  );
  await expect(
    runOnEncoderService('evaluation.shard', input(), { baseUrl, token: TOKEN, fetchImpl: albAtZero }),
  ).rejects.toMatchObject({ name: 'Sift.ServiceWaking', message: expect.stringContaining('503') });
  const storeDown = answer(503, JSON.stringify({ detail: 'store unavailable' }), {
    'content-type': 'application/json',
    'retry-after': '3',
  });
  await expect(
    runOnEncoderService('evaluation.shard', input(), { baseUrl, token: TOKEN, fetchImpl: storeDown }),
  ).rejects.toMatchObject({ name: 'Sift.TransientError', message: expect.stringContaining('store unavailable') });
  const badGateway = answer(502, 'bad gateway', {});
  await expect(
    runOnEncoderService('evaluation.shard', input(), { baseUrl, token: TOKEN, fetchImpl: badGateway }),
  ).rejects.toMatchObject({ name: 'Sift.TransientError' });
});

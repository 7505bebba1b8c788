/**
 * Adapter-pair contract: the same requests through the node:http server (local mode, ECS) and
 * through the API Gateway Lambda adapter give the same status, headers that matter and body shape.
 * Then the real Lambda entry points (lambdas/*.ts), pointed at the emulators through the SDK's
 * standard AWS_ENDPOINT_URL_DYNAMODB / AWS_ENDPOINT_URL_S3 variables (an IP endpoint makes S3 path-style).
 */
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context, SQSEvent } from 'aws-lambda';
import { SiftApp } from '../../src/http/app';
import { silentLogger } from '../../src/http/logger';
import { allRoutes } from '../../src/http/routes';
import { fromApiGatewayEvent, toApiGatewayResult } from '../../src/runtimes/lambda/apiGateway';
import { FakeApiGateway } from '../helpers/fakeApiGateway';
import {
  apiGatewayEvent,
  authorizerRequestEvent,
  emulatorEnv,
  lambdaContext as context,
} from '../helpers/lambdaEvents';
import { jsonl, TestStack, type CallResult } from '../helpers/localStack';

let stack: TestStack;
let app: SiftApp;

beforeAll(async () => {
  stack = await TestStack.start();
  app = new SiftApp(stack.svc, allRoutes(), silentLogger);
});
afterAll(async () => stack.stop());

async function viaLambda(method: string, path: string, opts: Parameters<typeof apiGatewayEvent>[2] = {}) {
  const result = await toApiGatewayResult(await app.handle(fromApiGatewayEvent(apiGatewayEvent(method, path, opts))));
  return {
    result,
    body: result.body
      ? JSON.parse(result.isBase64Encoded ? Buffer.from(result.body, 'base64').toString() : result.body)
      : undefined,
  };
}

/** The structure of a JSON value: keys and types, not values. */
function shape(v: unknown): unknown {
  if (Array.isArray(v)) return v.length ? [shape(v[0])] : [];
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, shape((v as Record<string, unknown>)[k])]),
    );
  return v === null ? 'null' : typeof v;
}

const HEADERS_THAT_MATTER = ['content-type', 'x-ratelimit-limit', 'allow', 'retry-after'];

function expectSameResponse(
  http: CallResult,
  lambda: { result: APIGatewayProxyResult; body: unknown },
  opts: { exactBody?: boolean } = {},
) {
  expect(lambda.result.statusCode).toBe(http.status);
  expect(lambda.result.isBase64Encoded).toBe(false);
  const headers = lambda.result.headers as Record<string, string>;
  for (const h of HEADERS_THAT_MATTER) expect([h, headers[h] ?? null]).toEqual([h, http.headers.get(h)]);
  expect(headers['x-request-id']).toMatch(/.{8,}/);
  expect(shape(lambda.body)).toEqual(shape(http.body));
  if (opts.exactBody) expect(lambda.body).toEqual(http.body);
}

describe('node:http and the API Gateway adapter answer alike', () => {
  it('GET /base-models (with and without a query)', async () => {
    expectSameResponse(await stack.call('GET', '/base-models'), await viaLambda('GET', '/base-models'), {
      exactBody: true,
    });
    const http = await stack.call('GET', '/base-models?task_type=encoder&supports_training=true');
    expect(http.status).toBe(200);
    expect(http.body.data.length).toBeGreaterThan(0);
    expectSameResponse(http, await viaLambda('GET', '/base-models?task_type=encoder&supports_training=true'), {
      exactBody: true,
    });
  });

  it('a 422 (bad query, unknown body field), with the same errors', async () => {
    const http = await stack.call('GET', '/base-models?task_type=banana');
    expect(http.status).toBe(422);
    expectSameResponse(http, await viaLambda('GET', '/base-models?task_type=banana'), { exactBody: true });
    const body = { name: 'x', colour: 'red' };
    const h2 = await stack.call('POST', '/projects', { body });
    expect(h2.status).toBe(422);
    expectSameResponse(h2, await viaLambda('POST', '/projects', { body }), { exactBody: true });
  });

  it('a 401 without a key, and with a key of another format', async () => {
    const http = await stack.call('GET', '/projects', { key: null });
    expect(http.status).toBe(401);
    expectSameResponse(http, await viaLambda('GET', '/projects', { key: null }), { exactBody: true });
    const h2 = await stack.call('GET', '/projects', { key: 'sk-live-nope' });
    expectSameResponse(h2, await viaLambda('GET', '/projects', { key: 'sk-live-nope' }), { exactBody: true });
  });

  it('a 404 for an unknown route and for an unknown resource; a 405 with Allow', async () => {
    const http = await stack.call('GET', '/no/such/route');
    expect(http.status).toBe(404);
    expectSameResponse(http, await viaLambda('GET', '/no/such/route'), { exactBody: true });
    const h2 = await stack.call('GET', '/core/datasets/never-made');
    expect(h2.status).toBe(404);
    expectSameResponse(h2, await viaLambda('GET', '/core/datasets/never-made'), { exactBody: true });
    const h3 = await stack.call('PUT', '/projects');
    expect(h3.status).toBe(405);
    expectSameResponse(h3, await viaLambda('PUT', '/projects'), { exactBody: true });
  });

  it('POST /projects then GET, each path reading what the other wrote', async () => {
    const fromHttp = await stack.call('POST', '/projects', { body: { name: 'made-over-http', description: 'h' } });
    const fromLambda = await viaLambda('POST', '/projects', { body: { name: 'made-in-lambda', description: 'l' } });
    expect(fromHttp.status).toBe(201);
    expectSameResponse(fromHttp, fromLambda);
    expect(fromLambda.body).toMatchObject({ name: 'made-in-lambda', description: 'l', active_training_job_id: null });

    const readHttp = await stack.call('GET', `/projects/${(fromLambda.body as { id: string }).id}`);
    const readLambda = await viaLambda('GET', `/projects/${fromHttp.body.id}`);
    expect(readHttp.status).toBe(200);
    expect(readHttp.body).toEqual(fromLambda.body);
    expect(readLambda.body).toEqual(fromHttp.body);
    expectSameResponse(readHttp, readLambda);

    const listHttp = await stack.call('GET', '/projects');
    expectSameResponse(listHttp, await viaLambda('GET', '/projects'), { exactBody: true });
    // A duplicate name is a 409 either way.
    expectSameResponse(
      await stack.call('POST', '/projects', { body: { name: 'made-in-lambda' } }),
      await viaLambda('POST', '/projects', { body: { name: 'made-over-http' } }),
    );
  });

  it('decodes a base64 body from API Gateway (binary media types)', async () => {
    const res = await viaLambda('POST', '/projects', { body: { name: 'sent-as-base64' }, base64: true });
    expect(res.result.statusCode).toBe(201);
    expect((await stack.call('GET', '/projects/sent-as-base64')).status).toBe(200);
  });

  it('echoes a client x-request-id either way', async () => {
    const http = await stack.call('GET', '/projects', { headers: { 'x-request-id': 'same-id-123456' } });
    const lambda = await viaLambda('GET', '/projects', { headers: { 'X-Request-Id': 'same-id-123456' } });
    expect(http.headers.get('x-request-id')).toBe('same-id-123456');
    expect((lambda.result.headers as Record<string, string>)['x-request-id']).toBe('same-id-123456');
  });
});

describe('toApiGatewayResult', () => {
  it('base64-encodes Buffer bodies, passes strings and collects streams', async () => {
    expect(await toApiGatewayResult({ status: 200, raw: Buffer.from([0, 255]) })).toEqual({
      statusCode: 200,
      headers: {},
      body: 'AP8=',
      isBase64Encoded: true,
    });
    expect(await toApiGatewayResult({ status: 200, raw: 'plain', headers: { 'content-type': 'text/plain' } })).toEqual({
      statusCode: 200,
      headers: { 'content-type': 'text/plain' },
      body: 'plain',
      isBase64Encoded: false,
    });
    async function* chunks() {
      yield 'data: 1\n\n';
      yield new TextEncoder().encode('data: 🎉\n\n');
    }
    expect((await toApiGatewayResult({ status: 200, stream: chunks() })).body).toBe('data: 1\n\ndata: 🎉\n\n');
    expect(await toApiGatewayResult({ status: 204 })).toEqual({
      statusCode: 204,
      headers: {},
      body: '',
      isBase64Encoded: false,
    });
  });
});

describe('the Lambda entry points (lambdas/*.ts) against the emulators', () => {
  const saved = { ...process.env };
  let api: (e: APIGatewayProxyEvent, c: Context) => Promise<APIGatewayProxyResult>;
  let authorizer: typeof import('../../lambdas/authorizer').handler;
  let worker: (e: SQSEvent, c: Context) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;
  let gateway: FakeApiGateway;

  beforeAll(async () => {
    gateway = await FakeApiGateway.start(['free', 'pro', 'research', 'custom'].map((p) => `sift-test-${p}`));
    Object.assign(process.env, await emulatorEnv(stack.svc), {
      AWS_ENDPOINT_URL_API_GATEWAY: gateway.endpoint,
      SIFT_QUEUE_URL: 'http://127.0.0.1:1/000000000000/unused',
      // No SQS here: a send fails at once (connection refused), without retries.
      AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:1',
    });
    api = (await import('../../lambdas/api')).handler as unknown as typeof api;
    authorizer = (await import('../../lambdas/authorizer')).handler;
    worker = (await import('../../lambdas/worker')).handler as unknown as typeof worker;
  });
  afterAll(async () => {
    process.env = saved;
    await gateway.stop();
  });

  it('api: the middy handler answers like the local server', async () => {
    const res = await api(apiGatewayEvent('GET', '/base-models'), context);
    expect(res.statusCode).toBe(200);
    expect(JSON.parse(res.body)).toEqual((await stack.call('GET', '/base-models')).body);
    const unauth = await api(apiGatewayEvent('GET', '/projects', { key: null }), context);
    expect(unauth.statusCode).toBe(401);
    const created = await api(apiGatewayEvent('POST', '/projects', { body: { name: 'made-by-api-lambda' } }), context);
    expect(created.statusCode).toBe(201);
    expect((await stack.call('GET', '/projects/made-by-api-lambda')).body).toEqual(JSON.parse(created.body));
    // Lambdas share rate-limit windows through DynamoDB: the counter items are in the table.
    const windows = await stack.svc.records.query(`RATE#edge:198.51.100.7#60`);
    expect(windows.items.length).toBeGreaterThan(0);
  });

  it('authorizer: a valid key (TOKEN or REQUEST) gets a wildcard Allow policy and its team; others are Unauthorized', async () => {
    const team = await stack.newTeam('authz');
    const methodArn = 'arn:aws:execute-api:us-east-1:123456789012:abcdef/prod/GET/core/datasets';
    const token = await authorizer({ type: 'TOKEN', authorizationToken: team.key, methodArn });
    expect(token.policyDocument.Statement).toEqual([
      {
        Action: 'execute-api:Invoke',
        Effect: 'Allow',
        Resource: 'arn:aws:execute-api:us-east-1:123456789012:abcdef/prod/*',
      },
    ]);
    expect(token.context).toMatchObject({ team_id: team.teamId, role: 'admin' });
    expect(token.principalId).toEqual(expect.any(String));
    // the team's usage plan key: made on its first request, in its plan's usage plan (teams default to pro)
    const key = [...gateway.keys.values()].find((k) => k.tags['sift:team'] === team.teamId)!;
    expect(token.usageIdentifierKey).toBe(key.value);
    expect(gateway.planOfKey(key.id)).toBe('sift-test-pro');

    const v1Arn = 'arn:aws:execute-api:us-east-1:123456789012:abcdef/prod/POST/v1/chat/completions';
    const bearer = await authorizer({ type: 'TOKEN', authorizationToken: `Bearer ${team.key}`, methodArn: v1Arn });
    expect(bearer.context).toMatchObject({ team_id: team.teamId });
    // Bearer keys are for the compatible API only.
    await expect(authorizer({ type: 'TOKEN', authorizationToken: `Bearer ${team.key}`, methodArn })).rejects.toThrow(
      'Unauthorized',
    );

    const request = await authorizer(
      authorizerRequestEvent(methodArn, 'GET', '/core/datasets', { 'X-API-Key': team.key }, '/{proxy+}'),
    );
    expect(request.context).toMatchObject({ team_id: team.teamId });
    expect(request.usageIdentifierKey).toBe(key.value);
    expect([...gateway.keys.values()].filter((k) => k.tags['sift:team'] === team.teamId)).toHaveLength(1);

    for (const bad of ['svc_sk_unknown-key-0000000000000000000000000000', 'sk-other-format', '']) {
      await expect(authorizer({ type: 'TOKEN', authorizationToken: bad, methodArn })).rejects.toThrow(/^Unauthorized$/);
    }
    // A revoked key is refused at once.
    const made = await stack.call('POST', '/api-keys', { key: team.key, body: { name: 'short-lived' } });
    expect((await authorizer({ type: 'TOKEN', authorizationToken: made.body.key, methodArn })).context).toMatchObject({
      team_id: team.teamId,
    });
    expect((await stack.call('DELETE', `/api-keys/${made.body.id}`, { key: team.key })).status).toBe(200);
    await expect(authorizer({ type: 'TOKEN', authorizationToken: made.body.key, methodArn })).rejects.toThrow(
      'Unauthorized',
    );
  });

  it('authorizer on /v1/ (REQUEST, no identity sources): X-API-Key alone and Authorization: Bearer alone both pass; neither is Unauthorized', async () => {
    const team = await stack.newTeam('authz-v1');
    const methodArn = 'arn:aws:execute-api:us-east-1:123456789012:abcdef/prod/POST/v1/chat/completions';
    const request = (headers: Record<string, string>) =>
      authorizer(authorizerRequestEvent(methodArn, 'POST', '/v1/chat/completions', headers));
    expect((await request({ 'X-API-Key': team.key })).context).toMatchObject({ team_id: team.teamId });
    expect((await request({ Authorization: `Bearer ${team.key}` })).context).toMatchObject({ team_id: team.teamId });
    await expect(request({})).rejects.toThrow(/^Unauthorized$/);
    await expect(request({ Authorization: 'Bearer sk-other-format' })).rejects.toThrow(/^Unauthorized$/);
  });

  it('authorizer: a free team is throttled by the free usage plan; a team whose key cannot be made still authenticates, keyless', async () => {
    const methodArn = 'arn:aws:execute-api:us-east-1:123456789012:abcdef/prod/GET/core/datasets';
    const free = await stack.call('POST', '/teams', { body: { name: 'free-authz', plan: 'free' } });
    const ok = await authorizer({ type: 'TOKEN', authorizationToken: free.body.api_key.key, methodArn });
    const key = [...gateway.keys.values()].find((k) => k.value === ok.usageIdentifierKey)!;
    expect(gateway.planOfKey(key.id)).toBe('sift-test-free');

    const unlucky = await stack.newTeam('gateway-down');
    gateway.failNext = 'POST /apikeys';
    const keyless = await authorizer({ type: 'TOKEN', authorizationToken: unlucky.key, methodArn });
    expect(keyless.context).toMatchObject({ team_id: unlucky.teamId });
    expect(keyless.usageIdentifierKey).toBeUndefined();
  });

  it('worker: an SQS message takes an uploaded version to ready, and a redelivery changes nothing', async () => {
    const team = await stack.newTeam('sqs-worker');
    const content = jsonl([{ text: 'Tim Cook runs Apple', entities: [['Tim Cook', 'person']] }]);
    const url = await stack.call('POST', '/core/datasets/upload/url', {
      key: team.key,
      body: { dataset_name: 'via-sqs', file_name: 'rows.jsonl' },
    });
    expect((await fetch(url.body.upload_url, { method: 'PUT', body: content })).status).toBe(200);
    // What POST …/process does before it sends the message to SQS.
    await stack.svc.records.update(`TEAM#${team.teamId}`, 'DSV#via-sqs#000001', { set: { status: 'processing' } });
    const body = JSON.stringify({ type: 'dataset.process', team_id: team.teamId, dataset_name: 'via-sqs', version: 1 });
    const event = { Records: [{ messageId: 'a', body } as SQSEvent['Records'][number]] };
    expect(await worker(event, context)).toEqual({ batchItemFailures: [] });
    const ready = await stack.call('GET', '/core/datasets/via-sqs/1', { key: team.key });
    expect(ready.body).toMatchObject({ status: 'ready', row_count: 1, task_types: ['ner'], entity_types: ['person'] });
    expect(await worker(event, context)).toEqual({ batchItemFailures: [] });
    expect((await stack.call('GET', '/core/datasets/via-sqs/1', { key: team.key })).body).toEqual(ready.body);
  });

  it('api: when the queue refuses the message, the version is not left stuck in processing', async () => {
    const team = await stack.newTeam('sqs-down');
    const key = team.key;
    const reserved = await api(
      apiGatewayEvent('POST', '/core/datasets/upload/url', {
        key,
        body: { dataset_name: 'queue-down', file_name: 'rows.jsonl' },
      }),
      context,
    );
    expect(reserved.statusCode).toBe(200);
    const uploadUrl = JSON.parse(reserved.body).upload_url as string;
    expect((await fetch(uploadUrl, { method: 'PUT', body: jsonl([{ text: 'a', label: 'x' }]) })).status).toBe(200);
    const processed = await api(
      apiGatewayEvent('POST', '/core/datasets/upload/process', {
        key,
        body: { dataset_name: 'queue-down', version: 1 },
      }),
      context,
    );
    expect(processed.statusCode).toBe(500);
    expect((await stack.call('GET', '/core/datasets/queue-down/1', { key })).body.status).toBe('pending_upload');
    // So the caller can simply try again (here through the local server, whose queue works).
    expect(
      (
        await stack.call('POST', '/core/datasets/upload/process', {
          key,
          body: { dataset_name: 'queue-down', version: 1 },
        })
      ).status,
    ).toBe(202);
    await stack.service.idle();
    expect((await stack.call('GET', '/core/datasets/queue-down/1', { key })).body.status).toBe('ready');
  });

  it('worker: a message that throws is reported as a batch item failure; the others succeed', async () => {
    const record = (messageId: string, body: string) => ({ messageId, body }) as SQSEvent['Records'][number];
    const res = await worker(
      {
        Records: [
          // A version that does not exist: processing is a no-op (idempotent redelivery), not a failure.
          record(
            'm1',
            JSON.stringify({ type: 'dataset.process', team_id: 'nobody', dataset_name: 'none', version: 1 }),
          ),
          record('m2', '{not json'),
        ],
      },
      context,
    );
    expect(res).toEqual({ batchItemFailures: [{ itemIdentifier: 'm2' }] });
  });
});

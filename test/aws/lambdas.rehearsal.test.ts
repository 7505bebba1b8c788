/**
 * Every Lambda entry point as deployed: bundled with the stack's esbuild options, started cold in its
 * own process with exactly the environment its stack gives it (the names below mirror lib/*-stack.ts
 * and lib/constructs/sift-function.ts) plus what the Lambda runtime sets, and handed one real event.
 * The AWS SDK reaches DynamoDB and S3 through the emulators, API Gateway, Step Functions and
 * SageMaker through their HTTP stand-ins (which check requests against the APIs' rules).
 */
import type { APIGatewayAuthorizerResult, APIGatewayProxyResult, SQSBatchResponse } from 'aws-lambda';
import { trainingCostMicros } from '../../src/core/billing/prices';
import { FakeApiGateway } from '../helpers/fakeApiGateway';
import { FakeControlPlane } from '../helpers/fakeControlPlane';
import { IamDynamoProxy } from '../helpers/iamDynamoProxy';
import { bundleLambda, invokeBundle } from '../helpers/lambdaBundle';
import { apiGatewayEvent, authorizerRequestEvent, emulatorEnv } from '../helpers/lambdaEvents';
import { jsonl, TestStack } from '../helpers/localStack';

const MACHINE = (kind: string) => `arn:aws:states:us-east-1:123456789012:stateMachine:sift-test-${kind}`;

let stack: TestStack;
let control: FakeControlPlane;
let gateway: FakeApiGateway;
let runtime: Record<string, string>;
let team: { teamId: string; key: string };
/** The functions whose stacks grant less than the whole table, their grants enforced in front of the emulator. */
const iam: Record<'authorizer' | 'trainingEvents', IamDynamoProxy> = {} as never;
const bundles: Record<string, string> = {};

/** SiftFunction's variables for every function, then the function's own (lib/*-stack.ts). */
const functionEnv = (service: string, own: Record<string, string>) => ({
  ...runtime,
  AWS_LAMBDA_FUNCTION_NAME: `sift-test-${service}`,
  NODE_OPTIONS: '--enable-source-maps',
  SIFT_STAGE: 'test',
  POWERTOOLS_SERVICE_NAME: service,
  POWERTOOLS_METRICS_NAMESPACE: 'Sift',
  POWERTOOLS_LOG_LEVEL: 'ERROR',
  ...own,
});
let data: { SIFT_TABLE: string; SIFT_BUCKET: string; SIFT_QUEUE_URL: string };

beforeAll(async () => {
  stack = await TestStack.start();
  control = await FakeControlPlane.start();
  gateway = await FakeApiGateway.start(['free', 'pro', 'research', 'custom'].map((p) => `sift-test-${p}`));
  const emulators = await emulatorEnv(stack.svc);
  data = {
    SIFT_TABLE: 'sift-records',
    SIFT_BUCKET: 'sift-data',
    SIFT_QUEUE_URL: `${control.endpoint}/123456789012/sift-test-work`,
  };
  runtime = {
    // what the Lambda runtime sets (region, credentials, an X-Ray trace header for active tracing)
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: emulators.AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: emulators.AWS_SECRET_ACCESS_KEY,
    _X_AMZN_TRACE_ID: 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0',
    AWS_XRAY_CONTEXT_MISSING: 'LOG_ERROR',
    AWS_XRAY_DAEMON_ADDRESS: '127.0.0.1:2000',
    // where this rehearsal points the SDK instead of AWS
    AWS_ENDPOINT_URL_DYNAMODB: emulators.AWS_ENDPOINT_URL_DYNAMODB,
    AWS_ENDPOINT_URL_S3: emulators.AWS_ENDPOINT_URL_S3,
    AWS_ENDPOINT_URL_SFN: control.endpoint,
    AWS_ENDPOINT_URL_SAGEMAKER: control.endpoint,
    AWS_ENDPOINT_URL_API_GATEWAY: gateway.endpoint,
    AWS_ENDPOINT_URL_SQS: control.endpoint,
    AWS_MAX_ATTEMPTS: '1',
  };
  // lib/api-stack.ts 'ReadApiKeyItems'; lib/workflow-stack.ts data.table.grant(trainingEventsFunction, …)
  iam.authorizer = await IamDynamoProxy.start(emulators.AWS_ENDPOINT_URL_DYNAMODB, [
    'dynamodb:GetItem',
    'dynamodb:UpdateItem',
    'dynamodb:PutItem',
  ]);
  iam.trainingEvents = await IamDynamoProxy.start(emulators.AWS_ENDPOINT_URL_DYNAMODB, [
    'dynamodb:GetItem',
    'dynamodb:UpdateItem',
    'dynamodb:Query',
    'dynamodb:PutItem',
    'dynamodb:BatchWriteItem',
  ]);
  for (const entry of ['api.ts', 'authorizer.ts', 'worker.ts', 'workflow.ts', 'training-events.ts'])
    bundles[entry] = await bundleLambda(entry);
  team = await stack.newTeam('bundled');
  await stack.uploadDataset(
    'people',
    jsonl([
      {
        text: 'Tim Cook runs Apple.',
        entities: [
          ['Tim Cook', 'person'],
          ['Apple', 'company'],
        ],
      },
    ]),
    { key: team.key },
  );
  await stack.svc.blobs.put('models/sift/gliner2-mini-v1/manifest.json', '{}');
}, 90_000);

afterAll(async () => {
  await iam.authorizer?.stop();
  await iam.trainingEvents?.stop();
  await gateway?.stop();
  await control?.stop();
  await stack?.stop();
});

describe("the deployed Lambda bundles, each with its stack's environment", () => {
  let jobId: string;

  it('api (lib/api-stack.ts): a REST proxy event creates a training job and starts its state machine', async () => {
    const env = functionEnv('api', {
      ...data,
      SIFT_CONSOLE_ORIGINS: 'https://console.example.com',
      SIFT_TRAINING_STATE_MACHINE_ARN: MACHINE('training'),
      SIFT_GENERATION_STATE_MACHINE_ARN: MACHINE('generation'),
      SIFT_EVALUATION_STATE_MACHINE_ARN: MACHINE('evaluation'),
      SIFT_ADAPTIVE_STATE_MACHINE_ARN: MACHINE('adaptive'),
    });
    const body = { model_name: 'bundled', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'people' }] };
    const res = await invokeBundle(
      bundles['api.ts']!,
      env,
      apiGatewayEvent('POST', '/core/training-jobs', {
        key: team.key,
        body,
        headers: { Origin: 'https://console.example.com' },
      }),
    );
    // a proxy integration passes this through: the console's origin reads it only with CORS (src/http/cors.ts)
    expect(res).toMatchObject({
      ok: true,
      value: {
        statusCode: 201,
        headers: { 'access-control-allow-origin': 'https://console.example.com', vary: 'Origin' },
      },
    });
    jobId = JSON.parse((res as { value: APIGatewayProxyResult }).value.body).id;
    expect(control.callsOf('AWSStepFunctions.StartExecution')).toContainEqual({
      stateMachineArn: MACHINE('training'),
      name: jobId,
      input: JSON.stringify({ jobId, teamId: team.teamId }),
    });
  });

  it('workflow (lib/workflow-stack.ts): training.prepare copies the rows into the train channel', async () => {
    const env = functionEnv('workflow', {
      ...data,
      SIFT_INFERENCE_URL: 'http://127.0.0.1:9',
      SIFT_INTERNAL_TOKEN_SECRET_ARN: 'arn:aws:secretsmanager:us-east-1:123456789012:secret:sift-test-internal',
      SIFT_TRAINING_JOB_PREFIX: 'sift-test-',
      SIFT_TRAINING_INSTANCE_TYPE: 'ml.g5.xlarge',
      SIFT_TRAINING_MAX_RUNTIME_SECONDS: '86400',
      SIFT_TRAINING_STATE_MACHINE_ARN: MACHINE('training'),
      SIFT_EVALUATION_STATE_MACHINE_ARN: MACHINE('evaluation'),
    });
    const res = await invokeBundle(bundles['workflow.ts']!, env, {
      task: 'training.prepare',
      input: { jobId, teamId: team.teamId },
    });
    expect(res).toMatchObject({
      ok: true,
      value: { trainingJobName: `sift-test-${jobId}`, instanceType: 'ml.g5.xlarge', maxRuntimeSeconds: 86_400 },
    });
    expect(await stack.svc.blobs.getText(`jobs/${team.teamId}/${jobId}/input/train/people-v1.jsonl`)).toContain(
      'Tim Cook',
    );
    // an unknown task fails with the name the state machine routes to its failure branch
    expect(await invokeBundle(bundles['workflow.ts']!, env, { task: 'training.nope', input: {} })).toMatchObject({
      ok: false,
      name: 'Sift.UnsupportedTask',
    });
  });

  it('training-events (table and job prefix only; GetItem, UpdateItem, Query, PutItem, BatchWriteItem): an InProgress event marks the job running (reads and one update)', async () => {
    const env = functionEnv('training-events', {
      SIFT_TABLE: data.SIFT_TABLE,
      SIFT_TRAINING_JOB_PREFIX: 'sift-test-',
      AWS_ENDPOINT_URL_DYNAMODB: iam.trainingEvents.endpoint,
    });
    const event = {
      version: '0',
      id: 'e1',
      'detail-type': 'SageMaker Training Job State Change',
      source: 'aws.sagemaker',
      account: '123456789012',
      time: new Date().toISOString(),
      region: 'us-east-1',
      resources: [`arn:aws:sagemaker:us-east-1:123456789012:training-job/sift-test-${jobId}`],
      detail: { TrainingJobName: `sift-test-${jobId}`, TrainingJobStatus: 'InProgress', SecondaryStatus: 'Starting' },
    };
    expect(await invokeBundle(bundles['training-events.ts']!, env, event)).toMatchObject({ ok: true });
    expect((await stack.call('GET', `/core/training-jobs/${jobId}`, { key: team.key })).body.status).toBe('running');
    // a repeated event loses its conditional write: still nothing its role may not do
    expect(await invokeBundle(bundles['training-events.ts']!, env, event)).toMatchObject({ ok: true });
    expect(iam.trainingEvents.denied).toEqual([]);
    expect([...iam.trainingEvents.used].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem']);
  });

  it('training-events: a Failed event ends the job and bills the time it ran, at the instance type training.prepare recorded', async () => {
    const env = functionEnv('training-events', {
      SIFT_TABLE: data.SIFT_TABLE,
      SIFT_TRAINING_JOB_PREFIX: 'sift-test-',
      AWS_ENDPOINT_URL_DYNAMODB: iam.trainingEvents.endpoint,
    });
    const event = {
      version: '0',
      id: 'e2',
      'detail-type': 'SageMaker Training Job State Change',
      source: 'aws.sagemaker',
      account: '123456789012',
      time: new Date().toISOString(),
      region: 'us-east-1',
      resources: [`arn:aws:sagemaker:us-east-1:123456789012:training-job/sift-test-${jobId}`],
      detail: {
        TrainingJobName: `sift-test-${jobId}`,
        TrainingJobStatus: 'Failed',
        FailureReason: 'AlgorithmError: out of memory',
      },
    };
    expect(await invokeBundle(bundles['training-events.ts']!, env, event)).toMatchObject({ ok: true });
    const job = (await stack.call('GET', `/core/training-jobs/${jobId}`, { key: team.key })).body;
    expect(job).toMatchObject({ status: 'failed', error: 'AlgorithmError: out of memory' });
    const rows = (await stack.call('GET', '/billing/usage/requests/list', { key: team.key })).body.data.filter(
      (r: any) => r.inference_id === jobId,
    );
    const seconds = (Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000;
    expect(rows).toEqual([
      expect.objectContaining({
        endpoint: '/core/training-jobs',
        model: jobId,
        cost_usd: trainingCostMicros('ml.g5.xlarge', seconds) / 1e6,
      }),
    ]);
    // the replayed event loses the conditional write: billed once
    expect(await invokeBundle(bundles['training-events.ts']!, env, { ...event, id: 'e3' })).toMatchObject({ ok: true });
    expect(
      (await stack.call('GET', '/billing/usage/requests/list', { key: team.key })).body.data.filter(
        (r: any) => r.inference_id === jobId,
      ),
    ).toHaveLength(1);
    expect(iam.trainingEvents.denied).toEqual([]);
  });

  it("authorizer (table only; GetItem, UpdateItem, PutItem): a REQUEST event with the team's key gets an Allow policy and its usage plan key", async () => {
    const env = functionEnv('authorizer', {
      SIFT_TABLE: data.SIFT_TABLE,
      AWS_ENDPOINT_URL_DYNAMODB: iam.authorizer.endpoint,
    });
    const methodArn = 'arn:aws:execute-api:us-east-1:123456789012:abcdef/test/GET/core/datasets';
    const event = authorizerRequestEvent(methodArn, 'GET', '/core/datasets', { 'X-API-Key': team.key }, '/{proxy+}');
    const res = await invokeBundle(bundles['authorizer.ts']!, env, event);
    expect(res).toMatchObject({ ok: true, value: { context: { team_id: team.teamId } } });
    const policy = (res as { value: APIGatewayAuthorizerResult }).value;
    expect(policy.policyDocument.Statement[0]).toMatchObject({
      Effect: 'Allow',
      Resource: 'arn:aws:execute-api:us-east-1:123456789012:abcdef/test/*',
    });
    expect(policy.usageIdentifierKey).toBe(
      [...gateway.keys.values()].find((k) => k.tags['sift:team'] === team.teamId)?.value,
    );
    // its table grant covers what it did (the key lookup, last_used_at, the team's gateway key record)
    expect(iam.authorizer.denied).toEqual([]);
  });

  it('api → SQS → worker: an upload is processed from the message the API sent; a bad record in the batch is reported alone', async () => {
    const api = functionEnv('api', { ...data, SIFT_CONSOLE_ORIGINS: 'https://console.example.com' });
    const call = async (path: string, body: unknown) => {
      const res = await invokeBundle(bundles['api.ts']!, api, apiGatewayEvent('POST', path, { key: team.key, body }));
      if (!res.ok) throw new Error(`${res.name}: ${res.message}`);
      return { status: res.value.statusCode as number, body: JSON.parse(res.value.body) };
    };
    const url = await call('/core/datasets/upload/url', { dataset_name: 'queued', file_name: 'rows.jsonl' });
    expect(
      (await fetch(url.body.upload_url, { method: 'PUT', body: jsonl([{ text: 'Paris is big', label: 'city' }]) }))
        .status,
    ).toBe(200);
    expect(
      (await call('/core/datasets/upload/process', { dataset_name: 'queued', version: url.body.version })).status,
    ).toBe(202);
    const [sent] = control.messages;
    expect(sent!.queueUrl).toBe(data.SIFT_QUEUE_URL);

    const record = (messageId: string, body: string) => ({
      messageId,
      receiptHandle: 'r',
      body,
      attributes: {},
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:sift-test-work',
      awsRegion: 'us-east-1',
    });
    const event = { Records: [record(sent!.messageId, sent!.body), record('bad', '{not json')] };
    const res = await invokeBundle(bundles['worker.ts']!, functionEnv('worker', data), event);
    expect(res).toEqual({
      ok: true,
      value: { batchItemFailures: [{ itemIdentifier: 'bad' }] } satisfies SQSBatchResponse,
    });
    expect((await stack.call('GET', '/core/datasets/queued/1', { key: team.key })).body).toMatchObject({
      status: 'ready',
      row_count: 1,
    });
  });
});

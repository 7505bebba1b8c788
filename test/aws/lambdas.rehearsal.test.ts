/**
 * Every Lambda entry point as deployed: bundled with the stack's esbuild options, started cold in its
 * own process with the environment the synthesized template gives it (test/helpers/deployedFunctions.ts
 * reads it and resolves its references to the rehearsal's resources) plus what the Lambda runtime
 * sets, and handed one real event. Each function's calls go through a gate that enforces its role's
 * statements from the same template (test/helpers/iamGate.ts): a call its role does not allow is
 * refused as AWS refuses it. The AWS SDK reaches DynamoDB and S3 through the emulators, API Gateway,
 * Step Functions, SQS and SageMaker through their HTTP stand-ins (which check requests against the
 * APIs' rules). Unkind cases: a repeated event (at-least-once delivery), a bad record in a batch.
 */
import type { APIGatewayAuthorizerResult, APIGatewayProxyResult, SQSBatchResponse } from 'aws-lambda';
import { trainingCostMicros } from '../../src/core/billing/prices';
import { STAGE_TAG } from '../../src/core/gatewayKeys';
import { buildApp } from '../cdk/helpers';
import { type Bindings, DeployedApp } from '../helpers/deployedFunctions';
import { FakeApiGateway } from '../helpers/fakeApiGateway';
import { FakeControlPlane } from '../helpers/fakeControlPlane';
import { IamGate } from '../helpers/iamGate';
import { IamPolicy } from '../helpers/iamPolicy';
import { bundleLambda, invokeBundle } from '../helpers/lambdaBundle';
import { apiGatewayEvent, authorizerRequestEvent, emulatorEnv } from '../helpers/lambdaEvents';
import { jsonl, TestStack } from '../helpers/localStack';

type Service = 'api' | 'authorizer' | 'worker' | 'workflow' | 'training-events';

let stack: TestStack;
let control: FakeControlPlane;
let gateway: FakeApiGateway;
let runtime: Record<string, string>;
let team: { teamId: string; key: string };
let app: DeployedApp;
/** Each function's role, enforced in front of every service it reaches. */
const gates = {} as Record<Service, IamGate>;
const envs = {} as Record<Service, Record<string, string>>;
const bundles: Record<string, string> = {};
/** The state machine the template names `sift-<stage>-<kind>`. */
const machine = (kind: string) => [...control.stateMachines].find((arn) => arn.endsWith(`-${kind}`))!;

/** What the Lambda runtime sets, then the template's environment, then where the rehearsal points the SDK. */
const functionEnv = (service: Service) => envs[service];

beforeAll(async () => {
  stack = await TestStack.start();
  control = await FakeControlPlane.start();
  app = new DeployedApp(buildApp());
  const plans = app.resources('AWS::ApiGateway::UsagePlan').map((r) => String(r.properties.UsagePlanName));
  gateway = await FakeApiGateway.start(plans);
  const emulators = await emulatorEnv(stack.svc);
  const bindings = (queueEndpoint: string): Bindings => ({
    // the emulators' table and bucket stand for the data stack's; the work queue is the stand-in's
    names: { Records: emulators.SIFT_TABLE, Blobs: emulators.SIFT_BUCKET, WorkQueue: 'sift-work' },
    attributes: { 'Alb.DNSName': '127.0.0.1:9' }, // the inference services: unreachable here
    queueEndpoint,
    usagePlanId: (name) => [...gateway.usagePlans.values()].find((p) => p.name === name)!.id,
  });
  for (const m of app.resources('AWS::StepFunctions::StateMachine'))
    control.stateMachines.add(app.value(m.stack, m.logicalId, bindings('')));
  runtime = {
    // what the Lambda runtime sets (region, credentials, an X-Ray trace header for active tracing)
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: emulators.AWS_ACCESS_KEY_ID,
    AWS_SECRET_ACCESS_KEY: emulators.AWS_SECRET_ACCESS_KEY,
    _X_AMZN_TRACE_ID: 'Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=0',
    AWS_XRAY_CONTEXT_MISSING: 'LOG_ERROR',
    AWS_XRAY_DAEMON_ADDRESS: '127.0.0.1:2000',
    AWS_MAX_ATTEMPTS: '1',
  };
  const functions = app.functions();
  for (const service of ['api', 'authorizer', 'worker', 'workflow', 'training-events'] as Service[]) {
    const fn = functions[service];
    if (!fn) throw new Error(`the template has no ${service} function`);
    const gate = await IamGate.start(
      new IamPolicy(fn.statements(bindings(''))),
      {
        dynamodb: emulators.AWS_ENDPOINT_URL_DYNAMODB,
        s3: emulators.AWS_ENDPOINT_URL_S3,
        control: control.endpoint,
        apigateway: gateway.endpoint,
      },
      // an API key's tags, as the authorizer's delete condition (aws:ResourceTag/sift:stage) reads them
      (resource) => gateway.keys.get(/:\/apikeys\/([^/]+)$/.exec(resource)?.[1] ?? '')?.tags,
    );
    gates[service] = gate;
    envs[service] = {
      ...runtime,
      AWS_LAMBDA_FUNCTION_NAME: `sift-${service}`,
      ...fn.env(bindings(gate.endpoints.control)),
      POWERTOOLS_LOG_LEVEL: 'ERROR', // the invocation's output is not read
      // where this rehearsal points the SDK instead of AWS: the function's gate
      AWS_ENDPOINT_URL_DYNAMODB: gate.endpoints.dynamodb,
      AWS_ENDPOINT_URL_S3: gate.endpoints.s3,
      AWS_ENDPOINT_URL_SFN: gate.endpoints.control,
      AWS_ENDPOINT_URL_SAGEMAKER: gate.endpoints.control,
      AWS_ENDPOINT_URL_SQS: gate.endpoints.control,
      AWS_ENDPOINT_URL_SECRETS_MANAGER: gate.endpoints.control,
      AWS_ENDPOINT_URL_API_GATEWAY: gate.endpoints.apigateway,
    };
  }
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
}, 180_000);

afterAll(async () => {
  for (const gate of Object.values(gates)) await gate.stop();
  await gateway?.stop();
  await control?.stop();
  await stack?.stop();
});

afterEach(() => {
  // nothing a function did was refused by its role
  for (const [service, gate] of Object.entries(gates))
    expect({ service, denied: gate.denied.splice(0) }).toEqual({ service, denied: [] });
});

describe("the deployed Lambda bundles, each with its stack's environment", () => {
  let jobId: string;

  it('api (lib/api-stack.ts): a REST proxy event creates a training job and starts its state machine', async () => {
    const env = functionEnv('api');
    // the console origin the stage's template allows (SIFT_CONSOLE_ORIGINS)
    const origin = env.SIFT_CONSOLE_ORIGINS!.split(',')[0]!;
    const body = { model_name: 'bundled', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'people' }] };
    const res = await invokeBundle(
      bundles['api.ts']!,
      env,
      apiGatewayEvent('POST', '/core/training-jobs', {
        key: team.key,
        body,
        headers: { Origin: origin },
      }),
    );
    // a proxy integration passes this through: the console's origin reads it only with CORS (src/http/cors.ts)
    expect(res).toMatchObject({
      ok: true,
      value: {
        statusCode: 201,
        headers: { 'access-control-allow-origin': origin, vary: 'Origin' },
      },
    });
    jobId = JSON.parse((res as { value: APIGatewayProxyResult }).value.body).id;
    expect(control.callsOf('AWSStepFunctions.StartExecution')).toContainEqual({
      stateMachineArn: machine('training'),
      name: jobId,
      input: JSON.stringify({ jobId, teamId: team.teamId }),
    });
  });

  it('workflow (lib/workflow-stack.ts): training.prepare copies the rows into the train channel', async () => {
    const env = functionEnv('workflow');
    const prefix = env.SIFT_TRAINING_JOB_PREFIX!;
    const res = await invokeBundle(bundles['workflow.ts']!, env, {
      task: 'training.prepare',
      input: { jobId, teamId: team.teamId },
    });
    expect(res).toMatchObject({
      ok: true,
      value: {
        trainingJobName: `${prefix}${jobId}`,
        instanceType: env.SIFT_TRAINING_INSTANCE_TYPE,
        maxRuntimeSeconds: Number(env.SIFT_TRAINING_MAX_RUNTIME_SECONDS),
      },
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
    const env = functionEnv('training-events');
    const prefix = env.SIFT_TRAINING_JOB_PREFIX!;
    const event = {
      version: '0',
      id: 'e1',
      'detail-type': 'SageMaker Training Job State Change',
      source: 'aws.sagemaker',
      account: '123456789012',
      time: new Date().toISOString(),
      region: 'us-east-1',
      resources: [`arn:aws:sagemaker:us-east-1:123456789012:training-job/${prefix}${jobId}`],
      detail: { TrainingJobName: `${prefix}${jobId}`, TrainingJobStatus: 'InProgress', SecondaryStatus: 'Starting' },
    };
    expect(await invokeBundle(bundles['training-events.ts']!, env, event)).toMatchObject({ ok: true });
    expect((await stack.call('GET', `/core/training-jobs/${jobId}`, { key: team.key })).body.status).toBe('running');
    // a repeated event loses its conditional write: still nothing its role may not do
    expect(await invokeBundle(bundles['training-events.ts']!, env, event)).toMatchObject({ ok: true });
    expect(gates['training-events'].actions()).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem']);
  });

  it('training-events: a Failed event ends the job and bills the time it ran, at the instance type training.prepare recorded', async () => {
    const env = functionEnv('training-events');
    const prefix = env.SIFT_TRAINING_JOB_PREFIX!;
    const event = {
      version: '0',
      id: 'e2',
      'detail-type': 'SageMaker Training Job State Change',
      source: 'aws.sagemaker',
      account: '123456789012',
      time: new Date().toISOString(),
      region: 'us-east-1',
      resources: [`arn:aws:sagemaker:us-east-1:123456789012:training-job/${prefix}${jobId}`],
      detail: {
        TrainingJobName: `${prefix}${jobId}`,
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
  });

  it("authorizer (table only; GetItem, UpdateItem, PutItem): a REQUEST event with the team's key gets an Allow policy and its usage plan key", async () => {
    const env = functionEnv('authorizer');
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
    // its role covers what it did (the key lookup, last_used_at, the team's gateway key and its plan)
    expect(gates.authorizer.actions()).toEqual(
      expect.arrayContaining(['apigateway:GET', 'apigateway:POST', 'dynamodb:GetItem']),
    );
  });

  it("authorizer: its role deletes an API key of its own stage (aws:ResourceTag/sift:stage), never another stage's or an untagged one", async () => {
    // the stage the authorizer tags its keys with (src/aws/gatewayKeys.ts), from its template environment
    const own = functionEnv('authorizer').SIFT_STAGE!;
    for (const [id, tags] of [
      ['other-stage', { [STAGE_TAG]: `${own}-other` }],
      ['untagged', {}],
      ['own-stage', { [STAGE_TAG]: own }],
    ] as const)
      gateway.keys.set(id, { id, name: id, value: `v-${id}`, tags });
    const del = async (id: string) =>
      (await fetch(`${gates.authorizer.endpoints.apigateway}/apikeys/${id}`, { method: 'DELETE' })).status;
    expect(await del('other-stage')).toBe(403);
    expect(await del('untagged')).toBe(403);
    expect(await del('own-stage')).toBe(202);
    expect([...gateway.keys.keys()]).toEqual(expect.arrayContaining(['other-stage', 'untagged']));
    expect(gateway.keys.has('own-stage')).toBe(false);
    expect(gates.authorizer.denied.splice(0)).toEqual([
      'apigateway:DELETE arn:aws:apigateway:us-east-1::/apikeys/other-stage',
      'apigateway:DELETE arn:aws:apigateway:us-east-1::/apikeys/untagged',
    ]);
  });

  it('api → SQS → worker: an upload is processed from the message the API sent; a bad record in the batch is reported alone', async () => {
    const api = functionEnv('api');
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
    expect(sent!.queueUrl).toBe(api.SIFT_QUEUE_URL);

    const record = (messageId: string, body: string) => ({
      messageId,
      receiptHandle: 'r',
      body,
      attributes: {},
      messageAttributes: {},
      md5OfBody: '',
      eventSource: 'aws:sqs',
      eventSourceARN: 'arn:aws:sqs:us-east-1:123456789012:sift-work',
      awsRegion: 'us-east-1',
    });
    const event = { Records: [record(sent!.messageId, sent!.body), record('bad', '{not json')] };
    const res = await invokeBundle(bundles['worker.ts']!, functionEnv('worker'), event);
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

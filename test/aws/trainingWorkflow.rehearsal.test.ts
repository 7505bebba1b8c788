/**
 * Offline rehearsal of training on AWS: the API Lambda creates the job and starts the training state
 * machine (StartExecution, checked against the API's rules); the very ASL the stack deploys runs
 * here (aws-local-stepfunctions) with its Lambda tasks answered by the workflow Lambda's handler and
 * its `createTrainingJob.sync` by a SageMaker stand-in that writes what SageMaker writes (a real
 * model.tar.gz of the trainer's layout, synced checkpoints) and sends its EventBridge events to the
 * training-events Lambda. DynamoDB and S3 are the emulators, through the real SDK.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import { StateMachine } from 'aws-local-stepfunctions';
import { lambdaTaskNames, substitute, WORKFLOWS } from '../../lib/workflows/definitions';
import { createTrainingJob } from '../../src/core/trainingJobs';
import { FakeControlPlane } from '../helpers/fakeControlPlane';
import { apiGatewayEvent, emulatorEnv, lambdaContext } from '../helpers/lambdaEvents';
import { jsonl, TestStack } from '../helpers/localStack';
import { SageMakerTrainingStandIn, type Outcome, type TrainingEvent } from '../helpers/sageMakerTraining';
import { writeTrainerOutput, type TrainerOutput } from '../helpers/trainerOutput';
import '../../src/local/promiseWithResolvers';

const TRAINING_ARN = 'arn:aws:states:us-east-1:123456789012:stateMachine:sift-test-training';
const PREFIX = 'sift-test-';
const TOKEN_ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:sift-test-internal-token';
const ROWS = [
  {
    text: 'Tim Cook runs Apple.',
    entities: [
      ['Tim Cook', 'person'],
      ['Apple', 'company'],
    ],
  },
  {
    text: 'Satya Nadella visited Paris.',
    entities: [
      ['Satya Nadella', 'person'],
      ['Paris', 'city'],
    ],
  },
];

let stack: TestStack;
let control: FakeControlPlane;
let workDir: string;
let output: TrainerOutput;
let team: { teamId: string; key: string };
let api: (e: APIGatewayProxyEvent, c: Context) => Promise<APIGatewayProxyResult>;
let workflow: (e: { task: string; input: unknown }, c: Context) => Promise<unknown>;
let trainingEvents: (e: TrainingEvent, c: Context) => Promise<void>;
const saved = { ...process.env };

beforeAll(async () => {
  stack = await TestStack.start();
  control = await FakeControlPlane.start();
  control.stateMachines.add(TRAINING_ARN);
  workDir = await mkdtemp(join(tmpdir(), 'sift-rehearsal-'));
  Object.assign(process.env, await emulatorEnv(stack.svc), {
    SIFT_QUEUE_URL: 'http://127.0.0.1:1/000000000000/unused',
    AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:1',
    SIFT_TRAINING_STATE_MACHINE_ARN: TRAINING_ARN,
    SIFT_TRAINING_JOB_PREFIX: PREFIX,
    SIFT_TRAINING_INSTANCE_TYPE: 'ml.g5.xlarge',
    SIFT_TRAINING_MAX_RUNTIME_SECONDS: '86400',
    AWS_ENDPOINT_URL_SFN: control.endpoint,
    AWS_ENDPOINT_URL_SAGEMAKER: control.endpoint,
    // the deployed workflow function scores on the encoder service (its token from Secrets Manager);
    // the service is unreachable here, so the trainer's metrics stand
    SIFT_INFERENCE_URL: 'http://127.0.0.1:9',
    SIFT_INTERNAL_TOKEN_SECRET_ARN: TOKEN_ARN,
    AWS_ENDPOINT_URL_SECRETS_MANAGER: control.endpoint,
  });
  control.secrets.set(TOKEN_ARN, 'internal-token-for-tests-0123456789abcdef');
  api = (await import('../../lambdas/api')).handler as unknown as typeof api;
  workflow = (await import('../../lambdas/workflow')).handler as unknown as typeof workflow;
  // the events function is deployed with the table and the job prefix only (lib/workflow-stack.ts)
  const { SIFT_BUCKET: _b, SIFT_QUEUE_URL: _q, ...withoutData } = process.env;
  const full = process.env;
  process.env = withoutData;
  trainingEvents = (await import('../../lambdas/training-events')).handler as unknown as typeof trainingEvents;
  process.env = full;

  output = await writeTrainerOutput(workDir, { validationRows: ROWS });
  // the base model's files: SageMaker refuses a job whose model channel is empty
  await stack.svc.blobs.put(
    'models/sift/gliner2-mini-v1/manifest.json',
    JSON.stringify({ format: 'sift-model/1', family: 'encoder' }),
  );
  team = await stack.newTeam('rehearsal');
  await stack.uploadDataset('people', jsonl(ROWS), { key: team.key });
}, 60_000);

afterAll(async () => {
  process.env = saved;
  await control?.stop();
  await stack?.stop();
  await rm(workDir, { recursive: true, force: true });
});

async function callApi(method: string, path: string, body?: unknown) {
  const res = await api(
    apiGatewayEvent(method, path, { key: team.key, ...(body !== undefined ? { body } : {}) }),
    lambdaContext,
  );
  return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
}

/** POST /core/training-jobs through the API Lambda; returns the job id and the execution it started. */
async function createJob(modelName: string, baseModel = 'sift/gliner2-mini-v1') {
  const created = await callApi('POST', '/core/training-jobs', {
    model_name: modelName,
    base_model: baseModel,
    datasets: [{ name: 'people' }],
    training_type: 'lora',
    nr_epochs: 2,
  });
  expect(created).toMatchObject({ status: 201, body: { status: 'requested' } });
  const id = created.body.id as string;
  const start = control.callsOf('AWSStepFunctions.StartExecution').find((r) => r.name === id);
  expect(start).toEqual({
    stateMachineArn: TRAINING_ARN,
    name: id,
    input: JSON.stringify({ jobId: id, teamId: team.teamId }),
  });
  return { id, input: JSON.parse(String(start!.input)) as Record<string, unknown> };
}

/**
 * Runs the deployed training ASL: Lambda tasks → the workflow Lambda (payload `{task, input}`, as
 * Step Functions invokes it), Train → the SageMaker stand-in. `deliver` decides what EventBridge does.
 */
async function runTraining(
  input: Record<string, unknown>,
  outcome: Outcome,
  deliver: (e: TrainingEvent) => Promise<void> = (e) => trainingEvents(e, lambdaContext),
  opts: { lostAnswer?: boolean; duplicateErrorName?: string; createFailsWithoutJob?: boolean } = {},
) {
  const raw = WORKFLOWS.training();
  const definition = substitute(raw, {
    TaskFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:sift-test-tasks',
    TrainingImage: '123456789012.dkr.ecr.us-east-1.amazonaws.com/sift-training:test',
    TrainingRoleArn: 'arn:aws:iam::123456789012:role/sift-test-training',
    DataKeyArn: 'arn:aws:kms:us-east-1:123456789012:key/00000000-0000-4000-8000-000000000000',
    Stage: 'test',
  });
  const sageMaker = new SageMakerTrainingStandIn(stack.svc.blobs, control, deliver);
  sageMaker.lostAnswer = opts.lostAnswer ?? false;
  if (opts.duplicateErrorName) sageMaker.duplicateErrorName = opts.duplicateErrorName;
  sageMaker.createFailsWithoutJob = opts.createFailsWithoutJob ?? false;
  const handlers: Record<string, (payload: never) => Promise<unknown>> = {
    Train: (request) => sageMaker.run(request, outcome),
    AwaitTrainingJob: (request) => sageMaker.describeTrainingJob(request),
  };
  for (const state of Object.keys(lambdaTaskNames(raw)))
    handlers[state] = (payload) => workflow(payload, lambdaContext);
  const sm = new StateMachine(definition as never, { validationOptions: { checkArn: false, checkPaths: true } });
  const result = await sm
    .run(input as never, {
      overrides: {
        taskResourceLocalHandlers: handlers as never,
        // the retriers' and the job poll's intervals (30 s and more) elapse at once here
        retryIntervalOverrides: { Train: 0, AwaitTrainingJob: 0 },
        waitTimeOverrides: { WaitForTrainingJob: 0 },
      },
    })
    .result.then(
      (out) => ({ ok: true as const, out: out as Record<string, unknown> }),
      (error: Error) => ({ ok: false as const, error }),
    );
  return { result, sageMaker };
}

const job = async (id: string) => (await callApi('GET', `/core/training-jobs/${id}`)).body;
const checkpoints = async (id: string) =>
  (await callApi('GET', `/core/training-jobs/${id}/checkpoints`)).body.checkpoints as Record<string, unknown>[];
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');
async function blob(key: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of await stack.svc.blobs.stream(key)) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

describe('training on AWS, rehearsed against the emulators', () => {
  let completedId: string;

  it('runs a job end to end: requested → running → complete, with the model, archive, metrics and checkpoints published', async () => {
    const { id, input } = await createJob('end-to-end');
    expect(await stack.svc.records.get(`JOBREF#${id}`, 'REF')).toEqual({ team_id: team.teamId, job_id: id });
    const { result, sageMaker } = await runTraining(input, { kind: 'complete', output });
    expect(result).toMatchObject({ ok: true });

    // what SageMaker was asked to run (already checked against the CreateTrainingJob rules)
    const [request] = sageMaker.requests as Record<string, any>[];
    expect(request!.TrainingJobName).toBe(`${PREFIX}${id}`);
    expect(request!.HyperParameters).toMatchObject({
      base_model_path: '/opt/ml/input/data/model',
      training_type: 'lora',
      nr_epochs: '2',
      model_name: 'end-to-end',
    });
    const channels = Object.fromEntries(
      (request!.InputDataConfig as any[]).map((c) => [c.ChannelName, c.DataSource.S3DataSource.S3Uri]),
    );
    expect(channels).toEqual({
      train: `s3://sift-data/jobs/${team.teamId}/${id}/input/train/`,
      model: 's3://sift-data/models/sift/gliner2-mini-v1/',
    });
    expect(await stack.svc.blobs.getText(`jobs/${team.teamId}/${id}/input/train/people-v1.jsonl`)).toContain(
      'Tim Cook',
    );
    expect(request!.Tags).toEqual([
      { Key: 'sift:stage', Value: 'test' },
      { Key: 'sift:job', Value: id },
    ]);

    const done = await job(id);
    expect(done).toMatchObject({
      status: 'complete',
      error: null,
      metrics: { f1: 0.8125, precision: 0.8667, recall: 0.7647 },
    });
    expect(done.started_at <= done.finished_at).toBe(true);

    // every file of /opt/ml/model, byte for byte, under the job's model prefix; the archive kept as the download
    const prefix = `jobs/${team.teamId}/${id}/model/`;
    expect((await stack.svc.blobs.list(prefix)).map((k) => k.slice(prefix.length)).sort()).toEqual(
      [...output.modelFiles.keys()].sort(),
    );
    for (const [rel, body] of output.modelFiles) expect([rel, sha(await blob(prefix + rel))]).toEqual([rel, sha(body)]);
    const artifact = await blob(`jobs/${team.teamId}/${id}/sagemaker/output/${PREFIX}${id}/output/model.tar.gz`);
    expect(sha(await blob(`jobs/${team.teamId}/${id}/model.tar.gz`))).toBe(sha(artifact));
    const download = await api(
      apiGatewayEvent('GET', `/core/training-jobs/${id}/download`, {
        key: team.key,
        headers: { Accept: 'application/json' },
      }),
      lambdaContext,
    );
    expect(JSON.parse(download.body)).toMatchObject({ size_bytes: artifact.length });

    // the trainer's checkpoints (ids from sift_checkpoint.json) plus the final model; the best by f1 marked
    const listed = await checkpoints(id);
    expect(listed).toHaveLength(output.checkpoints.length + 1);
    for (const c of output.checkpoints)
      expect(listed).toContainEqual(
        expect.objectContaining({ id: c.meta.id, step: c.meta.step, epoch: c.meta.epoch, metrics: c.meta.metrics }),
      );
    const final = listed.find((c) => !output.checkpoints.some((t) => t.meta.id === c.id))!;
    expect(final).toMatchObject({ id: done.final_checkpoint_id, is_final: true, is_best: true, epoch: 2 });
    expect(listed.filter((c) => c.is_best)).toHaveLength(1);
    // it asked the encoder service to score the held-out rows, with the token read from Secrets Manager
    expect(control.callsOf('secretsmanager.GetSecretValue')).toEqual([{ SecretId: TOKEN_ARN }]);
    completedId = id;
  });

  it('is idempotent: events delivered twice or out of order, and a retried complete task, change nothing', async () => {
    const id = completedId;
    const before = { job: await job(id), checkpoints: await checkpoints(id) };
    // EventBridge delivers at least once, in any order
    const events = ['InProgress', 'Stopped', 'Failed', 'Completed', 'InProgress'].map((status) => eventFor(id, status));
    for (const e of [...events, ...events]) await trainingEvents(e, lambdaContext);
    // Step Functions retries a task whose Lambda invocation errored after the work was done
    const retried = await workflow(
      {
        task: 'training.complete',
        input: {
          jobId: id,
          teamId: team.teamId,
          trainingResult: {
            modelArtifacts: `s3://sift-data/jobs/${team.teamId}/${id}/sagemaker/output/${PREFIX}${id}/output/model.tar.gz`,
          },
        },
      },
      lambdaContext,
    );
    expect(retried).toEqual({ status: 'complete' });
    await workflow(
      {
        task: 'training.failed',
        input: { jobId: id, teamId: team.teamId, error: { Error: 'States.Timeout', Cause: 'late' } },
      },
      lambdaContext,
    );
    expect(await job(id)).toEqual(before.job);
    expect(await checkpoints(id)).toEqual(before.checkpoints);
  });

  it('completes a job whose InProgress event arrives only after the workflow finished', async () => {
    const { id, input } = await createJob('late-event');
    const held: TrainingEvent[] = [];
    // this archive has bare entry names (the first job's had `./` ones)
    const { result } = await runTraining(
      input,
      { kind: 'complete', output, tarEntries: 'names' },
      async (e) => void held.push(e),
    );
    expect(result).toMatchObject({ ok: true });
    expect(await job(id)).toMatchObject({ status: 'complete', metrics: { f1: 0.8125 } });
    const prefix = `jobs/${team.teamId}/${id}/model/`;
    for (const [rel, body] of output.modelFiles) expect([rel, sha(await blob(prefix + rel))]).toEqual([rel, sha(body)]);
    expect((await job(id)).started_at).toEqual(expect.any(String));
    for (const e of held) await trainingEvents(e, lambdaContext);
    expect((await job(id)).status).toBe('complete');
  });

  it.each(['SageMaker.ResourceInUseException', 'SageMaker.AmazonSageMakerException'])(
    'a Train retry after SageMaker created the job (its answer lost) follows that job (duplicate name reported as %s): no second job, billed once',
    async (duplicateErrorName) => {
      const { id, input } = await createJob(`lost-answer-${duplicateErrorName.length}`);
      const { result, sageMaker } = await runTraining(
        input,
        { kind: 'complete', output },
        (e) => trainingEvents(e, lambdaContext),
        { lostAnswer: true, duplicateErrorName },
      );
      expect(result).toMatchObject({ ok: true });
      // Step Functions retried CreateTrainingJob with the same name; SageMaker refused it, one job ran
      // (under the generic name, Train's retrier spends its attempts first: 3 creates, not 2)
      const names = sageMaker.requests.map((r) => r.TrainingJobName);
      expect(names).toEqual(
        Array(duplicateErrorName.endsWith('ResourceInUseException') ? 2 : 3).fill(`${PREFIX}${id}`),
      );
      expect([...control.trainingJobs.keys()].filter((n) => n === `${PREFIX}${id}`)).toHaveLength(1);
      expect(await job(id)).toMatchObject({ status: 'complete', metrics: { f1: 0.8125 } });
      const billed = (await callApi('GET', '/billing/usage/requests/list')).body.data.filter(
        (r: { inference_id?: string }) => r.inference_id === id,
      );
      expect(billed).toHaveLength(1);
    },
  );

  it('a SageMaker outage that created no job fails the job with SageMaker’s error, after looking for the job once', async () => {
    const { id, input } = await createJob('outage');
    const { result, sageMaker } = await runTraining(input, { kind: 'complete', output }, undefined, {
      createFailsWithoutJob: true,
    });
    expect(result.ok).toBe(false);
    expect(sageMaker.requests).toHaveLength(3); // the first create and Train's two retries
    expect(control.trainingJobs.has(`${PREFIX}${id}`)).toBe(false);
    const failed = await job(id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toContain('We encountered an internal error');
  });

  it("records the trainer's failure reason from the Failed event; the workflow's failure step and late events keep it", async () => {
    const { id, input } = await createJob('bad-rows');
    const failureFile = "invalid dataset: row 2: entity 'Paris' is not in the text\n";
    const { result, sageMaker } = await runTraining(input, { kind: 'fail', failureFile, output });
    expect(result.ok).toBe(false);
    const failed = await job(id);
    expect(failed).toMatchObject({ status: 'failed', metrics: null });
    expect(failed.error).toContain("invalid dataset: row 2: entity 'Paris' is not in the text");
    // the checkpoints saved before the failure are still recorded, as locally
    expect((await checkpoints(id)).map((c) => c.id).sort()).toEqual(
      output.checkpoints
        .filter((c) => !c.meta.is_final)
        .map((c) => c.meta.id)
        .sort(),
    );
    for (const e of [...sageMaker.events].reverse()) await trainingEvents(e, lambdaContext);
    expect(await job(id)).toEqual(failed);
  });

  it("without the Failed event, the workflow's failure step records SageMaker's reason (not the whole job description)", async () => {
    const { id, input } = await createJob('lost-event');
    const { result } = await runTraining(
      input,
      { kind: 'fail', failureFile: 'out of memory: CUDA out of memory', output },
      async (e) => {
        if (e.detail.TrainingJobStatus !== 'Failed') await trainingEvents(e, lambdaContext);
      },
    );
    expect(result.ok).toBe(false);
    const failed = await job(id);
    expect(failed.status).toBe('failed');
    expect(failed.error).toBe('AlgorithmError: out of memory: CUDA out of memory, exit code: 1');
  });

  it('a stop: POST …/stop → StopTrainingJob; the Stopped event and the workflow leave it stopped with its checkpoint', async () => {
    const { id, input } = await createJob('stopped');
    const run = runTraining(input, { kind: 'stop', output });
    // wait until SageMaker has the job InProgress, then stop it the way a caller does
    while ((await job(id)).status !== 'running') await new Promise((r) => setTimeout(r, 20));
    expect(control.trainingJobs.get(`${PREFIX}${id}`)?.status).toBe('InProgress');
    expect(await callApi('POST', `/core/training-jobs/${id}/stop`)).toMatchObject({
      status: 200,
      body: { status: 'stopped' },
    });
    expect(control.callsOf('SageMaker.StopTrainingJob')).toContainEqual({ TrainingJobName: `${PREFIX}${id}` });
    const { result } = await run;
    expect(result.ok).toBe(false);
    expect(await job(id)).toMatchObject({ status: 'stopped', error: null });
    expect((await checkpoints(id)).map((c) => c.id)).toEqual([output.checkpoints[0]!.meta.id]);
    // the failure step again (a retry): the checkpoint is registered once
    await workflow(
      { task: 'training.failed', input: { ...input, error: { Error: 'States.TaskFailed', Cause: '{}' } } },
      lambdaContext,
    );
    expect(await checkpoints(id)).toHaveLength(1);
  });

  it("a stop before SageMaker has the job: StopTrainingJob's ResourceNotFound is fine, and the workflow never creates it", async () => {
    const { id, input } = await createJob('stopped-early');
    expect(await callApi('POST', `/core/training-jobs/${id}/stop`)).toMatchObject({
      status: 200,
      body: { status: 'stopped' },
    });
    const { result, sageMaker } = await runTraining(input, { kind: 'complete', output });
    expect(result.ok).toBe(false);
    expect(sageMaker.requests).toHaveLength(0);
    expect(await job(id)).toMatchObject({ status: 'stopped', error: null });
  });

  it('when Step Functions refuses to start the execution, the job is not left requested forever', async () => {
    control.failNext = { operation: 'AWSStepFunctions.StartExecution', type: 'ThrottlingException' };
    const refused = await callApi('POST', '/core/training-jobs', {
      model_name: 'never-started',
      base_model: 'sift/gliner2-mini-v1',
      datasets: [{ name: 'people' }],
    });
    expect(refused.status).toBeGreaterThanOrEqual(500);
    const listed = (await callApi('GET', '/core/training-jobs')).body.data as {
      model_name: string;
      status: string;
      error: string | null;
    }[];
    expect(listed.find((j) => j.model_name === 'never-started')).toMatchObject({
      status: 'failed',
      error: expect.stringContaining('could not be started'),
    });
  });

  it("continuing from a checkpoint: the model channel is that checkpoint's files", async () => {
    const base = (await job(completedId)).final_checkpoint_id as string;
    const { input } = await createJob('continued', base);
    const prepared = (await workflow({ task: 'training.prepare', input }, lambdaContext)) as {
      channels: { ChannelName: string; DataSource: { S3DataSource: { S3Uri: string } } }[];
    };
    const model = prepared.channels.find((c) => c.ChannelName === 'model')!;
    expect(model.DataSource.S3DataSource.S3Uri).toBe(`s3://sift-data/jobs/${team.teamId}/${completedId}/model/`);
    expect(await workflow({ task: 'training.nope', input }, lambdaContext).catch((e: Error) => e.name)).toBe(
      'Sift.UnsupportedTask',
    );
  });

  it('a job with validation rows (OpenAI validation_file) gets a validation channel, which the trainer reads', async () => {
    // recorded as POST /v1/fine_tuning/jobs records it, without starting a run: the prepare step is under test
    const { training: _unused, ...recordOnly } = stack.svc;
    const created = await createTrainingJob(recordOnly, team.teamId, {
      model_name: 'validated',
      base_model: 'sift/gliner2-mini-v1',
      datasets: [{ name: 'people' }],
      validation_datasets: [{ name: 'people', version: 1 }],
    });
    const prepared = (await workflow(
      { task: 'training.prepare', input: { jobId: created.id, teamId: team.teamId } },
      lambdaContext,
    )) as { channels: { ChannelName: string; DataSource: { S3DataSource: { S3Uri: string } } }[] };
    expect(prepared.channels.map((c) => c.ChannelName)).toEqual(['train', 'validation', 'model']);
    const prefix = `jobs/${team.teamId}/${created.id}/input/validation/`;
    expect(prepared.channels[1]!.DataSource.S3DataSource.S3Uri).toBe(`s3://sift-data/${prefix}`);
    expect(await stack.svc.blobs.getText(`${prefix}people-v1.jsonl`)).toContain('Tim Cook');
  });
});

function eventFor(id: string, status: string): TrainingEvent {
  return {
    version: '0',
    id: `replay-${status}`,
    'detail-type': 'SageMaker Training Job State Change',
    source: 'aws.sagemaker',
    account: '123456789012',
    time: new Date().toISOString(),
    region: 'us-east-1',
    resources: [],
    detail: {
      TrainingJobName: `${PREFIX}${id}`,
      TrainingJobStatus: status,
      ...(status === 'Failed' ? { FailureReason: 'replayed' } : {}),
    },
  };
}

/**
 * The training lifecycle's assertions (test/helpers/trainingLifecycleContract.ts) through the AWS
 * launcher: the training ASL the stack deploys runs here (aws-local-stepfunctions), its Lambda tasks
 * answered by the workflow tasks (src/aws/trainingWorkflow.ts) and its `createTrainingJob.sync` by the
 * SageMaker stand-in (test/helpers/sageMakerTraining.ts: the real model.tar.gz, synced checkpoints,
 * state-change events to the events task). DynamoDB and S3 are the emulators, through the real SDK,
 * as in trainingWorkflow.rehearsal.test.ts (which also runs the real Lambda handlers).
 */
import { StateMachine } from 'aws-local-stepfunctions';
import { lambdaTaskNames, substitute, WORKFLOWS } from '../../lib/workflows/definitions';
import type { S3BlobStore } from '../../src/adapters/s3/blobStore';
import { SageMakerClient } from '@aws-sdk/client-sagemaker';
import {
  applySageMakerEvent,
  completeTraining,
  prepareTraining,
  recordTrainingFailure,
  sageMakerJobName,
  StepFunctionsTrainingLauncher,
  type TrainingEnv,
} from '../../src/aws/trainingWorkflow';
import type { Services } from '../../src/core/context';
import { baseModelManifestKey } from '../../src/core/modelLayout';
import { jobRefItem } from '../../src/core/recordKeys';
import { getTrainingJob } from '../../src/core/trainingJobs';
import { FakeControlPlane } from '../helpers/fakeControlPlane';
import { jsonl, TestStack } from '../helpers/localStack';
import { SageMakerTrainingStandIn, type Outcome } from '../helpers/sageMakerTraining';
import {
  describeTrainingLifecycle,
  LIFECYCLE_ROWS,
  type LifecycleScenario,
  type Logged,
} from '../helpers/trainingLifecycleContract';
import '../../src/local/promiseWithResolvers';

const ENV: TrainingEnv = { jobNamePrefix: 'sift-lifecycle-', instanceType: 'ml.g5.xlarge', maxRuntimeSeconds: 86_400 };
const BASE_MODEL = 'sift/gliner2-mini-v1';

let stack: TestStack;
let control: FakeControlPlane;
let svc: Services;
let teamId: string;
const saved = { ...process.env };

describeTrainingLifecycle('AWS', {
  async setup(now) {
    stack = await TestStack.start();
    control = await FakeControlPlane.start();
    // the workflow function scores on the encoder service; unreachable here, so the trainer's metrics stand
    Object.assign(process.env, {
      SIFT_INFERENCE_URL: 'http://127.0.0.1:9',
      SIFT_INTERNAL_TOKEN: 'internal-token-for-tests-0123456789abcdef',
    });
    svc = { ...stack.svc, now };
    const team = await stack.newTeam('lifecycle');
    teamId = team.teamId;
    await stack.uploadDataset('people', jsonl(LIFECYCLE_ROWS), { key: team.key });
    // the base model's files: SageMaker refuses a job whose model channel is empty
    await svc.blobs.put(
      baseModelManifestKey(BASE_MODEL),
      JSON.stringify({ format: 'sift-model/1', family: 'encoder' }),
    );
    return { svc, teamId: team.teamId, dataset: 'people', baseModel: BASE_MODEL };
  },

  async run(job, scenario: LifecycleScenario, logged: Logged[]) {
    const at =
      (level: Logged['level']) =>
      (message: string, extra: Record<string, unknown> = {}) =>
        void logged.push({ level, message, extra });
    const logger = { info: at('info'), warn: at('warn'), error: at('error') };
    const input = { jobId: job.id, teamId };
    // what StepFunctionsTrainingLauncher.submit writes, so the events find the job
    await svc.records.put(jobRefItem(job.id), { team_id: input.teamId, job_id: job.id });
    const tasks: Record<string, (input: never) => Promise<unknown>> = {
      'training.prepare': (i) => prepareTraining(svc, ENV, i),
      'training.complete': (i) => completeTraining(svc, i, logger),
      'training.failed': (i) => recordTrainingFailure(svc, i, logger),
    };
    const raw = WORKFLOWS.training();
    const definition = substitute(raw, {
      TaskFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:sift-test-tasks',
      TrainingImage: '123456789012.dkr.ecr.us-east-1.amazonaws.com/sift-training:test',
      TrainingRoleArn: 'arn:aws:iam::123456789012:role/sift-test-training',
      DataKeyArn: 'arn:aws:kms:us-east-1:123456789012:key/00000000-0000-4000-8000-000000000000',
      Stage: 'test',
    });
    const sageMaker = new SageMakerTrainingStandIn(svc.blobs as S3BlobStore, control, (e) =>
      applySageMakerEvent(svc, ENV, e.detail),
    );
    const outcome: Outcome =
      scenario.kind === 'fail'
        ? { kind: 'fail', output: scenario.output, failureFile: scenario.failureFile }
        : scenario.kind === 'complete'
          ? {
              kind: 'complete',
              output: scenario.output,
              ...(scenario.interrupted ? { interrupted: scenario.interrupted } : {}),
            }
          : { kind: scenario.kind, output: scenario.output };
    // what POST …/stop reaches: SageMaker's StopTrainingJob (the control plane's stand-in)
    svc.training = new StepFunctionsTrainingLauncher(
      () => svc,
      'arn:aws:states:us-east-1:123456789012:stateMachine:sift-test-training',
      ENV,
      undefined,
      new SageMakerClient({
        endpoint: control.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      }),
    );
    const handlers: Record<string, (payload: never) => Promise<unknown>> = {
      Train: (request) => sageMaker.run(request, outcome),
    };
    for (const state of Object.keys(lambdaTaskNames(raw))) {
      handlers[state] = (payload: { task: string; input: unknown }) => tasks[payload.task]!(payload.input as never);
    }
    const sm = new StateMachine(definition as never, { validationOptions: { checkArn: false, checkPaths: true } });
    const execution = sm
      .run(input as never, { overrides: { taskResourceLocalHandlers: handlers as never } })
      .result.catch(() => undefined); // a failed job fails the execution
    if (scenario.kind === 'stop') {
      // once SageMaker has the job InProgress (and its event marked the job running), a caller stops it
      while (
        control.trainingJobs.get(sageMakerJobName(ENV, job.id))?.status !== 'InProgress' ||
        (await getTrainingJob(svc, teamId, job.id)).status !== 'running'
      ) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await scenario.stop();
    }
    await execution;
    delete svc.training; // the next job is created without a launcher (this harness starts it)
  },

  restarts: true,

  async teardown() {
    process.env = saved;
    await control?.stop();
    await stack?.stop();
  },
});

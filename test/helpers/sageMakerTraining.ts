/**
 * SageMaker's side of the training state machine's `createTrainingJob.sync` task, for the offline
 * rehearsal: it checks the request against test/helpers/awsRequestRules.ts, refuses empty input
 * channels, then does to S3 (s3rver, through the real SDK) what SageMaker does — syncs
 * /opt/ml/checkpoints to CheckpointConfig.S3Uri and uploads /opt/ml/model as
 * `<S3OutputPath>/<TrainingJobName>/output/model.tar.gz`
 * (https://docs.aws.amazon.com/sagemaker/latest/dg/model-train-storage.html,
 *  https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-output.html) —
 * and sends the "SageMaker Training Job State Change" events
 * (https://docs.aws.amazon.com/sagemaker/latest/dg/automating-sagemaker-with-eventbridge.html).
 * A second CreateTrainingJob with a name already used is refused with ResourceInUse: names are
 * unique within the account and region ("CreateTrainingJob",
 * https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html); Step
 * Functions names a service integration's error `SageMaker.<exception>`. `lostAnswer` makes a create
 * succeed while the task errs (an internal error after the job exists): Step Functions then retries.
 * Not modelled: spot capacity waits and interruptions, MaxRuntime/MaxWait, warm pools, metrics,
 * billing; DescribeTrainingJob answers InProgress once, then the job's end.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReadStream } from 'node:fs';
import type { EventBridgeEvent } from 'aws-lambda';
import type { S3BlobStore as BlobStore } from '../../src/adapters/s3/blobStore';
import { violations } from './awsRequestRules';
import type { FakeControlPlane } from './fakeControlPlane';
import { CHECKPOINT_INDEX, packModelDir, type TrainerOutput } from './trainerOutput';

export type TrainingEvent = EventBridgeEvent<
  'SageMaker Training Job State Change',
  Record<string, unknown> & { TrainingJobName: string; TrainingJobStatus: string; FailureReason?: string }
>;

export type Outcome =
  | {
      kind: 'complete';
      output: TrainerOutput;
      tarEntries?: 'dot' | 'names';
      /** /opt/ml/checkpoints as an attempt SageMaker interrupted left it (spot): S3 keeps what it synced */
      interrupted?: string;
    }
  | { kind: 'fail'; failureFile: string; output: TrainerOutput }
  | { kind: 'stop'; output: TrainerOutput };

const ACCOUNT = '123456789012';

/** `s3://bucket/key` → the key, in the one bucket the stack uses. */
function keyOf(blobs: BlobStore, uri: string): string {
  const prefix = `s3://${blobs.bucket}/`;
  if (!uri.startsWith(prefix)) throw new Error(`${uri} is not in the stack's bucket ${blobs.bucket}`);
  return uri.slice(prefix.length);
}
const join3 = (...parts: string[]) =>
  parts.map((p, i) => (i === 0 ? p.replace(/\/+$/, '') : p.replace(/^\/+|\/+$/g, ''))).join('/');

export class SageMakerTrainingStandIn {
  readonly requests: Record<string, unknown>[] = [];
  /** Every event sent, in order (the test may replay them). */
  readonly events: TrainingEvent[] = [];

  constructor(
    private readonly blobs: BlobStore,
    private readonly control: FakeControlPlane,
    private readonly deliver: (event: TrainingEvent) => Promise<void>,
  ) {}

  /** The Train state's handler: CreateTrainingJob's request in, DescribeTrainingJob's shape out (or a task failure). */
  async run(request: Record<string, unknown>, outcome: Outcome): Promise<Record<string, unknown>> {
    this.requests.push(request);
    const problems = violations('SageMaker.CreateTrainingJob', request);
    if (problems.length) throw Object.assign(new Error(problems.join('; ')), { name: 'SageMaker.ValidationException' });
    const name = String(request.TrainingJobName);
    if (this.control.trainingJobs.has(name))
      throw Object.assign(
        new Error(
          `Training job names must be unique within an AWS account and region, and a training job with this name already exists (${name})`,
        ),
        { name: this.duplicateErrorName },
      );
    if (this.createFailsWithoutJob)
      throw Object.assign(new Error('We encountered an internal error. Please try again.'), {
        name: 'SageMaker.AmazonSageMakerException',
      });
    const running = this.train(request, outcome, name);
    this.running.set(name, running);
    if (this.lostAnswer) {
      this.lostAnswer = false;
      running.catch(() => {}); // followed through describe()
      throw Object.assign(new Error('We encountered an internal error. Please try again.'), {
        name: 'SageMaker.AmazonSageMakerException',
      });
    }
    return running;
  }

  /** The first create of the next run succeeds while Step Functions sees an internal error. */
  lostAnswer = false;
  /**
   * The error name Step Functions gives a duplicate name: not documented for the optimized
   * integration, so the workflow must follow its own job under either reading.
   */
  duplicateErrorName = 'SageMaker.ResourceInUseException';
  /** Every create fails with an internal error and creates nothing (a SageMaker outage). */
  createFailsWithoutJob = false;
  private readonly running = new Map<string, Promise<Record<string, unknown>>>();
  private readonly described = new Set<string>();

  /** DescribeTrainingJob (the `aws-sdk:sagemaker:describeTrainingJob` task): InProgress once, then the job's end. */
  async describeTrainingJob(request: { TrainingJobName: string }): Promise<Record<string, unknown>> {
    const running = this.running.get(request.TrainingJobName);
    if (!running)
      throw Object.assign(new Error('Requested resource not found'), { name: 'SageMaker.ResourceNotFound' });
    if (!this.described.has(request.TrainingJobName)) {
      this.described.add(request.TrainingJobName);
      return { TrainingJobName: request.TrainingJobName, TrainingJobStatus: 'InProgress' };
    }
    return running.catch((err: Error) => JSON.parse(err.message) as Record<string, unknown>);
  }

  private async train(request: Record<string, unknown>, outcome: Outcome, name: string) {
    const job = { status: 'InProgress' as string, onStop: undefined as (() => void) | undefined };
    const stopped = new Promise<void>((ok) => (job.onStop = ok));
    this.control.trainingJobs.set(name, job);
    // File mode downloads every channel first; an empty prefix fails the job before the container starts
    for (const channel of request.InputDataConfig as {
      ChannelName: string;
      DataSource: { S3DataSource: { S3Uri: string } };
    }[]) {
      const keys = await this.blobs.list(keyOf(this.blobs, channel.DataSource.S3DataSource.S3Uri));
      if (!keys.length)
        return this.end(
          request,
          job,
          'Failed',
          `ClientError: No S3 objects found under S3 URL "${channel.DataSource.S3DataSource.S3Uri}" given in input data source.`,
        );
    }
    await this.send(request, 'InProgress', 'Training');
    const checkpointsKey = keyOf(this.blobs, (request.CheckpointConfig as { S3Uri: string }).S3Uri);
    // A managed spot job that loses its instance is restarted, and what its sync put under S3Uri is
    // copied back to LocalPath ("Resume training from a checkpoint",
    // https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints-resume.html): those objects stay
    // in S3; the restarted attempt's files are synced over them, nothing is deleted.
    if (outcome.kind === 'complete' && outcome.interrupted)
      await this.blobs.putDirectory(outcome.interrupted, `${join3(checkpointsKey)}/`);
    if (outcome.kind === 'stop') await stopped;
    // a stopped trainer got through its first epoch, a failing one through its epochs (no `final`)
    const all = outcome.output.checkpoints;
    const kept =
      outcome.kind === 'stop' ? all.slice(0, 1) : outcome.kind === 'fail' ? all.filter((c) => !c.meta.is_final) : all;
    for (const c of kept) await this.blobs.putDirectory(c.dir, `${join3(checkpointsKey, c.meta.name)}/`);
    await this.blobs.put(
      join3(checkpointsKey, CHECKPOINT_INDEX),
      await readFile(join(outcome.output.checkpointsDir, CHECKPOINT_INDEX)),
    );
    if (outcome.kind === 'stop') return this.end(request, job, 'Stopped');
    if (outcome.kind === 'fail')
      return this.end(request, job, 'Failed', `AlgorithmError: ${outcome.failureFile.trim()}, exit code: 1`);

    const outputKey = join3(
      keyOf(this.blobs, (request.OutputDataConfig as { S3OutputPath: string }).S3OutputPath),
      name,
      'output',
      'model.tar.gz',
    );
    const tmp = await mkdtemp(join(tmpdir(), 'sift-sagemaker-'));
    try {
      await packModelDir(outcome.output.modelDir, join(tmp, 'model.tar.gz'), outcome.tarEntries);
      await this.blobs.put(outputKey, createReadStream(join(tmp, 'model.tar.gz')), 'application/x-tar');
    } finally {
      await rm(tmp, { recursive: true, force: true });
    }
    job.status = 'Completed';
    const describe = this.describe(request, 'Completed', {
      ModelArtifacts: { S3ModelArtifacts: `s3://${this.blobs.bucket}/${outputKey}` },
    });
    await this.send(request, 'Completed', 'Completed', describe);
    return describe;
  }

  /** Ends the job unsuccessfully: its event, then the task failure Step Functions reports for a .sync job. */
  private async end(
    request: Record<string, unknown>,
    job: { status: string },
    status: 'Failed' | 'Stopped',
    reason?: string,
  ): Promise<never> {
    job.status = status;
    const describe = this.describe(request, status, reason ? { FailureReason: reason } : {});
    await this.send(request, status, status, describe);
    throw Object.assign(new Error(JSON.stringify(describe)), { name: 'States.TaskFailed' });
  }

  private describe(
    request: Record<string, unknown>,
    status: string,
    extra: Record<string, unknown>,
  ): Record<string, unknown> {
    const name = String(request.TrainingJobName);
    return {
      TrainingJobName: name,
      TrainingJobArn: `arn:aws:sagemaker:us-east-1:${ACCOUNT}:training-job/${name.toLowerCase()}`,
      TrainingJobStatus: status,
      HyperParameters: request.HyperParameters,
      BillableTimeInSeconds: 42,
      TrainingTimeInSeconds: 60,
      ...extra,
    };
  }

  private async send(
    request: Record<string, unknown>,
    status: string,
    secondary: string,
    describe?: Record<string, unknown>,
  ): Promise<void> {
    const detail: Record<string, unknown> = {
      ...(describe ?? this.describe(request, status, {})),
      TrainingJobStatus: status,
      SecondaryStatus: secondary,
    };
    const event: TrainingEvent = {
      version: '0',
      id: `evt-${this.events.length + 1}`,
      'detail-type': 'SageMaker Training Job State Change',
      source: 'aws.sagemaker',
      account: ACCOUNT,
      time: new Date().toISOString(),
      region: 'us-east-1',
      resources: [String(detail.TrainingJobArn)],
      detail: detail as unknown as TrainingEvent['detail'],
    };
    this.events.push(event);
    await this.deliver(event);
  }
}

/**
 * Training on AWS: the Step Functions training workflow (lib/workflows/definitions.ts) calls these
 * tasks around SageMaker's `createTrainingJob.sync`, and SageMaker state-change events update the
 * record in between. The job record and its files follow the same layout as local mode.
 */
import { jobItem, jobRefItem } from '../core/recordKeys';
import { ITEM_EXISTS } from '../core/ports';
import { SageMakerClient, StopTrainingJobCommand } from '@aws-sdk/client-sagemaker';
import { SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { Parser } from 'tar';
import { findBaseModel } from '../core/catalog';
import { baseModelPrefix } from '../core/modelLayout';
import type { Services } from '../core/context';
import { rowsKey } from '../core/datasets/service';
import { ConflictError } from '../core/errors';
import { newUuid } from '../core/ids';
import { safeRelativePath } from '../core/safePath';
import { encoderServiceUrl, RemoteTaskError, runOnEncoderService } from './encoderTasks';
import { archiveKey, getCheckpoint, jobPrefix, listCheckpoints, markBestCheckpoint, modelPrefix, registerCheckpoint } from '../core/training/artifacts';
import { trainerHyperparameters } from '../core/training/hyperparameters';
import type { TrainingLauncher } from '../core/training/launcher';
import { getTrainingJob, headlineMetrics, learningWarnings, TERMINAL, transitionJob, type TrainingJob } from '../core/trainingJobs';

export interface TrainingEnv {
  jobNamePrefix: string;
  instanceType: string;
  maxRuntimeSeconds: number;
}

export const sageMakerJobName = (env: Pick<TrainingEnv, 'jobNamePrefix'>, jobId: string) => `${env.jobNamePrefix}${jobId}`.slice(0, 63);

/** Starts the training workflow; stopping goes straight to SageMaker, whose event then lands here. */
export class StepFunctionsTrainingLauncher implements TrainingLauncher {
  constructor(
    private readonly svc: () => Services,
    private readonly stateMachineArn: string,
    private readonly env: Pick<TrainingEnv, 'jobNamePrefix'>,
    private readonly sfn = new SFNClient({}),
    private readonly sagemaker = new SageMakerClient({}),
  ) {}

  async submit(teamId: string, jobId: string): Promise<void> {
    await this.svc().records.put(jobRefItem(jobId), { team_id: teamId, job_id: jobId });
    await this.sfn.send(new StartExecutionCommand({ stateMachineArn: this.stateMachineArn, name: jobId, input: JSON.stringify({ jobId, teamId }) }));
  }

  async stop(_teamId: string, jobId: string): Promise<void> {
    await this.sagemaker.send(new StopTrainingJobCommand({ TrainingJobName: sageMakerJobName(this.env, jobId) })).catch((err: { name?: string }) => {
      // Not started yet (still preparing) or already over: the record's `stopped` is what counts.
      if (err.name !== 'ValidationException' && err.name !== 'ResourceNotFound') throw err;
    });
  }
}

/** `training.prepare`: copies the pinned datasets into the train channel and points at the base model. */
export async function prepareTraining(svc: Services, env: TrainingEnv, input: { jobId: string; teamId: string }) {
  const job = await getTrainingJob(svc, input.teamId, input.jobId);
  if (job.status !== 'requested') throw new ConflictError(`Training job ${job.id} is ${job.status}; not starting it`);
  // what a minute of it costs (core/billing/prices.ts): whichever function ends the job reads it here
  await svc.records.update(jobItem(input.teamId, job.id).pk, jobItem(input.teamId, job.id).sk, { set: { instance_type: env.instanceType }, condition: ITEM_EXISTS });
  const base = jobPrefix(input.teamId, job.id);
  for (const d of job.datasets) {
    await svc.blobs.copy(rowsKey(input.teamId, d.name, d.version), `${base}input/train/${d.name}-v${d.version}.jsonl`);
  }
  const modelChannel = findBaseModel(job.base_model) ? baseModelPrefix(job.base_model) : (await getCheckpoint(svc, input.teamId, job.base_model)).blob_prefix;
  const hyperParameters = trainerHyperparameters(job, '/opt/ml/input/data/model');
  const channel = (name: string, prefix: string) => ({
    ChannelName: name,
    DataSource: { S3DataSource: { S3DataType: 'S3Prefix', S3Uri: svc.blobs.uri(prefix), S3DataDistributionType: 'FullyReplicated' } },
    InputMode: 'File',
  });
  return {
    trainingJobName: sageMakerJobName(env, job.id),
    hyperParameters,
    channels: [channel('train', `${base}input/train/`), channel('model', modelChannel)],
    outputS3Uri: svc.blobs.uri(`${base}sagemaker/output/`),
    checkpointS3Uri: svc.blobs.uri(`${base}sagemaker/checkpoints/`),
    instanceType: env.instanceType,
    maxRuntimeSeconds: env.maxRuntimeSeconds,
    maxWaitSeconds: env.maxRuntimeSeconds * 2,
  };
}

/**
 * `training.complete`: unpacks SageMaker's model.tar.gz into the job's model prefix (so it is a
 * checkpoint like any other), keeps the archive as the download, registers the checkpoints the
 * trainer left in S3, and completes the record with the trainer's metrics. Safe to run again (Step
 * Functions retries a task whose invocation failed after the work was done).
 */
export async function completeTraining(svc: Services, input: { jobId: string; teamId: string; trainingResult?: { modelArtifacts?: string; trainingSeconds?: number } }) {
  const job = await getTrainingJob(svc, input.teamId, input.jobId);
  if (job.status === 'complete') return { status: job.status };
  const artifact = input.trainingResult?.modelArtifacts;
  const bucketUri = svc.blobs.uri('');
  if (!artifact?.startsWith(bucketUri)) throw new Error(`unexpected model artifact location: ${String(artifact)}`);
  const artifactKey = artifact.slice(bucketUri.length);
  const metrics = await unpackArchive(svc, artifactKey, modelPrefix(input.teamId, job.id));
  await svc.blobs.copy(artifactKey, archiveKey(input.teamId, job.id));
  const checkpoints = await listCheckpoints(svc, input.teamId, job.id);
  await registerSageMakerCheckpoints(svc, input.teamId, job, checkpoints);
  // a retry finds the final checkpoint it registered before instead of adding a second one
  // (the SageMaker checkpoints registered just above are never at the model prefix)
  const existing = checkpoints.find((c) => c.is_final && c.blob_prefix === modelPrefix(input.teamId, job.id));
  const finalId = existing?.id ?? newUuid();
  if (!existing) {
    await registerCheckpoint(svc, input.teamId, {
      id: finalId,
      job_id: job.id,
      root_model: job.root_model,
      blob_prefix: modelPrefix(input.teamId, job.id),
      step: 0,
      epoch: job.nr_epochs,
      metrics,
      is_best: false,
      is_final: true,
      created_at: svc.now().toISOString(),
    });
  }
  await markBestCheckpoint(svc, input.teamId, job.id);
  let headline = headlineMetrics(metrics);
  if (job.model_type === 'encoder' && encoderServiceUrl()) {
    // the same evaluator and engine as evaluations (the encoder service scores the held-out rows);
    // if it can't, the trainer's own validation metrics (same rules) stand
    const served = headlineMetrics(
      await runOnEncoderService('training.validate', { teamId: input.teamId, jobId: job.id }).catch((err: unknown) => {
        if (err instanceof RemoteTaskError) return null; // the service could not score them (unreachable, or it answered an error)
        throw err;
      }),
    );
    if (served) headline = served;
  }
  const warnings = learningWarnings(metrics, headline);
  // EventBridge may deliver InProgress after the job finished (or not at all): the record still passes through running
  if (job.status === 'requested') await transitionJob(svc, input.teamId, job.id, 'running').catch(ignoreConflict);
  const done = await transitionJob(svc, input.teamId, job.id, 'complete', { metrics: headline, warnings, final_checkpoint_id: finalId, ...sageMakerSeconds(input.trainingResult?.trainingSeconds) });
  return { status: done.status };
}

/**
 * `training.failed`: the workflow's error (or SageMaker's reason) becomes the job's `error`; the
 * checkpoints the trainer saved before it failed or was stopped are registered, as in local mode.
 */
export async function recordTrainingFailure(svc: Services, input: { jobId: string; teamId: string; error?: { Error?: string; Cause?: string } }) {
  let job = await getTrainingJob(svc, input.teamId, input.jobId);
  if (!TERMINAL.includes(job.status)) {
    job = await transitionJob(svc, input.teamId, input.jobId, 'failed', { error: failureReason(input.error).slice(0, 4000), ...sageMakerSeconds(describedSeconds(input.error)) }).catch(async (err: unknown) => {
      ignoreConflict(err); // the Failed/Stopped event (or a stop) got there first
      return getTrainingJob(svc, input.teamId, input.jobId);
    });
  }
  if (job.status !== 'complete') {
    await registerSageMakerCheckpoints(svc, input.teamId, job, await listCheckpoints(svc, input.teamId, job.id));
    await markBestCheckpoint(svc, input.teamId, job.id);
  }
  return { status: job.status };
}

/**
 * A `createTrainingJob.sync` task that fails carries the job's description as its Cause; its
 * FailureReason is what the trainer wrote to /opt/ml/output/failure. Other errors are kept as they are.
 */
function failureReason(error: { Error?: string; Cause?: string } | undefined): string {
  try {
    const described = JSON.parse(error?.Cause ?? '') as { FailureReason?: unknown };
    if (typeof described.FailureReason === 'string' && described.FailureReason) return described.FailureReason;
  } catch {
    // not a job description
  }
  return [error?.Error, error?.Cause].filter(Boolean).join(': ') || 'the training workflow failed';
}

/**
 * The seconds SageMaker trained (TrainingTimeInSeconds: what an on-demand instance bills) are what the
 * job is billed by, not the record's wall time: InProgress may arrive late or never (then the
 * record passes through `running` only as it completes).
 */
const sageMakerSeconds = (seconds: unknown): { compute_seconds?: number } => (typeof seconds === 'number' && seconds >= 0 ? { compute_seconds: seconds } : {});

/** A failed `createTrainingJob.sync` carries the job's description as its Cause. */
function describedSeconds(error: { Cause?: string } | undefined): unknown {
  try {
    return (JSON.parse(error?.Cause ?? '') as { TrainingTimeInSeconds?: unknown }).TrainingTimeInSeconds;
  } catch {
    return undefined; // not a job description: the record's wall time stands
  }
}

const ignoreConflict = (err: unknown) => {
  if (!(err instanceof ConflictError)) throw err;
};

/** EventBridge "SageMaker Training Job State Change" → the job record. */
export async function applySageMakerEvent(svc: Services, env: Pick<TrainingEnv, 'jobNamePrefix'>, detail: { TrainingJobName: string; TrainingJobStatus: string; FailureReason?: string }) {
  if (!detail.TrainingJobName.startsWith(env.jobNamePrefix)) return;
  const jobId = detail.TrainingJobName.slice(env.jobNamePrefix.length);
  const ref = await svc.records.get<{ team_id: string }>(jobRefItem(jobId).pk, jobRefItem(jobId).sk);
  if (!ref) return;
  const to = { InProgress: 'running', Stopped: 'stopped', Failed: 'failed' }[detail.TrainingJobStatus] as 'running' | 'stopped' | 'failed' | undefined;
  if (!to) return; // Completed is recorded by the workflow once the artifacts are in place.
  // a repeated or late event loses the conditional write: nothing to do
  await transitionJob(svc, ref.team_id, jobId, to, to === 'failed' ? { error: detail.FailureReason ?? 'SageMaker reported the job failed' } : {}).catch(ignoreConflict);
}

/**
 * The archive's files under `prefix`. Entry names come from the archive (node-tar's Parser, unlike its
 * Unpack, does not sanitize them), so each must be a safe relative path: one that is not fails the
 * step, and nothing after it is written (files before it stay under the job's own model prefix,
 * which a job that failed never serves).
 */
async function unpackArchive(svc: Services, key: string, prefix: string): Promise<Record<string, number> | null> {
  let metrics: Record<string, number> | null = null;
  const uploads: Promise<void>[] = [];
  let unsafe: Error | undefined;
  const parser = new Parser({
    onReadEntry: (entry) => {
      if (entry.type !== 'File' || unsafe) {
        entry.resume();
        return;
      }
      let path: string;
      try {
        path = safeRelativePath(entry.path, `the model archive ${key}`);
      } catch (err) {
        unsafe = err as Error;
        entry.resume();
        return;
      }
      const chunks: Buffer[] = [];
      entry.on('data', (c: Buffer) => chunks.push(c));
      entry.on('end', () => {
        const body = Buffer.concat(chunks);
        if (path === 'metrics.json') {
          const parsed = JSON.parse(body.toString('utf8')) as { metrics?: Record<string, number> } & Record<string, unknown>;
          metrics = (parsed.metrics ?? parsed) as Record<string, number>;
        }
        if (!unsafe) uploads.push(svc.blobs.put(prefix + path, body));
      });
    },
  });
  const source = await svc.blobs.stream(key);
  await new Promise<void>((resolve, reject) => {
    source.on('error', reject);
    parser.on('end', () => resolve());
    parser.on('error', reject);
    source.pipe(parser as unknown as NodeJS.WritableStream);
  });
  await Promise.all(uploads);
  if (unsafe) throw unsafe;
  return metrics;
}

/**
 * Checkpoint directories the trainer wrote to /opt/ml/checkpoints, synced by SageMaker to S3. Each
 * is registered once (by its prefix), so running this again adds nothing.
 */
/** Registers the checkpoints SageMaker synced to S3 that are not among `registered` yet. */
async function registerSageMakerCheckpoints(svc: Services, teamId: string, job: TrainingJob, registered: { blob_prefix: string }[]): Promise<void> {
  const prefix = `${jobPrefix(teamId, job.id)}sagemaker/checkpoints/`;
  const known = new Set(registered.map((c) => c.blob_prefix));
  for (const key of await svc.blobs.list(prefix)) {
    if (!key.endsWith('/sift_checkpoint.json')) continue;
    const blobPrefix = key.slice(0, -'sift_checkpoint.json'.length);
    if (known.has(blobPrefix)) continue;
    const meta = JSON.parse(await svc.blobs.getText(key)) as { id?: string; step?: number; epoch?: number; metrics?: Record<string, number>; created_at?: string };
    await registerCheckpoint(svc, teamId, {
      id: meta.id ?? newUuid(),
      job_id: job.id,
      root_model: job.root_model,
      blob_prefix: blobPrefix,
      step: meta.step ?? 0,
      epoch: meta.epoch ?? 0,
      metrics: meta.metrics ?? null,
      is_best: false,
      is_final: false,
      // the trainer's own time keeps the checkpoints in the order it saved them
      created_at: meta.created_at ?? svc.now().toISOString(),
    });
  }
}

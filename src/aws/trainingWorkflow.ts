/**
 * Training on AWS: the Step Functions training workflow (lib/workflows/definitions.ts) calls these
 * tasks around SageMaker's `createTrainingJob.sync`, and SageMaker state-change events update the
 * record in between. The job record and its files follow the same layout as local mode.
 */
import { jobRefItem } from '../core/recordKeys';
import { SageMakerClient, StopTrainingJobCommand } from '@aws-sdk/client-sagemaker';
import { SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import { Readable } from 'node:stream';
import { Parser } from 'tar';
import type { Services } from '../core/context';
import { ConflictError } from '../core/errors';
import type { Logger } from '../core/logger';
import { safeRelativePath } from '../core/safePath';
import { encoderServiceUrl, runOnEncoderService } from './encoderTasks';
import {
  archiveKey,
  jobPrefix,
  modelPrefix,
  syncedCheckpointsPrefix,
  trainChannelPrefix,
  validationChannelPrefix,
} from '../core/training/artifacts';
import type { TrainingLauncher } from '../core/training/launcher';
import * as lifecycle from '../core/training/lifecycle';
import { transitionJob } from '../core/trainingJobs';
import { createLogger } from '../http/logger';

export interface TrainingEnv {
  jobNamePrefix: string;
  instanceType: string;
  maxRuntimeSeconds: number;
}

export const sageMakerJobName = (env: Pick<TrainingEnv, 'jobNamePrefix'>, jobId: string) =>
  `${env.jobNamePrefix}${jobId}`.slice(0, 63);

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
    await this.sfn.send(
      new StartExecutionCommand({
        stateMachineArn: this.stateMachineArn,
        name: jobId,
        input: JSON.stringify({ jobId, teamId }),
      }),
    );
  }

  async stop(_teamId: string, jobId: string): Promise<void> {
    await this.sagemaker
      .send(new StopTrainingJobCommand({ TrainingJobName: sageMakerJobName(this.env, jobId) }))
      .catch((err: { name?: string }) => {
        // Not started yet (still preparing) or already over: the record's `stopped` is what counts.
        if (err.name !== 'ValidationException' && err.name !== 'ResourceNotFound') throw err;
      });
  }
}

/** `training.prepare`: copies the pinned datasets into the train (and validation) channel the lifecycle names and points at its model channel. */
export async function prepareTraining(svc: Services, env: TrainingEnv, input: { jobId: string; teamId: string }) {
  const prepared = await lifecycle.prepareTraining(svc, input.teamId, input.jobId, { instanceType: env.instanceType });
  const train = trainChannelPrefix(input.teamId, prepared.job.id);
  for (const rows of prepared.train) await svc.blobs.copy(rows.key, `${train}${rows.file}`);
  const validation = validationChannelPrefix(input.teamId, prepared.job.id);
  for (const rows of prepared.validation) await svc.blobs.copy(rows.key, `${validation}${rows.file}`);
  const channel = (name: string, prefix: string) => ({
    ChannelName: name,
    DataSource: {
      S3DataSource: { S3DataType: 'S3Prefix', S3Uri: svc.blobs.uri(prefix), S3DataDistributionType: 'FullyReplicated' },
    },
    InputMode: 'File',
  });
  return {
    trainingJobName: sageMakerJobName(env, prepared.job.id),
    hyperParameters: prepared.hyperparameters('/opt/ml/input/data/model'),
    // SageMaker mounts each channel at /opt/ml/input/data/<name>; the trainer reads `validation` when it is there
    channels: [
      channel('train', train),
      ...(prepared.validation.length ? [channel('validation', validation)] : []),
      channel('model', prepared.model.prefix),
    ],
    outputS3Uri: svc.blobs.uri(`${jobPrefix(input.teamId, prepared.job.id)}sagemaker/output/`),
    checkpointS3Uri: svc.blobs.uri(syncedCheckpointsPrefix(input.teamId, prepared.job.id)),
    instanceType: env.instanceType,
    maxRuntimeSeconds: env.maxRuntimeSeconds,
    maxWaitSeconds: env.maxRuntimeSeconds * 2,
  };
}

/** The workflow function's log (Powertools in the Lambda); tests pass their own. */
let defaultLogger: Logger | undefined;
const workflowLogger = () => (defaultLogger ??= createLogger());

/**
 * `training.complete`: the lifecycle's completion, with SageMaker's model.tar.gz as the model: unpacked
 * into the job's model prefix (so it is a checkpoint like any other), kept as the download. The
 * checkpoints the trainer left in S3, the final one, the scoring on the encoder service (the
 * serving engine) and the record are the lifecycle's. Safe to run again (Step Functions retries a
 * task whose invocation failed after the work was done).
 */
export async function completeTraining(
  svc: Services,
  input: { jobId: string; teamId: string; trainingResult?: { modelArtifacts?: string; trainingSeconds?: number } },
  logger: Logger = workflowLogger(),
) {
  return lifecycle.completeTraining(svc, input.teamId, input.jobId, {
    report: { logger },
    computeSeconds: input.trainingResult?.trainingSeconds,
    publishModel: async () => {
      const artifact = input.trainingResult?.modelArtifacts;
      const bucketUri = svc.blobs.uri('');
      if (!artifact?.startsWith(bucketUri)) throw new Error(`unexpected model artifact location: ${String(artifact)}`);
      const artifactKey = artifact.slice(bucketUri.length);
      await unpackArchive(svc, artifactKey, modelPrefix(input.teamId, input.jobId));
      await svc.blobs.copy(artifactKey, archiveKey(input.teamId, input.jobId));
    },
    // the same evaluator and engine as evaluations: the encoder service scores the held-out rows
    scorer: encoderServiceUrl()
      ? (teamId, jobId) => runOnEncoderService('training.validate', { teamId, jobId })
      : undefined,
  });
}

/**
 * `training.failed`: the workflow's error (or SageMaker's reason) becomes the job's `error`, and the
 * checkpoints the trainer saved before it failed or was stopped are kept: the lifecycle's failure.
 */
export async function recordTrainingFailure(
  svc: Services,
  input: { jobId: string; teamId: string; error?: { Error?: string; Cause?: string } },
  logger: Logger = workflowLogger(),
) {
  return lifecycle.failTraining(svc, input.teamId, input.jobId, failureReason(input.error), {
    report: { logger },
    computeSeconds: describedSeconds(input.error),
  });
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
export async function applySageMakerEvent(
  svc: Services,
  env: Pick<TrainingEnv, 'jobNamePrefix'>,
  detail: { TrainingJobName: string; TrainingJobStatus: string; FailureReason?: string },
) {
  if (!detail.TrainingJobName.startsWith(env.jobNamePrefix)) return;
  const jobId = detail.TrainingJobName.slice(env.jobNamePrefix.length);
  const ref = await svc.records.get<{ team_id: string }>(jobRefItem(jobId).pk, jobRefItem(jobId).sk);
  if (!ref) return;
  const to = { InProgress: 'running', Stopped: 'stopped', Failed: 'failed' }[detail.TrainingJobStatus] as
    | 'running'
    | 'stopped'
    | 'failed'
    | undefined;
  if (!to) return; // Completed is recorded by the workflow once the artifacts are in place.
  // a repeated or late event loses the conditional write: nothing to do. This function reaches the
  // table only (no bucket): the workflow's failure step keeps the checkpoints (lifecycle.failTraining)
  if (to === 'running') await lifecycle.trainingRunning(svc, ref.team_id, jobId);
  else
    await transitionJob(
      svc,
      ref.team_id,
      jobId,
      to,
      to === 'failed' ? { error: detail.FailureReason ?? 'SageMaker reported the job failed' } : {},
    ).catch(ignoreConflict);
}

/**
 * The archive's files under `prefix`, streamed: S3 → gunzip → tar → one entry's upload at a time, so
 * the function holds a part or two (S3BlobStore.put) however large the model (a 1,024 MB Lambda
 * buffering every file ran out of memory on a full fine-tune's weights, after SageMaker had billed
 * the job). The parser waits while an entry is unread, so the next entry is not read until the one
 * before it is stored. Uncompressed output (CompressionType NONE) would avoid the unpacking, but the
 * archive is also the job's download, which would then have to be built. Entry names come from the
 * archive (node-tar's Parser, unlike its Unpack, does not sanitize them), so each must be a safe
 * relative path: one that is not fails the step, and nothing after it is written (files before it
 * stay under the job's own model prefix, which a job that failed never serves).
 */
async function unpackArchive(svc: Services, key: string, prefix: string): Promise<void> {
  let stored: Promise<void> = Promise.resolve();
  let failure: unknown;
  const parser = new Parser({
    onReadEntry: (entry) => {
      if (entry.type !== 'File' || failure) {
        entry.resume();
        return;
      }
      let path: string;
      try {
        path = safeRelativePath(entry.path, `the model archive ${key}`);
      } catch (err) {
        failure = err;
        entry.resume();
        return;
      }
      stored = stored
        .then(() => (failure ? entry.resume() : svc.blobs.put(prefix + path, Readable.from(entry))))
        .then(
          () => undefined,
          (err: unknown) => {
            failure ??= err;
            entry.resume(); // the rest of it is skipped, so the parser reaches the end
          },
        );
    },
  });
  const source = await svc.blobs.stream(key);
  await new Promise<void>((resolve, reject) => {
    source.on('error', reject);
    parser.on('end', () => resolve());
    parser.on('error', reject);
    source.pipe(parser as unknown as NodeJS.WritableStream);
  });
  await stored;
  if (failure) throw failure;
}

/**
 * The training lifecycle, written once: what happens to a job's record, checkpoints and metrics
 * between `requested` and the end, the same locally and on AWS. The launchers only move bytes and
 * report what they see:
 * - the local runner (src/local/trainingRunner.ts) runs the trainer as a subprocess and reports its
 *   `checkpoint` events as they come, its model directory and its failure file;
 * - on AWS (src/aws/trainingWorkflow.ts) the training state machine's tasks report SageMaker's
 *   channels, its model.tar.gz and its failure; the checkpoints arrive as synced files.
 *
 * prepare → (the trainer runs; checkpoints reported) → complete from the model files, or fail with the reason.
 */
import { z } from 'zod';
import type { Services } from '../context';
import { rowsKey } from '../datasets/service';
import { deployTrainingJob } from '../deployments';
import { ConflictError } from '../errors';
import { isUuid, newUuid } from '../ids';
import type { Logger } from '../logger';
import { baseModelCacheName, baseModelManifestKey, baseModelPrefix } from '../modelLayout';
import { ITEM_EXISTS } from '../ports';
import { jobItem } from '../recordKeys';
import {
  getTrainingJob,
  headlineMetrics,
  learningWarnings,
  TERMINAL,
  transitionJob,
  type TrainingJob,
} from '../trainingJobs';
import {
  getCheckpoint,
  listCheckpoints,
  markBestCheckpoint,
  modelPrefix,
  registerCheckpoint,
  syncedCheckpointsPrefix,
  type Checkpoint,
} from './artifacts';
import { trainerHyperparameters } from './hyperparameters';

/** The fields of a trainer's checkpoint: its `checkpoint` event, and the sift_checkpoint.json beside the files. */
export interface TrainerCheckpoint {
  id?: unknown;
  step?: unknown;
  epoch?: unknown;
  metrics?: unknown;
  is_final?: unknown;
  created_at?: unknown;
}

/**
 * The serving engine's scores of the exported model on the held-out rows the trainer kept
 * (`validation.jsonl` in the model): in this process locally, on the encoder service on AWS. Null
 * when there is nothing to score; throws when it could not score.
 */
export type ValidationScorer = (teamId: string, jobId: string) => Promise<unknown>;

/** Where the lifecycle says what it did: the process log, and the job's own log where the runtime keeps one. */
export interface LifecycleReport {
  logger: Logger;
  jobLog?: {
    line(text: string): void;
    /** Written before the job's last transition, so a reader that stops at the end has every line. */
    flush(): Promise<void>;
  };
}

export interface PreparedTraining {
  job: TrainingJob;
  /** The `train` channel: each pinned dataset version's normalized rows, as `file`. */
  train: { key: string; file: string }[];
  /** The `validation` channel, likewise (empty: the trainer holds out part of the train rows). */
  validation: { key: string; file: string }[];
  /** The `model` channel: the base model's files (a catalog model in the model store, or a checkpoint). */
  model: { prefix: string; cacheName: string };
  /** The trainer's hyperparameters, with the path where the `model` channel's files are. */
  hyperparameters(baseModelPath: string): Record<string, string>;
}

/** The trainer's process started (locally at once; on AWS when SageMaker says InProgress). Undefined: the job was stopped or deleted meanwhile. */
export async function trainingRunning(
  svc: Services,
  teamId: string,
  jobId: string,
  extra: Partial<TrainingJob> = {},
): Promise<TrainingJob | undefined> {
  try {
    return await transitionJob(svc, teamId, jobId, 'running', extra);
  } catch (err) {
    if (err instanceof ConflictError) return undefined;
    throw err;
  }
}

/**
 * The channels a job trains from, and what a minute of it costs (`instanceType`, core/billing/prices.ts:
 * whichever step ends the job reads it). A job that already ended is not started; a catalog base
 * model whose weights are not in the model store fails here, with that reason, before any compute.
 */
export async function prepareTraining(
  svc: Services,
  teamId: string,
  jobId: string,
  opts: { instanceType: string },
): Promise<PreparedTraining> {
  const job = await getTrainingJob(svc, teamId, jobId);
  if (job.status !== 'requested' && job.status !== 'running')
    throw new ConflictError(`Training job ${job.id} is ${job.status}; not starting it`);
  const key = jobItem(teamId, job.id);
  await svc.records.update(key.pk, key.sk, { set: { instance_type: opts.instanceType }, condition: ITEM_EXISTS });
  const rowsFile = (d: { name: string; version: number }) => ({
    key: rowsKey(teamId, d.name, d.version),
    file: `${d.name}-v${d.version}.jsonl`,
  });
  const train = job.datasets.map(rowsFile);
  const validation = (job.validation_datasets ?? []).map(rowsFile);
  let model: PreparedTraining['model'];
  if (!isUuid(job.base_model)) {
    // a base model (catalog or imported: both live under models/<id>/), else a checkpoint id
    if (!(await svc.blobs.head(baseModelManifestKey(job.base_model)))) {
      throw new Error(
        `the weights of ${job.base_model} are not in the model store (GET /base-models shows available: false)`,
      );
    }
    model = { prefix: baseModelPrefix(job.base_model), cacheName: baseModelCacheName(job.base_model) };
  } else {
    const ckpt = await getCheckpoint(svc, teamId, job.base_model);
    model = { prefix: ckpt.blob_prefix, cacheName: `checkpoints/${ckpt.id}` };
  }
  return {
    job: { ...job, instance_type: opts.instanceType },
    train,
    validation,
    model,
    hyperparameters: (path) => trainerHyperparameters(job, path),
  };
}

/**
 * A checkpoint the trainer announced while it ran, whose files the launcher has put at `blobPrefix`:
 * recorded as the trainer described it (its own id, step, epoch, metrics, and whether it is the
 * final one), dated when the service learned of it. Files first, then the record.
 */
export async function checkpointSaved(
  svc: Services,
  teamId: string,
  job: Pick<TrainingJob, 'id' | 'root_model'>,
  meta: TrainerCheckpoint,
  blobPrefix: string,
): Promise<Checkpoint> {
  const checkpoint = checkpointRecord(job, meta, blobPrefix, {
    is_final: meta.is_final === true,
    created_at: svc.now().toISOString(),
  });
  await registerCheckpoint(svc, teamId, checkpoint);
  return checkpoint;
}

/**
 * The end of a trainer that exited with its model: `publishModel` (the launcher's) puts the model's
 * files under the job's model prefix and its archive at the download key; then the checkpoints that
 * arrived as files are recorded, the final checkpoint is the one the trainer announced as final (or
 * else the model itself, at the step the trainer reached), the best is marked, the model is scored
 * on the serving engine (the trainer's metrics stand when it cannot be: said, not silent), and the
 * job completes with the metrics and `learningWarnings`.
 *
 * Safe to run again (a Step Functions retry): a complete job is left as it is. A job stopped or failed
 * meanwhile keeps its checkpoints and its status; its model is not published.
 */
export async function completeTraining(
  svc: Services,
  teamId: string,
  jobId: string,
  opts: {
    publishModel: () => Promise<void>;
    scorer?: ValidationScorer | undefined;
    report: LifecycleReport;
    computeSeconds?: unknown;
  },
): Promise<{ status: TrainingJob['status'] }> {
  const job = await getTrainingJob(svc, teamId, jobId);
  if (job.status === 'complete') return { status: job.status };
  if (TERMINAL.includes(job.status)) return settle(svc, teamId, job);
  const say = (line: string) => opts.report.jobLog?.line(line);

  await opts.publishModel();
  await registerSyncedCheckpoints(svc, teamId, job);
  const prefix = modelPrefix(teamId, job.id);
  const trainerMetrics = unwrapMetrics(await readModelJson(svc, `${prefix}metrics.json`)); // none: no metrics, no warnings
  const manifest = (await readModelJson(svc, `${prefix}manifest.json`)) as { steps?: unknown } | null;

  const checkpoints = await listCheckpoints(svc, teamId, job.id);
  // the final checkpoint the trainer announced, or (a retry) the model registered as final before
  let finalId = checkpoints.find((c) => c.is_final)?.id;
  if (!finalId) {
    const steps = typeof manifest?.steps === 'number' ? manifest.steps : Math.max(0, ...checkpoints.map((c) => c.step));
    const final = checkpointRecord(job, { step: steps, epoch: job.nr_epochs, metrics: trainerMetrics }, prefix, {
      is_final: true,
      created_at: svc.now().toISOString(),
    });
    await registerCheckpoint(svc, teamId, final);
    finalId = final.id;
  }
  await markBestCheckpoint(svc, teamId, job.id);

  let headline = headlineMetrics(trainerMetrics);
  if (opts.scorer && job.model_type === 'encoder') {
    // the job's metrics come from the service's evaluator and engine, like any evaluation's
    try {
      const served = (await opts.scorer(teamId, job.id)) as { support?: { rows?: unknown } } | null;
      const scored = headlineMetrics(served);
      if (scored) {
        headline = scored;
        say(
          `validation metrics (serving engine): f1 ${scored.f1} precision ${scored.precision} recall ${scored.recall} over ${String(served?.support?.rows ?? '?')} rows`,
        );
      }
    } catch (error) {
      opts.report.logger.warn("could not score a trained model on its validation rows; the trainer's metrics stand", {
        job_id: job.id,
        error,
      });
      say(
        `could not score the exported model on the validation rows; keeping the trainer's metrics: ${(error as Error).message}`,
      );
    }
  }
  const warnings = learningWarnings(trainerMetrics, headline);
  for (const w of warnings) say(`WARNING: ${w}`);
  say('training complete; model, archive and final checkpoint saved');
  await opts.report.jobLog?.flush();
  // the record passes through running even when that report came late or never (EventBridge)
  if (job.status === 'requested') await trainingRunning(svc, teamId, job.id);
  try {
    const done = await transitionJob(svc, teamId, job.id, 'complete', {
      metrics: headline,
      warnings,
      final_checkpoint_id: finalId,
      ...computeSeconds(opts.computeSeconds),
      ...(typeof trainerMetrics?.trained_tokens === 'number' ? { trained_tokens: trainerMetrics.trained_tokens } : {}),
    });
    // OpenAI's fine-tuned model answers as soon as its job succeeds: a job created through its API is deployed now
    if (done.suffix !== undefined) {
      await deployTrainingJob(svc, teamId, done.id).catch((error: unknown) =>
        opts.report.logger.warn('could not deploy a job created through the OpenAI fine-tuning API', {
          job_id: done.id,
          error,
        }),
      );
    }
    return { status: done.status };
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
    // stopped (or failed) as it completed: that status stands, with the job's checkpoints
    opts.report.logger.info('training job ended before it could complete', {
      job_id: job.id,
      reason: (err as Error).message,
    });
    return settle(svc, teamId, await getTrainingJob(svc, teamId, job.id));
  }
}

/**
 * The end of a job that did not produce its model: the trainer's reason (its failure file, the
 * platform's reason, or the launcher's own error) becomes the job's `error`, unless the job already
 * ended (a stop wins); either way the checkpoints it saved are kept and the best marked.
 */
export async function failTraining(
  svc: Services,
  teamId: string,
  jobId: string,
  reason: string,
  opts: { report: LifecycleReport; computeSeconds?: unknown },
): Promise<{ status: TrainingJob['status'] }> {
  let job = await getTrainingJob(svc, teamId, jobId);
  let recorded = false;
  if (!TERMINAL.includes(job.status)) {
    try {
      job = await transitionJob(svc, teamId, jobId, 'failed', {
        error: reason.slice(0, 4000),
        ...computeSeconds(opts.computeSeconds),
      });
      recorded = true;
    } catch (err) {
      if (!(err instanceof ConflictError)) throw err;
      job = await getTrainingJob(svc, teamId, jobId);
    }
  }
  if (!recorded) {
    // a stop (or an earlier report of the failure) got there first: that status stands, and this reason is said here
    opts.report.logger.info('training job already ended; this failure reason was not recorded', {
      job_id: jobId,
      status: job.status,
      reason: reason.slice(0, 500),
    });
  }
  if (job.status === 'complete') return { status: job.status };
  return settle(svc, teamId, job);
}

/** A job that ended without completing keeps every checkpoint it saved, the best marked. */
async function settle(svc: Services, teamId: string, job: TrainingJob): Promise<{ status: TrainingJob['status'] }> {
  await registerSyncedCheckpoints(svc, teamId, job);
  await markBestCheckpoint(svc, teamId, job.id);
  return { status: job.status };
}

/**
 * Checkpoints that reached the store as files (SageMaker's sync of /opt/ml/checkpoints), each
 * recorded once (by its prefix), so running this again adds nothing. Nothing announced them as
 * final, so none is: the job's final checkpoint is then its model. They are dated by the trainer,
 * so they list in the order it saved them.
 *
 * Only those the trainer's index names: S3 keeps whatever an interrupted attempt uploaded (SageMaker
 * restores it on restart and the trainer resumes; "Resume training from a checkpoint",
 * https://docs.aws.amazon.com/sagemaker/latest/dg/model-checkpoints-resume.html), such as a checkpoint
 * it was still writing (containers/training/sift_trainer/job/resume.py). A trainer without the index
 * (older images) has every directory registered.
 */
async function registerSyncedCheckpoints(svc: Services, teamId: string, job: TrainingJob): Promise<void> {
  const prefix = syncedCheckpointsPrefix(teamId, job.id);
  const index = await syncedIndex(svc, `${prefix}${CHECKPOINT_INDEX}`);
  const keys = (await svc.blobs.list(prefix)).filter((k) => {
    const dir = /^([^/]+)\/sift_checkpoint\.json$/.exec(k.slice(prefix.length))?.[1];
    return dir !== undefined && (index === null || index.has(dir));
  });
  if (!keys.length) return;
  const known = new Set((await listCheckpoints(svc, teamId, job.id)).map((c) => c.blob_prefix));
  for (const key of keys) {
    const blobPrefix = key.slice(0, -'sift_checkpoint.json'.length);
    if (known.has(blobPrefix)) continue;
    const meta = JSON.parse(await svc.blobs.getText(key)) as TrainerCheckpoint;
    const createdAt =
      typeof meta.created_at === 'string' && meta.created_at ? meta.created_at : svc.now().toISOString();
    await registerCheckpoint(
      svc,
      teamId,
      checkpointRecord(job, meta, blobPrefix, { is_final: false, created_at: createdAt }),
    );
  }
}

/** The trainer's list of its run's checkpoints (job/resume.py INDEX), rewritten at each save. */
const CHECKPOINT_INDEX = 'sift_checkpoints.json';
const checkpointIndex = z.object({ checkpoints: z.array(z.object({ name: z.string().min(1) })) });

/** The directory names the index lists; null when the trainer wrote none. One that is unreadable fails the step, naming it. */
async function syncedIndex(svc: Services, key: string): Promise<Set<string> | null> {
  if (!(await svc.blobs.head(key))) return null;
  let parsed: z.infer<typeof checkpointIndex>;
  try {
    parsed = checkpointIndex.parse(JSON.parse(await svc.blobs.getText(key)));
  } catch (err) {
    throw new Error(`the trainer's ${CHECKPOINT_INDEX} is not a checkpoint index: ${(err as Error).message}`);
  }
  return new Set(parsed.checkpoints.map((c) => c.name));
}

function checkpointRecord(
  job: Pick<TrainingJob, 'id' | 'root_model'>,
  meta: TrainerCheckpoint,
  blobPrefix: string,
  at: { is_final: boolean; created_at: string },
): Checkpoint {
  return {
    id: typeof meta.id === 'string' && meta.id ? meta.id : newUuid(),
    job_id: job.id,
    root_model: job.root_model,
    blob_prefix: blobPrefix,
    step: finiteOr(meta.step, 0),
    epoch: finiteOr(meta.epoch, 0),
    metrics: numericMetrics(meta.metrics),
    is_best: false,
    is_final: at.is_final,
    created_at: at.created_at,
  };
}

const finiteOr = (v: unknown, fallback: number): number =>
  typeof v === 'number' && Number.isFinite(v)
    ? v
    : typeof v === 'string' && v.trim() && Number.isFinite(Number(v))
      ? Number(v)
      : fallback;

/** A checkpoint's metrics as the API gives them (name → number): the trainer's other entries (per-entity tables, counts) stay in its files. */
function numericMetrics(m: unknown): Record<string, number> | null {
  if (!m || typeof m !== 'object' || Array.isArray(m)) return null;
  const out = Object.fromEntries(
    Object.entries(m).filter((e): e is [string, number] => typeof e[1] === 'number' && Number.isFinite(e[1])),
  );
  return Object.keys(out).length ? out : null;
}

/** metrics.json is the trainer's metrics; an older layout wrapped them as `{metrics: {...}}`. */
function unwrapMetrics(parsed: unknown): Record<string, unknown> | null {
  if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) return null;
  const inner = (parsed as { metrics?: unknown }).metrics;
  return (inner && typeof inner === 'object' && !Array.isArray(inner) ? inner : parsed) as Record<string, unknown>;
}

/** One of the model's JSON files; null when the model has none. One that is there but not JSON fails the step, naming it. */
async function readModelJson(svc: Services, key: string): Promise<unknown> {
  if (!(await svc.blobs.head(key))) return null;
  const text = await svc.blobs.getText(key);
  try {
    return JSON.parse(text) as unknown;
  } catch (err) {
    throw new Error(`the model's ${key.slice(key.lastIndexOf('/') + 1)} is not JSON: ${(err as Error).message}`);
  }
}

/**
 * What the job is billed by when the platform reports it (SageMaker's TrainingTimeInSeconds), not the
 * record's wall time: the `running` report may come late or never.
 */
const computeSeconds = (seconds: unknown): { compute_seconds?: number } =>
  typeof seconds === 'number' && seconds >= 0 ? { compute_seconds: seconds } : {};

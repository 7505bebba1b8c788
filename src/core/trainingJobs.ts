import { emitTrainingMinutes } from './billing/trainingMinutes';
import { admitCompute, billTrainingJob } from './billing/compute';
import { releaseComputeSlot } from './computeSlots';
import { byCreation, checkpointItem, jobItem, jobsIndex } from './recordKeys';
import { ITEM_EXISTS, WriteConflict } from './ports';
import { defaultLearningRate, type BaseModel } from './catalog';
import { findModel } from './modelRegistry';
import type { Services } from './context';
import type { CalibratedThresholds } from './extraction/thresholds';
import { DECODER_TASK_TYPES, ENCODER_TASK_TYPES, type TaskType } from './datasets/rows';
import { getVersion, latestReadyVersion } from './datasets/service';
import {
  ConflictError,
  NotFoundError,
  ValidationError,
  changedOrGoneAsUndefined,
  notFoundAsUndefined,
  type FieldError,
} from './errors';
import { isUuid, newUuid } from './ids';
import { deleteCheckpointRecords, jobPrefix, type CheckpointRef } from './training/artifacts';
import { impossibleLabels } from './training/promptBudget';

export type JobStatus = 'requested' | 'running' | 'complete' | 'failed' | 'stopped';
export const TERMINAL: JobStatus[] = ['complete', 'failed', 'stopped'];

/** docs/reference/decisions.md#job-states: which status may follow which. */
const TRANSITIONS: Record<JobStatus, JobStatus[]> = {
  requested: ['running', 'stopped', 'failed'],
  running: ['complete', 'failed', 'stopped'],
  complete: [],
  failed: [],
  stopped: [],
};

export interface RlConfig {
  beta?: number;
  num_generations?: number;
  reward?: 'exact_match' | 'contains';
  max_completion_length?: number;
}

export interface TrainingJob {
  id: string;
  model_name: string;
  base_model: string;
  /** The catalog model at the root of the chain (itself, or the base of the checkpoint continued from). */
  root_model: string;
  model_type: BaseModel['type'];
  datasets: { name: string; version: number }[];
  task_types: string[];
  training_type: 'lora' | 'full';
  training_algorithm: 'sft' | 'dpo' | 'grpo';
  rl_config: RlConfig | null;
  nr_epochs: number;
  /**
   * True when the request named no `nr_epochs` and the encoder trainer sizes the epochs from the
   * dataset (a floor of optimizer steps); `nr_epochs` then holds the catalog default until the
   * trainer reports the epochs it plans.
   */
  epochs_from_data?: boolean;
  learning_rate: number;
  /** The multiplier of the catalog default learning rate that chose `learning_rate` (OpenAI's `learning_rate_multiplier`), when one did. */
  learning_rate_multiplier?: number;
  /** The trainer's seed (42 when the request named none). */
  seed?: number;
  /** OpenAI fine-tuning's `suffix` (its `ft:` model name), on jobs created through /v1/fine_tuning/jobs: null when none was given. */
  suffix?: string | null;
  status: JobStatus;
  progress: { epoch: number; step: number; total_steps: number } | null;
  metrics: { f1: number; precision: number; recall: number } | null;
  /** Why a finished job's model may not be what it looks like (e.g. no better than its base model). */
  warnings?: string[];
  error: string | null;
  /** The checkpoint holding the finished model (a valid `base_model` to continue from). */
  final_checkpoint_id?: string | null;
  /** Present while the job has an active inference deployment (deployments.ts). */
  deployment?: JobDeployment | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  /** Where it runs (a SageMaker instance type, or `local`): what a minute of it costs (billing/prices.ts). Internal. */
  instance_type?: string;
  /** Seconds trained as the platform counts them (SageMaker's TrainingTimeInSeconds), when it reports them. Internal. */
  compute_seconds?: number;
  /** Tokens trained on (rows × epochs run), when the trainer counts them (SFT, DPO): OpenAI's `trained_tokens`. */
  trained_tokens?: number;
  /** The rows the trainer validates on (its `validation` channel), when given; else it holds out part of `datasets`. */
  validation_datasets?: { name: string; version: number }[];
}

/** A job's `metrics` (docs/reference/decisions.md#training-jobs: `{f1, precision, recall}`, numbers) from a trainer's or evaluator's metrics; null when incomplete. */
export function headlineMetrics(m: unknown): TrainingJob['metrics'] {
  const r = (m ?? {}) as Record<string, unknown>;
  const { f1, precision, recall } = r;
  return typeof f1 === 'number' && typeof precision === 'number' && typeof recall === 'number'
    ? { f1, precision, recall }
    : null;
}

/**
 * Warnings for a finished job. An encoder's held-out F1 (`headline`, the serving engine's when it
 * could score the model) no better than the base model's on the same rows (`baseline_f1`, which the
 * trainer measures before training); otherwise the trainer's own (a DPO margin that never grew, a
 * GRPO reward that never varied). A job that learned nothing must not look like a good model.
 */
export function learningWarnings(trainerMetrics: unknown, headline: TrainingJob['metrics']): string[] {
  const r = (trainerMetrics ?? {}) as Record<string, unknown>;
  const strings = (v: unknown) => (Array.isArray(v) ? v.filter((w): w is string => typeof w === 'string') : []);
  // what the trainer could not do with the data as given (e.g. a one-label classification head it left out)
  const data = strings(r.data_warnings);
  const baseline = r.baseline_f1;
  if (typeof baseline !== 'number') return [...data, ...strings(r.warnings)];
  if (!headline || r.evaluated_on === 'train') return data;
  if (headline.f1 > baseline) return data;
  return [
    ...data,
    `validation F1 ${headline.f1.toFixed(4)} does not beat the base model's ${baseline.toFixed(4)} on the same held-out rows: ` +
      'the fine-tuned model is no better than the model it started from (more rows or epochs, a higher learning rate, or fewer labels may help)',
  ];
}

export interface CreateJobInput {
  model_name: string;
  base_model: string;
  datasets: { name: string; version?: number | undefined }[];
  training_type?: 'lora' | 'full' | undefined;
  training_algorithm?: 'sft' | 'dpo' | 'grpo' | undefined;
  rl_config?: RlConfig | undefined;
  nr_epochs?: number | undefined;
  learning_rate?: number | undefined;
  /** Scales the catalog default learning rate (ignored when `learning_rate` is given). */
  learning_rate_multiplier?: number | undefined;
  seed?: number | undefined;
  suffix?: string | null | undefined;
  /** Pinned dataset versions the trainer validates on instead of holding out part of `datasets` (OpenAI's `validation_file`). */
  validation_datasets?: { name: string; version: number }[] | undefined;
}

/** A job's inference deployment (deployments.ts): which weights the job id serves. */
export interface JobDeployment {
  status: 'active';
  /** The pinned checkpoint (the job's final model unless another one was named). */
  checkpoint_id: string | null;
  /** Blob prefix of the weights served (`manifest.json`, `onnx/`, `adapter.gguf`, …). */
  blob_prefix: string;
  deployed_at: string;
  /** Opted in with `thresholds: "calibrated"`: per-type thresholds for requests that send none (extraction/thresholds.ts). */
  thresholds?: CalibratedThresholds;
}

/** The RL keys each algorithm needs (docs/reference/decisions.md#rl-config: its shape is ours). */
const RL_REQUIRED: Record<'dpo' | 'grpo', (keyof RlConfig)[]> = { dpo: ['beta'], grpo: ['num_generations', 'reward'] };
const TASKS_FOR_ALGORITHM: Record<'sft' | 'dpo' | 'grpo', TaskType[]> = {
  sft: [...ENCODER_TASK_TYPES, 'sft'],
  dpo: ['dpo'],
  grpo: ['grpo'],
};

async function resolveBaseModel(svc: Services, teamId: string, baseModel: string): Promise<{ root: BaseModel }> {
  const catalog = await findModel(svc, baseModel, teamId);
  if (catalog) return { root: catalog };
  if (isUuid(baseModel)) {
    const ckpt = await svc.records.get<CheckpointRef>(
      checkpointItem(teamId, baseModel).pk,
      checkpointItem(teamId, baseModel).sk,
    );
    const root = ckpt ? await findModel(svc, ckpt.root_model, teamId) : undefined;
    if (root) return { root };
    throw ValidationError.field(
      ['body', 'base_model'],
      `'${baseModel}' is not a checkpoint of any of your training jobs`,
      'unknown_checkpoint',
    );
  }
  throw ValidationError.field(
    ['body', 'base_model'],
    `'${baseModel}' is neither a base model id (GET /base-models: the catalog and imported models) nor a checkpoint UUID`,
    'unknown_model',
  );
}

export async function createTrainingJob(svc: Services, teamId: string, input: CreateJobInput): Promise<TrainingJob> {
  const { root } = await resolveBaseModel(svc, teamId, input.base_model);
  const problems: FieldError[] = [];
  const trainingType = input.training_type ?? 'lora';
  const algorithm = input.training_algorithm ?? 'sft';
  if (!root.supports_training)
    problems.push({ loc: ['body', 'base_model'], msg: `${root.id} does not support training`, type: 'value_error' });
  if (!root.training_types.includes(trainingType)) {
    problems.push({
      loc: ['body', 'training_type'],
      msg: `${root.type} models train with ${root.training_types.join(' or ')} only`,
      type: 'value_error',
    });
  }
  if (!root.training_algorithms.includes(algorithm)) {
    problems.push({
      loc: ['body', 'training_algorithm'],
      msg: `${root.id} supports ${root.training_algorithms.join(', ')}`,
      type: 'value_error',
    });
  }
  if (algorithm === 'dpo' || algorithm === 'grpo') {
    if (!input.rl_config)
      problems.push({
        loc: ['body', 'rl_config'],
        msg: `required when training_algorithm is ${algorithm}`,
        type: 'missing',
      });
    else {
      for (const key of RL_REQUIRED[algorithm]) {
        if (input.rl_config[key] === undefined)
          problems.push({ loc: ['body', 'rl_config', key], msg: `required for ${algorithm}`, type: 'missing' });
      }
    }
  } else if (input.rl_config) {
    problems.push({
      loc: ['body', 'rl_config'],
      msg: 'only used with training_algorithm dpo or grpo',
      type: 'extra_forbidden',
    });
  }
  if (problems.length) throw new ValidationError(problems);

  const datasets: { name: string; version: number }[] = [];
  const tasks = new Set<string>();
  const tooLong: FieldError[] = [];
  let trainingRows = 0;
  for (const [i, ref] of input.datasets.entries()) {
    const version =
      ref.version !== undefined
        ? await getVersion(svc, teamId, ref.name, ref.version)
        : await latestReadyVersion(svc, teamId, ref.name);
    if (!version) {
      await getVersion(svc, teamId, ref.name); // 404 when the dataset does not exist at all
      throw new ConflictError(
        `Dataset '${ref.name}' (datasets[${i}]) has no ready version yet; wait for processing to finish`,
      );
    }
    if (version.status !== 'ready') {
      throw new ConflictError(
        `Dataset '${ref.name}' version ${version.version} (datasets[${i}]) is ${version.status}, not ready`,
      );
    }
    const fits = version.task_types.filter(
      (t) => TASKS_FOR_ALGORITHM[algorithm].includes(t as TaskType) && fitsModel(root, t as TaskType),
    );
    if (fits.length === 0) {
      throw ValidationError.field(
        ['body', 'datasets', i, 'name'],
        `dataset '${ref.name}' has columns for ${version.task_types.join(', ') || 'nothing'}, which fit no head of ${root.id} with ${algorithm}`,
        'incompatible_dataset',
      );
    }
    for (const t of fits) tasks.add(t);
    datasets.push({ name: ref.name, version: version.version });
    trainingRows += version.row_count ?? 0;
    // a label that can never fit the encoder's positions would fail the job mid-training (training/promptBudget.ts)
    if (root.type === 'encoder') tooLong.push(...impossibleLabels(root.id, ref.name, version, ['body', 'datasets', i]));
  }
  if (tooLong.length) throw new ValidationError(tooLong.slice(0, 20));

  // compute is money: out of credit (402), past the daily cap or at the plan's running cap (429) → nothing is written
  const id = newUuid();
  await admitCompute(svc, teamId, 'training', id);
  const job: TrainingJob = {
    id,
    model_name: input.model_name,
    base_model: input.base_model,
    root_model: root.id,
    model_type: root.type,
    datasets,
    task_types: [...tasks].sort(),
    training_type: trainingType,
    training_algorithm: algorithm,
    rl_config: input.rl_config ?? null,
    nr_epochs: input.nr_epochs ?? root.default_hyperparameters.nr_epochs,
    ...(input.nr_epochs === undefined && root.type === 'encoder' ? { epochs_from_data: true } : {}),
    learning_rate:
      input.learning_rate ??
      defaultLearningRate(root, trainingType, trainingRows) * (input.learning_rate_multiplier ?? 1),
    ...(input.learning_rate === undefined && input.learning_rate_multiplier !== undefined
      ? { learning_rate_multiplier: input.learning_rate_multiplier }
      : {}),
    ...(input.seed !== undefined ? { seed: input.seed } : {}),
    ...(input.suffix !== undefined ? { suffix: input.suffix } : {}),
    ...(input.validation_datasets?.length ? { validation_datasets: input.validation_datasets } : {}),
    status: 'requested',
    progress: null,
    metrics: null,
    warnings: [],
    error: null,
    created_at: svc.now().toISOString(),
    started_at: null,
    finished_at: null,
  };
  try {
    await svc.records.put(
      { ...jobItem(teamId, job.id), gsi1pk: jobsIndex(teamId), gsi1sk: byCreation(job.created_at, job.id) },
      job,
      { ifAbsent: true },
    );
  } catch (err) {
    await releaseComputeSlot(svc, teamId, 'training', job.id);
    throw err;
  }
  try {
    await svc.training?.submit(teamId, job.id);
  } catch (err) {
    // nothing will ever run it (e.g. Step Functions refused the execution): the record says so
    // instead of staying `requested`, and the caller gets the error
    const reason = `the training workflow could not be started: ${(err as Error).message}`.slice(0, 4000);
    await transitionJob(svc, teamId, job.id, 'failed', { error: reason }).catch(changedOrGoneAsUndefined);
    throw err;
  }
  return job;
}

const fitsModel = (model: BaseModel, task: TaskType) =>
  model.type === 'encoder' ? ENCODER_TASK_TYPES.includes(task) : DECODER_TASK_TYPES.includes(task);

/** The OpenAI id of a job: the native id behind `ftjob-`, so one record serves both APIs. */
export const ftJobId = (job: Pick<TrainingJob, 'id'>) => `ftjob-${job.id}`;

/**
 * OpenAI's fine-tuned model name, `ft:<base>:<team id>:<suffix>:<ftjob id>`: the team id, never its
 * free-text name (which may hold ':'); a native job's suffix is its model_name.
 */
export const fineTunedModelName = (job: TrainingJob, teamId: string) =>
  `ft:${job.root_model}:${teamId}:${(job.suffix !== undefined ? job.suffix : job.model_name) ?? ''}:${ftJobId(job)}`;

/**
 * The team's fine-tuned decoders that answer by their `ft:` name now: complete decoder jobs with an
 * active deployment (what `resolveServingTarget` serves), newest first.
 */
export async function servedFineTunedModels(
  svc: Services,
  teamId: string,
): Promise<{ name: string; job: TrainingJob }[]> {
  return (await listTrainingJobs(svc, teamId, { status: 'complete' }))
    .filter(answersByFtName)
    .map((job) => ({ name: fineTunedModelName(job, teamId), job }));
}

/** One of those by its `ft:` name (one record read), or undefined. */
export async function servedFineTunedModel(
  svc: Services,
  teamId: string,
  name: string,
): Promise<{ name: string; job: TrainingJob } | undefined> {
  const id = jobIdOfFineTunedModel(name);
  const job = id ? await getTrainingJob(svc, teamId, id).catch(notFoundAsUndefined) : undefined;
  return job && answersByFtName(job) && fineTunedModelName(job, teamId) === name ? { name, job } : undefined;
}

const answersByFtName = (job: TrainingJob) =>
  job.status === 'complete' && job.model_type === 'decoder' && Boolean(job.deployment);

/** The native job id behind an `ftjob-…` id; undefined for anything else. */
export function jobIdOfFtJobId(id: string): string | undefined {
  const uuid = id.startsWith('ftjob-') ? id.slice('ftjob-'.length) : '';
  return isUuid(uuid) ? uuid : undefined;
}

/** The job id an `ft:` model name ends with; undefined for any other string (its other parts are checked against the job). */
export function jobIdOfFineTunedModel(model: string): string | undefined {
  return model.startsWith('ft:') ? jobIdOfFtJobId(model.slice(model.lastIndexOf(':') + 1)) : undefined;
}

export async function getTrainingJob(svc: Services, teamId: string, id: string): Promise<TrainingJob> {
  const job = isUuid(id)
    ? await svc.records.get<TrainingJob>(jobItem(teamId, id).pk, jobItem(teamId, id).sk)
    : undefined;
  if (!job) throw new NotFoundError(`Training job '${id}' not found`);
  return job;
}

export async function listTrainingJobs(
  svc: Services,
  teamId: string,
  filter: { status?: JobStatus | undefined } = {},
): Promise<TrainingJob[]> {
  const jobs = await svc.records.queryAll<TrainingJob>(jobsIndex(teamId), { index: 'gsi1', newestFirst: true });
  return filter.status ? jobs.filter((j) => j.status === filter.status) : jobs;
}

/**
 * Records a running job's progress (and its last loss, when the trainer reported one). Never
 * creates a record: a job deleted meanwhile stays deleted (WriteConflict).
 */
export async function recordJobProgress(
  svc: Services,
  teamId: string,
  jobId: string,
  progress: NonNullable<TrainingJob['progress']>,
  lastLoss?: number,
): Promise<void> {
  await svc.records.update(jobItem(teamId, jobId).pk, jobItem(teamId, jobId).sk, {
    set: { progress, ...(lastLoss !== undefined ? { last_loss: lastLoss } : {}) },
    condition: ITEM_EXISTS,
  });
}

/** The epochs the trainer planned for a job that left them to it (sized from the dataset: `epochs_from_data`). */
export async function recordJobEpochs(svc: Services, teamId: string, jobId: string, epochs: number): Promise<void> {
  await svc.records.update(jobItem(teamId, jobId).pk, jobItem(teamId, jobId).sk, {
    set: { nr_epochs: epochs },
    condition: ITEM_EXISTS,
  });
}

/**
 * Moves a job along its state machine with a conditional write, so two writers (a stop request and
 * the runner) can never both win: the loser gets a 409 naming the state it lost to.
 */
export async function transitionJob(
  svc: Services,
  teamId: string,
  id: string,
  to: JobStatus,
  extra: Partial<TrainingJob> = {},
): Promise<TrainingJob> {
  const job = await getTrainingJob(svc, teamId, id);
  if (!TRANSITIONS[job.status].includes(to)) {
    throw new ConflictError(`Training job '${id}' is ${job.status}; it cannot become ${to}`);
  }
  const now = svc.now().toISOString();
  const times: Partial<TrainingJob> =
    to === 'running' ? { started_at: now } : TERMINAL.includes(to) ? { finished_at: now } : {};
  try {
    const after = await svc.records.update<TrainingJob>(jobItem(teamId, id).pk, jobItem(teamId, id).sk, {
      set: { ...extra, ...times, status: to },
      condition: [{ attr: 'status', equals: job.status }],
    });
    if (TERMINAL.includes(to)) {
      // only the write that ended the job gets here (conditional on the status it read): billed once
      await billTrainingJob(svc, teamId, after);
      emitTrainingMinutes(svc, after);
      await releaseComputeSlot(svc, teamId, 'training', id);
    }
    return after;
  } catch (err) {
    if (err instanceof WriteConflict) {
      const current = await getTrainingJob(svc, teamId, id);
      throw new ConflictError(`Training job '${id}' changed to ${current.status} meanwhile; it cannot become ${to}`);
    }
    throw err;
  }
}

/**
 * The seconds a job trained before its process died with the service (local restart): from
 * `started_at` to its last log line (the runner writes its log each second while the trainer
 * prints), not to the restart, which may be hours later. 0 when it never logged.
 */
export async function secondsToLastLog(
  svc: Services,
  teamId: string,
  job: Pick<TrainingJob, 'id' | 'started_at'>,
): Promise<number> {
  if (!job.started_at) return 0;
  const last = (await svc.blobs.list(`${jobPrefix(teamId, job.id)}logs/`)).sort().at(-1);
  if (!last) return 0;
  const lines = (await svc.blobs.getText(last)).split('\n').filter(Boolean);
  const ts = lines.length ? (JSON.parse(lines[lines.length - 1]!) as { ts?: unknown }).ts : undefined;
  const seconds = typeof ts === 'string' ? (Date.parse(ts) - Date.parse(job.started_at)) / 1000 : NaN;
  return Number.isFinite(seconds) ? Math.max(0, seconds) : 0;
}

/** The record says `stopped` at once; a running trainer then saves a checkpoint and exits. */
export async function stopTrainingJob(svc: Services, teamId: string, id: string): Promise<TrainingJob> {
  const job = await transitionJob(svc, teamId, id, 'stopped');
  await svc.training?.stop(teamId, id);
  return job;
}

/** A running job must be stopped first, so no compute is left working for a deleted record. */
export async function deleteTrainingJob(svc: Services, teamId: string, id: string): Promise<void> {
  const job = await getTrainingJob(svc, teamId, id);
  if (job.status === 'running' || job.status === 'requested') {
    throw new ConflictError(`Training job '${id}' is ${job.status}; stop it before deleting it`);
  }
  if (job.deployment)
    throw new ConflictError(
      `Training job '${id}' has an active inference deployment; undeploy it (DELETE /core/training-jobs/${id}/deploy) before deleting it`,
    );
  await svc.blobs.deletePrefix(`jobs/${teamId}/${id}/`);
  await deleteCheckpointRecords(svc, teamId, id);
  await svc.records.delete(jobItem(teamId, id).pk, jobItem(teamId, id).sk, [{ attr: 'status', equals: job.status }]);
}

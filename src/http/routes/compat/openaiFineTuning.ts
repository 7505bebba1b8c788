/**
 * OpenAI's Fine-tuning API (`/v1/fine_tuning/jobs`) over Sift's training jobs: `ftjob-<job uuid>`
 * is the native job (GET /core/training-jobs/<uuid>), so one record serves both APIs. Decoder jobs
 * only: an encoder job is no chat model.
 */
import { z } from 'zod';
import type { Services } from '../../../core/context';
import { BadRequestError, NotFoundError, notFoundAsUndefined } from '../../../core/errors';
import { findModel } from '../../../core/modelRegistry';
import { listCheckpoints, readLogs } from '../../../core/training/artifacts';
import { DEFAULT_TRAINER_SEED } from '../../../core/training/hyperparameters';
import {
  createTrainingJob,
  fineTunedModelName,
  ftJobId,
  getTrainingJob,
  jobIdOfFtJobId,
  listTrainingJobs,
  stopTrainingJob,
  type CreateJobInput,
  type JobStatus,
  type TrainingJob,
} from '../../../core/trainingJobs';
import { json, route } from '../../types';
import { resourceName } from '../../validation';
import { fileVersion, unixSeconds } from './openaiFiles';
import { cursorPage, CursorQuery } from './openaiPages';

/** TRL's DPO default, what `beta: "auto"` means. */
export const DEFAULT_DPO_BETA = 0.1;
/** Log lines read for one events page (newest first needs the whole log). */
const MAX_EVENT_LINES = 100_000;

const STATUS: Record<JobStatus, 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled'> = {
  requested: 'queued',
  running: 'running',
  complete: 'succeeded',
  failed: 'failed',
  stopped: 'cancelled',
};

const auto = <T extends z.ZodType>(schema: T) => z.union([z.literal('auto'), schema]);
const Supervised = z.strictObject({
  n_epochs: auto(z.number().int().min(1).max(100)).optional(),
  learning_rate_multiplier: auto(z.number().gt(0).max(10)).optional(),
  batch_size: auto(z.number().int().min(1).max(256)).optional(),
});
const Dpo = Supervised.extend({ beta: auto(z.number().gt(0).max(10)).optional() });

const CreateBody = z.strictObject({
  model: z.string().min(1).max(200),
  training_file: z.string().min(1).max(200),
  validation_file: z.string().nullable().optional(),
  suffix: resourceName.max(64).nullable().optional(),
  seed: z.number().int().min(0).max(2_147_483_647).nullable().optional(),
  hyperparameters: Supervised.optional(),
  method: z
    .strictObject({
      type: z.enum(['supervised', 'dpo', 'reinforcement']),
      supervised: z.strictObject({ hyperparameters: Supervised.optional() }).optional(),
      dpo: z.strictObject({ hyperparameters: Dpo.optional() }).optional(),
      reinforcement: z.unknown().optional(),
    })
    .optional(),
  integrations: z.array(z.unknown()).nullable().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
});
type Hyper = z.infer<typeof Dpo>;

const FineTuningJob = z.object({
  id: z.string(),
  object: z.literal('fine_tuning.job'),
  created_at: z.number(),
  finished_at: z.number().nullable(),
  model: z.string(),
  fine_tuned_model: z.string().nullable(),
  organization_id: z.string(),
  status: z.enum(['validating_files', 'queued', 'running', 'succeeded', 'failed', 'cancelled']),
  training_file: z.string(),
  validation_file: z.string().nullable(),
  result_files: z.array(z.string()),
  hyperparameters: z.record(z.string(), z.union([z.number(), z.string()])),
  method: z.record(z.string(), z.unknown()),
  seed: z.number(),
  trained_tokens: z.number().nullable(),
  error: z.object({ code: z.string(), message: z.string(), param: z.string().nullable() }).nullable(),
  estimated_finish: z.number().nullable(),
  integrations: z.array(z.unknown()),
  metadata: z.record(z.string(), z.string()).nullable(),
  user_provided_suffix: z.string().nullable(),
});

function jobObject(job: TrainingJob, teamId: string): z.infer<typeof FineTuningJob> {
  const hyperparameters = {
    n_epochs: job.nr_epochs,
    // a native job chose its rate itself, not as a multiple of the default
    learning_rate_multiplier: job.learning_rate_multiplier ?? 'auto',
    batch_size: 'auto',
    ...(job.training_algorithm === 'dpo' ? { beta: job.rl_config?.beta ?? DEFAULT_DPO_BETA } : {}),
  };
  const type = job.training_algorithm === 'dpo' ? 'dpo' : 'supervised';
  return {
    id: ftJobId(job),
    object: 'fine_tuning.job',
    created_at: unixSeconds(job.created_at),
    finished_at: job.finished_at ? unixSeconds(job.finished_at) : null,
    model: job.base_model,
    fine_tuned_model: job.status === 'complete' ? fineTunedModelName(job, teamId) : null,
    organization_id: teamId,
    status: STATUS[job.status],
    training_file: job.datasets[0]?.name ?? '',
    validation_file: job.validation_datasets?.[0]?.name ?? null,
    result_files: [],
    hyperparameters,
    method: { type, [type]: { hyperparameters } },
    seed: job.seed ?? DEFAULT_TRAINER_SEED,
    trained_tokens: job.trained_tokens ?? null,
    error: job.status === 'failed' ? { code: 'training_failed', message: job.error ?? 'failed', param: null } : null,
    estimated_finish: null,
    integrations: [],
    metadata: null,
    user_provided_suffix: job.suffix ?? null,
  };
}

/** The decoder job behind an `ftjob-…` id; OpenAI's 404 otherwise. */
async function ftJob(svc: Services, teamId: string, id: string): Promise<TrainingJob> {
  const uuid = jobIdOfFtJobId(id);
  const job = uuid ? await getTrainingJob(svc, teamId, uuid).catch(notFoundAsUndefined) : undefined;
  if (job?.model_type !== 'decoder')
    throw new NotFoundError(`No such fine-tuning job: ${id}`, { param: 'fine_tuning_job_id', code: 'not_found' });
  return job;
}

const unsupported = (param: string, message: string) =>
  new BadRequestError(message, { param, code: 'unsupported_value' });

/** The OpenAI request as a native job request; everything Sift cannot honour is refused, naming the OpenAI field. */
async function nativeRequest(svc: Services, teamId: string, body: z.infer<typeof CreateBody>): Promise<CreateJobInput> {
  const type = body.method?.type ?? 'supervised';
  if (type === 'reinforcement')
    throw unsupported('method.type', 'reinforcement fine-tuning is not served; use supervised or dpo');
  if (body.integrations?.length) throw unsupported('integrations', 'integrations are not supported');
  if (body.metadata && Object.keys(body.metadata).length)
    throw unsupported('metadata', 'metadata is not supported yet');
  if (body.hyperparameters && body.method && type !== 'supervised')
    throw unsupported(
      'hyperparameters',
      `the top-level hyperparameters apply to supervised jobs only; use method.${type}.hyperparameters`,
    );
  const hp: Hyper =
    (type === 'dpo' ? body.method?.dpo?.hyperparameters : body.method?.supervised?.hyperparameters) ??
    body.hyperparameters ??
    {};
  const hpParam = body.method ? `method.${type}.hyperparameters` : 'hyperparameters';
  if (typeof hp.batch_size === 'number')
    throw unsupported(`${hpParam}.batch_size`, 'batch_size must be "auto": the trainer sizes its batches itself');

  const model = await findModel(svc, body.model, teamId);
  if (model?.type !== 'decoder' || !model.supports_training)
    throw new BadRequestError(
      `Model '${body.model}' cannot be fine-tuned here: use a decoder of GET /v1/models that supports training`,
      { param: 'model', code: 'model_not_available' },
    );
  const algorithm = type === 'dpo' ? 'dpo' : 'sft';
  if (!model.training_algorithms.includes(algorithm))
    throw unsupported('method.type', `${model.id} trains with ${model.training_algorithms.join(', ')} only`);

  /** A processed file of the rows this job's method trains on, or a 400/404 naming `param`. */
  const usableFile = async (id: string, param: 'training_file' | 'validation_file') => {
    const file = await fileVersion(svc, teamId, id, param);
    if (file.status !== 'ready') {
      const why =
        file.status === 'failed' ? 'failed validation (GET /v1/files/{id}: status_details)' : 'still being processed';
      throw new BadRequestError(`File ${file.name} ${why}`, { param, code: 'invalid_file_status' });
    }
    if (!file.task_types.includes(algorithm))
      throw new BadRequestError(
        `File ${file.name} holds ${file.task_types.join(', ') || 'no'} rows, not the ${type === 'dpo' ? 'preference' : 'chat'} rows a ${type} job needs`,
        { param, code: `invalid_${param}` },
      );
    return file;
  };
  const file = await usableFile(body.training_file, 'training_file');
  // the trainer validates on these rows instead of holding out 10% of the training file
  const validation = body.validation_file ? await usableFile(body.validation_file, 'validation_file') : undefined;
  return {
    model_name: body.suffix ?? 'fine-tune',
    base_model: model.id,
    datasets: [{ name: file.name, version: file.version }],
    ...(validation ? { validation_datasets: [{ name: validation.name, version: validation.version }] } : {}),
    training_algorithm: algorithm,
    ...(algorithm === 'dpo'
      ? { rl_config: { beta: hp.beta === undefined || hp.beta === 'auto' ? DEFAULT_DPO_BETA : hp.beta } }
      : {}),
    ...(typeof hp.n_epochs === 'number' ? { nr_epochs: hp.n_epochs } : {}),
    ...(typeof hp.learning_rate_multiplier === 'number'
      ? { learning_rate_multiplier: hp.learning_rate_multiplier }
      : {}),
    ...(typeof body.seed === 'number' ? { seed: body.seed } : {}),
    suffix: body.suffix ?? null,
  };
}

export const openAiFineTuningRoutes = [
  route({
    method: 'POST',
    path: '/v1/fine_tuning/jobs',
    tag: 'openai-fine-tuning',
    summary: 'Create a fine-tuning job (OpenAI Fine-tuning API); it is a native training job too',
    description:
      'model: a trainable decoder; training_file: a processed file of POST /v1/files; method supervised (chat rows) or dpo (preference rows); validation_file (optional, the same kind of rows): what the trainer validates on instead of holding out 10% of training_file. Shares the 20/min limit of POST /core/training-jobs.',
    body: CreateBody,
    responses: { 200: { description: 'The job, queued', schema: FineTuningJob } },
    handler: async ({ svc, principal, body }) => {
      const job = await createTrainingJob(svc, principal.team_id, await nativeRequest(svc, principal.team_id, body));
      return json(200, jobObject(job, principal.team_id));
    },
  }),
  route({
    method: 'GET',
    path: '/v1/fine_tuning/jobs',
    tag: 'openai-fine-tuning',
    summary: "List the team's decoder fine-tuning jobs, newest first",
    // no `metadata` filter: a job cannot be created with metadata here (refused 400), so it would match nothing
    query: CursorQuery,
    responses: {
      200: {
        description: 'A page of jobs',
        schema: z.object({ object: z.literal('list'), data: z.array(FineTuningJob), has_more: z.boolean() }),
      },
    },
    handler: async ({ svc, principal, query }) => {
      const jobs = (await listTrainingJobs(svc, principal.team_id))
        .filter((j) => j.model_type === 'decoder')
        .map((j) => jobObject(j, principal.team_id));
      return json(200, cursorPage(jobs, query));
    },
  }),
  route({
    method: 'GET',
    path: '/v1/fine_tuning/jobs/:job_id',
    tag: 'openai-fine-tuning',
    summary: 'Retrieve a fine-tuning job',
    params: z.object({ job_id: z.string() }),
    responses: { 200: { description: 'The job', schema: FineTuningJob }, 404: { description: 'No such job' } },
    handler: async ({ svc, principal, params }) =>
      json(200, jobObject(await ftJob(svc, principal.team_id, params.job_id), principal.team_id)),
  }),
  route({
    method: 'POST',
    path: '/v1/fine_tuning/jobs/:job_id/cancel',
    tag: 'openai-fine-tuning',
    summary: 'Cancel a queued or running job (the native stop)',
    params: z.object({ job_id: z.string() }),
    responses: {
      200: { description: 'The job, cancelled', schema: FineTuningJob },
      404: { description: 'No such job' },
      409: { description: 'The job has already ended' },
    },
    handler: async ({ svc, principal, params }) => {
      const job = await ftJob(svc, principal.team_id, params.job_id);
      return json(200, jobObject(await stopTrainingJob(svc, principal.team_id, job.id), principal.team_id));
    },
  }),
  route({
    method: 'GET',
    path: '/v1/fine_tuning/jobs/:job_id/events',
    tag: 'openai-fine-tuning',
    summary: "The job's log as OpenAI events, newest first",
    params: z.object({ job_id: z.string() }),
    query: CursorQuery,
    responses: {
      200: {
        description: 'A page of events',
        schema: z.object({
          object: z.literal('list'),
          data: z.array(
            z.object({
              id: z.string(),
              object: z.literal('fine_tuning.job.event'),
              created_at: z.number(),
              level: z.enum(['info', 'warn', 'error']),
              message: z.string(),
              type: z.literal('message'),
            }),
          ),
          has_more: z.boolean(),
        }),
      },
      404: { description: 'No such job' },
    },
    handler: async ({ svc, principal, params, query }) => {
      const job = await ftJob(svc, principal.team_id, params.job_id);
      const lines = await readLogs(svc, principal.team_id, job.id, 0, MAX_EVENT_LINES);
      const events = lines.reverse().map((l) => ({
        id: `ftevent-${l.offset}`,
        object: 'fine_tuning.job.event' as const,
        created_at: unixSeconds(l.ts),
        level: l.stream === 'stderr' ? ('warn' as const) : ('info' as const),
        message: l.line,
        type: 'message' as const,
      }));
      return json(200, cursorPage(events, query));
    },
  }),
  route({
    method: 'GET',
    path: '/v1/fine_tuning/jobs/:job_id/checkpoints',
    tag: 'openai-fine-tuning',
    summary: "The job's checkpoints, newest first",
    params: z.object({ job_id: z.string() }),
    query: CursorQuery,
    responses: {
      200: {
        description: 'A page of checkpoints',
        schema: z.object({
          object: z.literal('list'),
          data: z.array(
            z.object({
              id: z.string(),
              object: z.literal('fine_tuning.job.checkpoint'),
              created_at: z.number(),
              fine_tuned_model_checkpoint: z.string(),
              fine_tuning_job_id: z.string(),
              step_number: z.number(),
              metrics: z.record(z.string(), z.number()),
            }),
          ),
          has_more: z.boolean(),
        }),
      },
      404: { description: 'No such job' },
    },
    handler: async ({ svc, principal, params, query }) => {
      const job = await ftJob(svc, principal.team_id, params.job_id);
      const checkpoints = (await listCheckpoints(svc, principal.team_id, job.id))
        .sort((a, b) => b.step - a.step)
        .map((c) => ({
          id: `ftckpt-${c.id}`,
          object: 'fine_tuning.job.checkpoint' as const,
          created_at: unixSeconds(c.created_at),
          fine_tuned_model_checkpoint: `${fineTunedModelName(job, principal.team_id)}:ckpt-step-${c.step}`,
          fine_tuning_job_id: ftJobId(job),
          step_number: c.step,
          metrics: { ...(c.metrics ?? {}), step: c.step },
        }));
      return json(200, cursorPage(checkpoints, query));
    },
  }),
];

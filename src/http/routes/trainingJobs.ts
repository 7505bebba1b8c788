import { z } from 'zod';
import { ConflictError, notFoundAsUndefined } from '../../core/errors';
import { archiveKey, listCheckpoints, readLogs, type LogLine } from '../../core/training/artifacts';
import { deployTrainingJob, undeployTrainingJob } from '../../core/deployments';
import {
  TERMINAL,
  createTrainingJob,
  deleteTrainingJob,
  getTrainingJob,
  listTrainingJobs,
  stopTrainingJob,
  type TrainingJob,
} from '../../core/trainingJobs';
import type { Services } from '../../core/context';
import { json, route } from '../types';
import { queryInt, resourceName } from '../validation';
import type { CalibratedThresholds } from '../../core/extraction/thresholds';
import { Deleted, TrainingJobSchema, list, thresholdChoiceFields } from './schemas';
import { computeStartErrors } from './errorDocs';

const RlConfig = z.strictObject({
  beta: z.number().gt(0).max(10).optional(),
  num_generations: z.number().int().min(2).max(64).optional(),
  reward: z.enum(['exact_match', 'contains']).optional(),
  max_completion_length: z.number().int().min(1).max(4096).optional(),
});

/** The job as clients see it: the deployment's storage location and the billing inputs are internal. */
export function jobView(job: TrainingJob): Omit<
  TrainingJob,
  'deployment' | 'warnings' | 'instance_type' | 'compute_seconds' | 'trained_tokens' | 'validation_datasets'
> & { warnings: string[] } & {
  deployment: {
    status: 'active';
    checkpoint_id: string | null;
    deployed_at: string;
    thresholds: CalibratedThresholds | null;
  } | null;
} {
  // trained_tokens and the validation file are OpenAI's fields: GET /v1/fine_tuning/jobs/{id} shows them
  const {
    deployment,
    instance_type: _instance,
    compute_seconds: _seconds,
    trained_tokens: _tokens,
    validation_datasets: _validation,
    ...rest
  } = job;
  return {
    ...rest,
    warnings: job.warnings ?? [],
    deployment: deployment
      ? {
          status: deployment.status,
          checkpoint_id: deployment.checkpoint_id,
          deployed_at: deployment.deployed_at,
          thresholds: deployment.thresholds ?? null,
        }
      : null,
  };
}

export const trainingJobRoutes = [
  route({
    method: 'POST',
    path: '/core/training-jobs',
    tag: 'training-jobs',
    summary: 'Start a fine-tuning job',
    description:
      '`base_model` is a catalog id or a checkpoint UUID (continue training). `grpo` needs rl_config {num_generations, reward}; `dpo` needs rl_config {beta}. Decoders train with LoRA only.',
    body: z.strictObject({
      model_name: resourceName,
      base_model: z.string().min(1).max(200),
      datasets: z
        .array(z.strictObject({ name: resourceName, version: z.number().int().positive().optional() }))
        .min(1)
        .max(20),
      training_type: z.enum(['lora', 'full']).optional(),
      training_algorithm: z.enum(['sft', 'grpo', 'dpo']).optional(),
      rl_config: RlConfig.optional(),
      nr_epochs: z.number().int().min(1).max(100).optional(),
      learning_rate: z.number().gt(0).max(1).optional(),
      seed: z.number().int().min(0).max(2_147_483_647).optional(),
    }),
    responses: {
      201: { description: 'Created', schema: z.object({ id: z.string(), status: z.literal('requested') }) },
      ...computeStartErrors,
      404: { description: 'Dataset not found' },
      409: { description: 'Dataset not ready' },
    },
    handler: async ({ svc, principal, body }) => {
      const job = await createTrainingJob(svc, principal.team_id, body);
      return json(201, { id: job.id, status: job.status });
    },
  }),
  route({
    method: 'GET',
    path: '/core/training-jobs',
    tag: 'training-jobs',
    summary: 'List training jobs, newest first',
    query: z.strictObject({ status: z.enum(['requested', 'running', 'complete', 'failed', 'stopped']).optional() }),
    responses: { 200: { description: 'Jobs', schema: list(TrainingJobSchema) } },
    handler: async ({ svc, principal, query }) =>
      json(200, { data: (await listTrainingJobs(svc, principal.team_id, query)).map(jobView) }),
  }),
  route({
    method: 'GET',
    path: '/core/training-jobs/:id',
    tag: 'training-jobs',
    summary: 'Status, progress and metrics of a job',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Job', schema: TrainingJobSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) =>
      json(200, jobView(await getTrainingJob(svc, principal.team_id, params.id))),
  }),
  route({
    method: 'GET',
    path: '/core/training-jobs/:id/logs',
    tag: 'training-jobs',
    summary: 'Training logs: a JSON page, or a live SSE stream with `Accept: text/event-stream`',
    description:
      'JSON: `{lines:[{offset, ts, stream, line}], next_offset, status, complete}`; page with `offset`/`limit`. SSE: `event: log` per line, then `event: end` with the final status once the job has ended and every line was sent.',
    params: z.object({ id: z.string() }),
    query: z.strictObject({ offset: queryInt(0, 100_000_000, 0), limit: queryInt(1, 5000, 1000) }),
    responses: {
      200: {
        description: 'Log lines',
        schema: z.object({
          lines: z.array(
            z.object({
              offset: z.number(),
              ts: z.string(),
              stream: z.enum(['stdout', 'stderr', 'system']),
              line: z.string(),
            }),
          ),
          next_offset: z.number(),
          status: z.string(),
          complete: z.boolean(),
        }),
      },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params, query, req }) => {
      const job = await getTrainingJob(svc, principal.team_id, params.id);
      if ((req.headers.accept ?? '').includes('text/event-stream')) {
        return {
          status: 200,
          headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' },
          stream: tailLogs(svc, principal.team_id, job.id, query.offset, req.signal),
        };
      }
      const lines = await readLogs(svc, principal.team_id, job.id, query.offset, query.limit);
      const last = lines[lines.length - 1];
      const complete = TERMINAL.includes(job.status) && lines.length < query.limit;
      return json(200, { lines, next_offset: last ? last.offset + 1 : query.offset, status: job.status, complete });
    },
  }),
  route({
    method: 'GET',
    path: '/core/training-jobs/:id/checkpoints',
    tag: 'training-jobs',
    summary: 'Checkpoints saved by a job; each id is a valid base_model to continue training from',
    params: z.object({ id: z.string() }),
    responses: {
      200: {
        description: 'Checkpoints, oldest first',
        schema: z.object({
          checkpoints: z.array(
            z.object({
              id: z.string(),
              step: z.number(),
              epoch: z.number(),
              metrics: z.record(z.string(), z.number()).nullable(),
              is_best: z.boolean(),
              is_final: z.boolean(),
              created_at: z.string(),
            }),
          ),
        }),
      },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params }) => {
      const checkpoints = await listCheckpoints(svc, principal.team_id, params.id);
      return json(200, {
        checkpoints: checkpoints.map(({ id, step, epoch, metrics, is_best, is_final, created_at }) => ({
          id,
          step,
          epoch,
          metrics,
          is_best,
          is_final,
          created_at,
        })),
      });
    },
  }),
  route({
    method: 'GET',
    path: '/core/training-jobs/:id/download',
    tag: 'training-jobs',
    summary: 'The trained model as a .tar.gz (weights, ONNX export, tokenizer, config, metrics)',
    description:
      'Redirects (302) to a short-lived presigned URL; with `Accept: application/json` returns `{url, expires_in}` instead.',
    params: z.object({ id: z.string() }),
    responses: {
      302: { description: 'Redirect to the archive' },
      200: {
        description: 'With Accept: application/json',
        schema: z.object({ url: z.string(), expires_in: z.number(), size_bytes: z.number() }),
      },
      404: { description: 'Not found' },
      409: { description: 'Job not complete' },
    },
    handler: async ({ svc, principal, params, req }) => {
      const job = await getTrainingJob(svc, principal.team_id, params.id);
      const key = archiveKey(principal.team_id, job.id);
      const head = job.status === 'complete' ? await svc.blobs.head(key) : undefined;
      if (!head)
        throw new ConflictError(`Training job '${job.id}' is ${job.status}; its archive exists once it is complete`);
      const expiresIn = 900;
      const url = await svc.blobs.presignGet(key, expiresIn, `${job.model_name}.tar.gz`);
      if ((req.headers.accept ?? '').includes('application/json'))
        return json(200, { url, expires_in: expiresIn, size_bytes: head.size });
      return { status: 302, headers: { location: url } };
    },
  }),
  route({
    method: 'POST',
    path: '/core/training-jobs/:id/stop',
    tag: 'training-jobs',
    summary: 'Stop a requested or running job',
    params: z.object({ id: z.string() }),
    responses: {
      200: { description: 'Stopped', schema: TrainingJobSchema },
      404: { description: 'Not found' },
      409: { description: 'Already finished' },
    },
    handler: async ({ svc, principal, params }) =>
      json(200, jobView(await stopTrainingJob(svc, principal.team_id, params.id))),
  }),
  route({
    method: 'POST',
    path: '/core/training-jobs/:id/deploy',
    tag: 'training-jobs',
    summary: 'Give a job an active inference deployment: its id then works as a model id on every inference route',
    description:
      'Pins the final model, or the checkpoint named by `checkpoint_id` when it has servable weights. Deploying again with another checkpoint re-pins it; the same one (and thresholds) is a no-op. `thresholds: "calibrated"` gives requests that send no `threshold` the per-type best thresholds of an evaluation of the job.',
    params: z.object({ id: z.string() }),
    body: z.strictObject({ checkpoint_id: z.string().min(1).max(64).optional(), ...thresholdChoiceFields }).optional(),
    responses: {
      200: { description: 'Deployed', schema: TrainingJobSchema },
      404: { description: 'Not found' },
      409: { description: 'Not complete, or no servable weights' },
    },
    handler: async ({ svc, principal, params, body }) =>
      json(200, jobView(await deployTrainingJob(svc, principal.team_id, params.id, body ?? {}))),
  }),
  route({
    method: 'DELETE',
    path: '/core/training-jobs/:id/deploy',
    tag: 'training-jobs',
    summary: "End a job's inference deployment (its id then answers 409 on inference routes)",
    params: z.object({ id: z.string() }),
    responses: {
      200: { description: 'Undeployed', schema: TrainingJobSchema },
      404: { description: 'Not found' },
      409: { description: 'Not deployed, or a project still serves it' },
    },
    handler: async ({ svc, principal, params }) =>
      json(200, jobView(await undeployTrainingJob(svc, principal.team_id, params.id))),
  }),
  route({
    method: 'DELETE',
    path: '/core/training-jobs/:id',
    tag: 'training-jobs',
    summary: 'Delete a finished job record and its artifacts',
    params: z.object({ id: z.string() }),
    responses: {
      200: { description: 'Deleted', schema: Deleted },
      404: { description: 'Not found' },
      409: { description: 'Still active: stop it first' },
    },
    handler: async ({ svc, principal, params }) => {
      await deleteTrainingJob(svc, principal.team_id, params.id);
      return json(200, { id: params.id, deleted: true });
    },
  }),
];

/** Polls the log chunks and sends new lines until the job has ended and everything was sent. */
async function* tailLogs(
  svc: Services,
  teamId: string,
  jobId: string,
  from: number,
  signal?: AbortSignal,
): AsyncGenerator<string> {
  let offset = from;
  let lastBeat = Date.now();
  yield ': connected\n\n';
  while (!signal?.aborted) {
    const lines: LogLine[] = await readLogs(svc, teamId, jobId, offset, 1000);
    for (const line of lines) yield `event: log\nid: ${line.offset}\ndata: ${JSON.stringify(line)}\n\n`;
    if (lines.length) offset = (lines[lines.length - 1] as LogLine).offset + 1;
    if (lines.length === 0) {
      const job = await getTrainingJob(svc, teamId, jobId).catch(notFoundAsUndefined);
      if (!job || TERMINAL.includes(job.status)) {
        // One more read: the runner flushes its last lines just before the status flips.
        const tail = await readLogs(svc, teamId, jobId, offset, 1000);
        for (const line of tail) yield `event: log\nid: ${line.offset}\ndata: ${JSON.stringify(line)}\n\n`;
        yield `event: end\ndata: ${JSON.stringify({ status: job?.status ?? 'deleted', error: job?.error ?? null, metrics: job?.metrics ?? null })}\n\n`;
        return;
      }
      if (Date.now() - lastBeat > 15_000) {
        lastBeat = Date.now();
        yield ': ping\n\n';
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

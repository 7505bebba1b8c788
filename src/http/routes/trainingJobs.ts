import { z } from 'zod';
import { createTrainingJob, deleteTrainingJob, getTrainingJob, listTrainingJobs, stopTrainingJob } from '../../core/trainingJobs';
import { json, route } from '../types';
import { resourceName } from '../validation';
import { Deleted, TrainingJobSchema, list } from './schemas';

const RlConfig = z.strictObject({
  beta: z.number().gt(0).max(10).optional(),
  num_generations: z.number().int().min(2).max(64).optional(),
  reward: z.enum(['exact_match', 'contains']).optional(),
  max_completion_length: z.number().int().min(1).max(4096).optional(),
});

export const trainingJobRoutes = [
  route({
    method: 'POST',
    path: '/core/training-jobs',
    tag: 'training-jobs',
    summary: 'Start a fine-tuning job',
    description:
      '`base_model` is a catalog id or a checkpoint UUID (continue training). `grpo` needs rl_config {num_generations, reward}; `dpo` needs rl_config {beta}. Decoders train with LoRA only.',
    auth: 'key',
    limit: 'training_create',
    body: z.strictObject({
      model_name: resourceName,
      base_model: z.string().min(1).max(200),
      datasets: z.array(z.strictObject({ name: resourceName, version: z.number().int().positive().optional() })).min(1).max(20),
      training_type: z.enum(['lora', 'full']).optional(),
      training_algorithm: z.enum(['sft', 'grpo', 'dpo']).optional(),
      rl_config: RlConfig.optional(),
      nr_epochs: z.number().int().min(1).max(100).optional(),
      learning_rate: z.number().gt(0).max(1).optional(),
    }),
    responses: {
      201: { description: 'Created', schema: z.object({ id: z.string(), status: z.literal('requested') }) },
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
    auth: 'key',
    query: z.strictObject({ status: z.enum(['requested', 'running', 'complete', 'failed', 'stopped']).optional() }),
    responses: { 200: { description: 'Jobs', schema: list(TrainingJobSchema) } },
    handler: async ({ svc, principal, query }) => json(200, { data: await listTrainingJobs(svc, principal.team_id, query) }),
  }),
  route({
    method: 'GET',
    path: '/core/training-jobs/:id',
    tag: 'training-jobs',
    summary: 'Status, progress and metrics of a job',
    auth: 'key',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Job', schema: TrainingJobSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getTrainingJob(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'POST',
    path: '/core/training-jobs/:id/stop',
    tag: 'training-jobs',
    summary: 'Stop a requested or running job',
    auth: 'key',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Stopped', schema: TrainingJobSchema }, 404: { description: 'Not found' }, 409: { description: 'Already finished' } },
    handler: async ({ svc, principal, params }) => json(200, await stopTrainingJob(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'DELETE',
    path: '/core/training-jobs/:id',
    tag: 'training-jobs',
    summary: 'Delete a finished job record and its artifacts',
    auth: 'key',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Deleted', schema: Deleted }, 404: { description: 'Not found' }, 409: { description: 'Still active: stop it first' } },
    handler: async ({ svc, principal, params }) => {
      await deleteTrainingJob(svc, principal.team_id, params.id);
      return json(200, { id: params.id, deleted: true });
    },
  }),
];

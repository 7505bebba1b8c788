/**
 * Routes only the encoder service (ECS, `sift serve-aws`) mounts: workflow tasks that need the
 * engine, forwarded by the workflow Lambda (which has no onnxruntime). Never exposed through API
 * Gateway; guarded by the internal token (internalAuth.ts).
 */
import { z } from 'zod';
import { evaluateShard, InProcessPredictor, validationMetrics } from '../../core/evaluation/workflow';
import { decoderTextGenerator } from '../../adapters/decoder/textGenerator';
import { generateShard } from '../../core/generation/workflow';
import { json, route } from '../types';

export const internalRoutes = () => [
  route({
    method: 'POST',
    path: '/internal/tasks/evaluation.shard',
    tag: 'internal',
    summary: 'Score one shard of an evaluation with this process’s engine',
    auth: 'internal',
    body: z.strictObject({
      evaluationId: z.string().min(1),
      teamId: z.string().min(1),
      shard: z.strictObject({ offset: z.number().int().min(0), count: z.number().int().min(1) }),
    }),
    responses: { 200: { description: 'Where the counts were stored', schema: z.object({ key: z.string(), rows: z.number() }) } },
    handler: async ({ svc, body }) => json(200, await evaluateShard(svc, new InProcessPredictor(svc), body)),
  }),
  route({
    method: 'POST',
    path: '/internal/tasks/training.validate',
    tag: 'internal',
    summary: 'Score a finished encoder job’s exported model on its held-out rows (the job’s headline metrics)',
    auth: 'internal',
    body: z.strictObject({ teamId: z.string().min(1), jobId: z.string().min(1) }),
    responses: { 200: { description: 'Metrics, or null when the job left no validation rows', schema: z.record(z.string(), z.unknown()).nullable() } },
    handler: async ({ svc, body }) => json(200, await validationMetrics(svc, new InProcessPredictor(svc), body.teamId, body.jobId)),
  }),
  route({
    method: 'POST',
    path: '/internal/tasks/generation.shard',
    tag: 'internal',
    summary: 'Generate (decoder) and label (engine) one shard of a generation job',
    auth: 'internal',
    body: z.strictObject({
      jobId: z.string().min(1),
      teamId: z.string().min(1),
      shard: z.strictObject({ index: z.number().int().min(0), count: z.number().int().min(1) }),
    }),
    responses: { 200: { description: 'Where the rows were stored', schema: z.object({ key: z.string(), rows: z.number() }) } },
    handler: async ({ svc, body }) => json(200, await generateShard(svc, decoderTextGenerator(svc), new InProcessPredictor(svc), body)),
  }),
];

/**
 * Routes only the encoder service (ECS, `bin/gateway.ts`) mounts: workflow tasks that need the
 * engine or the decoder, forwarded by the workflow Lambda (src/aws/encoderTasks.ts). Never exposed
 * through API Gateway; guarded by the internal token (internalAuth.ts).
 */
import { z } from 'zod';
import { decoderTextGenerator } from '../../core/syntheticData/decoderTextGenerator';
import type { Services } from '../../core/context';
import { evaluateShard, InProcessPredictor, validationMetrics } from '../../core/evaluation/workflow';
import { generateSyntheticDataShard } from '../../core/syntheticData/workflow';
import { json, route } from '../types';

const id = z.string().min(1);
const stored = z.object({ key: z.string(), rows: z.number() });

/** `POST /internal/tasks/<task>`: the task's input as the body, its result as the response. */
function internalTask<B extends z.ZodType>(
  task: string,
  summary: string,
  body: B,
  result: z.ZodType,
  run: (svc: Services, input: z.output<B>) => Promise<unknown>,
) {
  return route({
    method: 'POST',
    path: `/internal/tasks/${task}`,
    tag: 'internal',
    summary,
    body,
    responses: { 200: { description: 'The task result', schema: result } },
    handler: async ({ svc, body: input }) => json(200, await run(svc, input as z.output<B>)),
  });
}

export const internalRoutes = () => [
  internalTask(
    'evaluation.shard',
    'Score one shard of an evaluation with this process’s engine (counts stored; returns where)',
    z.strictObject({
      evaluationId: id,
      teamId: id,
      shard: z.strictObject({ offset: z.number().int().min(0), count: z.number().int().min(1) }),
    }),
    stored,
    (svc, input) => evaluateShard(svc, new InProcessPredictor(svc), input),
  ),
  internalTask(
    'training.validate',
    'Score a finished encoder job’s exported model on its held-out rows (the job’s headline metrics; null without rows)',
    z.strictObject({ teamId: id, jobId: id }),
    z.record(z.string(), z.unknown()).nullable(),
    (svc, input) => validationMetrics(svc, new InProcessPredictor(svc), input.teamId, input.jobId),
  ),
  internalTask(
    'generation.shard',
    'Generate (decoder) and label (engine) one shard of a generation job (rows stored; returns where)',
    z.strictObject({
      jobId: id,
      teamId: id,
      shard: z.strictObject({ index: z.number().int().min(0), count: z.number().int().min(1) }),
    }),
    stored,
    (svc, input) => generateSyntheticDataShard(svc, decoderTextGenerator(svc), new InProcessPredictor(svc), input),
  ),
];

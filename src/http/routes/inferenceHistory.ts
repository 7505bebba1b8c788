/** /inferences: stored inference history and feedback on it. */
import { z } from 'zod';
import { getInference, listInferences, submitFeedback } from '../../core/inferences';
import { json, route } from '../types';
import { queryInt, uuid } from '../validation';
import { InferenceRecordSchema } from './schemas';

export const inferenceHistoryRoutes = [
  route({
    method: 'GET',
    path: '/inferences',
    tag: 'inferences',
    summary: 'Past inferences, newest first (limit 1–200, default 50; offset 0–10,000)',
    query: z.strictObject({
      limit: queryInt(1, 200, 50),
      offset: queryInt(0, 10_000, 0),
      model_id: z.string().min(1).optional(),
      task: z.enum(['ner', 'classification', 'structures', 'relations', 'generate']).optional(),
      project_id: z.string().min(1).optional(),
      training_job_id: uuid.optional(),
    }),
    responses: {
      200: {
        description: 'A page of inferences',
        schema: z.object({
          data: z.array(InferenceRecordSchema),
          limit: z.number(),
          offset: z.number(),
          has_more: z.boolean(),
        }),
      },
    },
    handler: async ({ svc, principal, query }) => {
      const page = await listInferences(svc, principal.team_id, query);
      return json(200, { data: page.items, limit: page.limit, offset: page.offset, has_more: page.has_more });
    },
  }),
  route({
    method: 'GET',
    path: '/inferences/:id',
    tag: 'inferences',
    summary: 'One stored inference, with its feedback',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Inference', schema: InferenceRecordSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getInference(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'POST',
    path: '/inferences/:id/feedback',
    tag: 'inferences',
    summary: 'Mark an inference correct, or incorrect with the corrected output',
    params: z.object({ id: z.string() }),
    body: z.strictObject({
      verdict: z.enum(['correct', 'incorrect']),
      corrected_output: z.record(z.string(), z.unknown()).optional(),
    }),
    responses: {
      200: {
        description: 'Acknowledged',
        schema: z.object({ inference_id: z.string(), feedback: InferenceRecordSchema.shape.feedback }),
      },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params, body }) => {
      const updated = await submitFeedback(svc, principal.team_id, params.id, body);
      return json(200, { inference_id: updated.inference_id, feedback: updated.feedback });
    },
  }),
];

/** /core/evaluations: scoring a model on a dataset. */
import { z } from 'zod';
import { createEvaluation, deleteEvaluation, getEvaluation, listEvaluations } from '../../core/evaluations';
import { json, route } from '../types';
import { resourceName, uuid } from '../validation';
import { Deleted, EvaluationSchema, list } from './schemas';
import { computeStartErrors } from './errorDocs';

export const evaluationRoutes = [
  route({
    method: 'POST',
    path: '/core/evaluations',
    tag: 'evaluations',
    summary: 'Evaluate a training job or a base model (baseline) on a labelled dataset',
    body: z.strictObject({
      base_model: z.string().min(1),
      dataset_name: resourceName,
      dataset_version: z.number().int().positive().optional(),
      /** A project id or name: the evaluation is listed under it (GET /core/evaluations?project_id=). */
      project_id: z.string().min(1).max(128).optional(),
    }),
    responses: {
      202: { description: 'Started', schema: z.object({ id: z.string(), status: z.literal('running') }) },
      ...computeStartErrors,
      404: { description: 'Dataset not found' },
      409: { description: 'Dataset not ready, or job not complete' },
    },
    handler: async ({ svc, principal, body }) => {
      const evaluation = await createEvaluation(svc, principal.team_id, body);
      return json(202, { id: evaluation.id, status: evaluation.status });
    },
  }),
  route({
    method: 'GET',
    path: '/core/evaluations',
    tag: 'evaluations',
    summary: 'List evaluations, newest first',
    query: z.strictObject({ project_id: uuid.optional() }),
    responses: { 200: { description: 'Evaluations', schema: list(EvaluationSchema) } },
    handler: async ({ svc, principal, query }) =>
      json(200, { data: await listEvaluations(svc, principal.team_id, query) }),
  }),
  route({
    method: 'GET',
    path: '/core/evaluations/:id',
    tag: 'evaluations',
    summary: 'Read an evaluation and its metrics',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Evaluation', schema: EvaluationSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getEvaluation(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'DELETE',
    path: '/core/evaluations/:id',
    tag: 'evaluations',
    summary: 'Delete an evaluation',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Deleted', schema: Deleted }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => {
      await deleteEvaluation(svc, principal.team_id, params.id);
      return json(200, { id: params.id, deleted: true });
    },
  }),
];

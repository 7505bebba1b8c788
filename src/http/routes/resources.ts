import { z } from 'zod';
import { listBaseModels } from '../../core/catalog';
import { createEvaluation, deleteEvaluation, getEvaluation, listEvaluations } from '../../core/evaluations';
import { getInference, listInferences, submitFeedback } from '../../core/inferences';
import { clearProjectDeployment, deleteProjectAndHistory, listProjectDeployments, promoteToProject, rollbackProject } from '../../core/deployments';
import { createProject, getProject, listProjects } from '../../core/projects';
import { getUsage, listUsageRequests } from '../../core/usage';
import { json, route } from '../types';
import { queryBool, queryInt, resourceName, uuid } from '../validation';
import { BaseModelSchema, Deleted, EvaluationSchema, InferenceRecordSchema, ProjectDeploymentSchema, ProjectSchema, list } from './schemas';

export const baseModelRoutes = [
  route({
    method: 'GET',
    path: '/base-models',
    tag: 'base-models',
    summary: 'The catalog of base models; `available` says whether the weights are in the model store',
    auth: 'key',
    query: z.strictObject({
      task_type: z.enum(['encoder', 'decoder', 'ner', 'classification', 'structures', 'relations', 'generate']).optional(),
      supports_training: queryBool,
    }),
    responses: { 200: { description: 'Catalog', schema: list(BaseModelSchema) } },
    handler: async ({ svc, query }) => json(200, { data: await listBaseModels(svc, query) }),
  }),
];

/** `{id}` of the /projects/{id}/… routes: a project id or name. */
export const projectParam = z.object({ id: z.string().min(1).max(128) });
const ProjectChange = z.object({ project: ProjectSchema, deployment: ProjectDeploymentSchema });

export const projectRoutes = [
  route({
    method: 'POST',
    path: '/projects',
    tag: 'projects',
    summary: 'Create a project (its name is usable as a model id once something is deployed to it)',
    auth: 'key',
    body: z.strictObject({ name: resourceName, description: z.string().max(2000).optional() }),
    responses: { 201: { description: 'Created', schema: ProjectSchema }, 409: { description: 'Name taken' } },
    handler: async ({ svc, principal, body }) => json(201, await createProject(svc, principal.team_id, body)),
  }),
  route({
    method: 'GET',
    path: '/projects',
    tag: 'projects',
    summary: 'List projects, newest first',
    auth: 'key',
    responses: { 200: { description: 'Projects', schema: list(ProjectSchema) } },
    handler: async ({ svc, principal }) => json(200, { data: await listProjects(svc, principal.team_id) }),
  }),
  route({
    method: 'GET',
    path: '/projects/:id',
    tag: 'projects',
    summary: 'Read a project by id or name',
    auth: 'key',
    params: z.object({ id: z.string().min(1).max(128) }),
    responses: { 200: { description: 'Project', schema: ProjectSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getProject(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'DELETE',
    path: '/projects/:id',
    tag: 'projects',
    summary: 'Delete a project by id or name',
    auth: 'key',
    params: z.object({ id: z.string().min(1).max(128) }),
    responses: { 200: { description: 'Deleted', schema: Deleted }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => {
      await deleteProjectAndHistory(svc, principal.team_id, params.id);
      return json(200, { id: params.id, deleted: true });
    },
  }),
  route({
    method: 'POST',
    path: '/projects/:id/deployments',
    tag: 'projects',
    summary: 'Promote a training job to the project: every request using the project name or id is served by it from now on',
    description:
      'Deploys the job if it is not deployed yet (its final model, or `checkpoint_id`). The previous target stays deployed, so a rollback is instant.',
    auth: 'key',
    params: projectParam,
    body: z.strictObject({ training_job_id: z.string().min(1).max(64), checkpoint_id: z.string().min(1).max(64).optional() }),
    responses: {
      201: { description: 'Promoted', schema: ProjectChange },
      404: { description: 'Project not found' },
      409: { description: 'Job not complete / no servable weights / concurrent change' },
    },
    handler: async ({ svc, principal, params, body }) => json(201, await promoteToProject(svc, principal.team_id, params.id, body)),
  }),
  route({
    method: 'GET',
    path: '/projects/:id/deployments',
    tag: 'projects',
    summary: 'The project\'s deployment history, newest first (promotions, rollbacks, clears)',
    auth: 'key',
    params: projectParam,
    responses: { 200: { description: 'History', schema: list(ProjectDeploymentSchema).extend({ project: ProjectSchema }) }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => {
      const { project, deployments } = await listProjectDeployments(svc, principal.team_id, params.id);
      return json(200, { project, data: deployments });
    },
  }),
  route({
    method: 'POST',
    path: '/projects/:id/rollback',
    tag: 'projects',
    summary: 'Point the project back at an earlier deployment (the one named, else the previous model)',
    auth: 'key',
    params: projectParam,
    body: z.strictObject({ deployment_id: z.string().min(1).max(64).optional() }).optional(),
    responses: { 201: { description: 'Rolled back', schema: ProjectChange }, 404: { description: 'Not found' }, 409: { description: 'Nothing to roll back to' } },
    handler: async ({ svc, principal, params, body }) => json(201, await rollbackProject(svc, principal.team_id, params.id, { deployment_id: body?.deployment_id })),
  }),
  route({
    method: 'DELETE',
    path: '/projects/:id/deployments',
    tag: 'projects',
    summary: 'Stop serving anything under the project (history kept; its jobs stay deployed)',
    auth: 'key',
    params: projectParam,
    responses: { 200: { description: 'Cleared', schema: ProjectChange }, 404: { description: 'Not found' }, 409: { description: 'Nothing deployed' } },
    handler: async ({ svc, principal, params }) => json(200, await clearProjectDeployment(svc, principal.team_id, params.id)),
  }),
];

export const evaluationRoutes = [
  route({
    method: 'POST',
    path: '/core/evaluations',
    tag: 'evaluations',
    summary: 'Evaluate a training job or a base model (baseline) on a labelled dataset',
    auth: 'key',
    body: z.strictObject({
      base_model: z.string().min(1),
      dataset_name: resourceName,
      dataset_version: z.number().int().positive().optional(),
      /** A project id or name: the evaluation is listed under it (GET /core/evaluations?project_id=). */
      project_id: z.string().min(1).max(128).optional(),
    }),
    responses: {
      202: { description: 'Started', schema: z.object({ id: z.string(), status: z.literal('running') }) },
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
    auth: 'key',
    query: z.strictObject({ project_id: uuid.optional() }),
    responses: { 200: { description: 'Evaluations', schema: list(EvaluationSchema) } },
    handler: async ({ svc, principal, query }) => json(200, { data: await listEvaluations(svc, principal.team_id, query) }),
  }),
  route({
    method: 'GET',
    path: '/core/evaluations/:id',
    tag: 'evaluations',
    summary: 'Read an evaluation and its metrics',
    auth: 'key',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Evaluation', schema: EvaluationSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getEvaluation(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'DELETE',
    path: '/core/evaluations/:id',
    tag: 'evaluations',
    summary: 'Delete an evaluation',
    auth: 'key',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Deleted', schema: Deleted }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => {
      await deleteEvaluation(svc, principal.team_id, params.id);
      return json(200, { id: params.id, deleted: true });
    },
  }),
];

export const inferenceHistoryRoutes = [
  route({
    method: 'GET',
    path: '/inferences',
    tag: 'inferences',
    summary: 'Past inferences, newest first (limit 1–200, default 50; offset 0–10,000)',
    auth: 'key',
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
        schema: z.object({ data: z.array(InferenceRecordSchema), limit: z.number(), offset: z.number(), has_more: z.boolean() }),
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
    auth: 'key',
    params: z.object({ id: z.string() }),
    responses: { 200: { description: 'Inference', schema: InferenceRecordSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getInference(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'POST',
    path: '/inferences/:id/feedback',
    tag: 'inferences',
    summary: 'Mark an inference correct, or incorrect with the corrected output',
    auth: 'key',
    params: z.object({ id: z.string() }),
    body: z.strictObject({ verdict: z.enum(['correct', 'incorrect']), corrected_output: z.record(z.string(), z.unknown()).optional() }),
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

const UsageTotals = {
  requests: z.number(),
  input_tokens: z.number(),
  output_tokens: z.number(),
  cache_read_tokens: z.number(),
  cache_write_tokens: z.number(),
  cost_usd: z.number(),
};
const UsagePeriod = z.object({
  ...UsageTotals,
  requests_by_endpoint: z.record(z.string(), z.number()).describe('every authenticated request, by rate-limit class'),
  by_model: z.array(z.object({ model: z.string(), ...UsageTotals })).describe('billed requests by the model named in the request'),
  by_endpoint: z.array(z.object({ endpoint: z.string(), ...UsageTotals })).describe('billed requests by route'),
});
const UsageSchema = z
  .object({
    team_id: z.string(),
    plan: z.string(),
    day: z.string(),
    month: z.string(),
    today: UsagePeriod,
    this_month: UsagePeriod,
    by_day: z.array(z.object({ day: z.string(), ...UsageTotals, by_model: z.array(z.object({ model: z.string(), ...UsageTotals })) })).describe('newest first; days with usage'),
    daily_spend_cap_usd: z.number().nullable(),
    remaining_daily_allowance_usd: z.number().nullable(),
    credit_balance_usd: z.number().nullable(),
    resets_at: z.string(),
    rate_limits: z.record(z.string(), z.array(z.object({ limit: z.number(), window_seconds: z.number() }))),
  })
  .meta({ id: 'Usage' });
const UsageRequestSchema = z
  .object({
    at: z.string(),
    inference_id: z.string(),
    model: z.string(),
    endpoint: z.string(),
    input_tokens: z.number(),
    output_tokens: z.number(),
    cache_read_tokens: z.number(),
    cache_write_tokens: z.number(),
    cost_usd: z.number(),
  })
  .meta({ id: 'UsageRequest' });

export const billingRoutes = [
  route({
    method: 'GET',
    path: '/billing/usage/requests',
    tag: 'billing',
    summary: "Current usage and remaining allowance: today's and this month's requests, tokens and spend by model and endpoint, and by day",
    auth: 'key',
    query: z.strictObject({ days: queryInt(1, 366, 31) }),
    responses: { 200: { description: 'Usage', schema: UsageSchema } },
    handler: async ({ svc, principal, query }) => json(200, await getUsage(svc, principal.team_id, query.days)),
  }),
  route({
    method: 'GET',
    path: '/billing/usage/requests/list',
    tag: 'billing',
    summary: 'Billed requests one by one, newest first (time, model, endpoint, tokens, cost, inference id); page with `cursor`',
    auth: 'key',
    query: z.strictObject({ limit: queryInt(1, 500, 100), cursor: z.string().max(1024).regex(/^[A-Za-z0-9_-]+$/, 'is not a next_cursor from a previous page').optional() }),
    responses: { 200: { description: 'Billed requests', schema: z.object({ data: z.array(UsageRequestSchema), next_cursor: z.string().nullable() }) } },
    handler: async ({ svc, principal, query }) => json(200, await listUsageRequests(svc, principal.team_id, query)),
  }),
];

/** /projects: named deployment targets, their deployment history and rollback (adaptive cycles: adaptive.ts). */
import { z } from 'zod';
import {
  clearProjectDeployment,
  deleteProjectAndHistory,
  listProjectDeployments,
  promoteToProject,
  rollbackProject,
} from '../../core/deployments';
import { createProject, getProject, listProjects } from '../../core/projects';
import { json, route } from '../types';
import { resourceName } from '../validation';
import { Deleted, ProjectDeploymentSchema, ProjectSchema, list, thresholdChoiceFields } from './schemas';

/** `{id}` of the /projects/{id}/… routes: a project id or name. */
export const projectParam = z.object({ id: z.string().min(1).max(128) });
const ProjectChange = z.object({ project: ProjectSchema, deployment: ProjectDeploymentSchema });

export const projectRoutes = [
  route({
    method: 'POST',
    path: '/projects',
    tag: 'projects',
    summary: 'Create a project (its name is usable as a model id once something is deployed to it)',
    body: z.strictObject({ name: resourceName, description: z.string().max(2000).optional() }),
    responses: { 201: { description: 'Created', schema: ProjectSchema }, 409: { description: 'Name taken' } },
    handler: async ({ svc, principal, body }) => json(201, await createProject(svc, principal.team_id, body)),
  }),
  route({
    method: 'GET',
    path: '/projects',
    tag: 'projects',
    summary: 'List projects, newest first',
    responses: { 200: { description: 'Projects', schema: list(ProjectSchema) } },
    handler: async ({ svc, principal }) => json(200, { data: await listProjects(svc, principal.team_id) }),
  }),
  route({
    method: 'GET',
    path: '/projects/:id',
    tag: 'projects',
    summary: 'Read a project by id or name',
    params: z.object({ id: z.string().min(1).max(128) }),
    responses: { 200: { description: 'Project', schema: ProjectSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => json(200, await getProject(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'DELETE',
    path: '/projects/:id',
    tag: 'projects',
    summary: 'Delete a project by id or name',
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
    summary:
      'Promote a training job to the project: every request using the project name or id is served by it from now on',
    description:
      'Deploys the job if it is not deployed yet (its final model, or `checkpoint_id`). The previous target stays deployed, so a rollback is instant.',
    params: projectParam,
    body: z.strictObject({
      training_job_id: z.string().min(1).max(64),
      checkpoint_id: z.string().min(1).max(64).optional(),
      ...thresholdChoiceFields,
    }),
    responses: {
      201: { description: 'Promoted', schema: ProjectChange },
      404: { description: 'Project not found' },
      409: { description: 'Job not complete / no servable weights / concurrent change' },
    },
    handler: async ({ svc, principal, params, body }) =>
      json(201, await promoteToProject(svc, principal.team_id, params.id, body)),
  }),
  route({
    method: 'GET',
    path: '/projects/:id/deployments',
    tag: 'projects',
    summary: "The project's deployment history, newest first (promotions, rollbacks, clears)",
    params: projectParam,
    responses: {
      200: { description: 'History', schema: list(ProjectDeploymentSchema).extend({ project: ProjectSchema }) },
      404: { description: 'Not found' },
    },
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
    params: projectParam,
    body: z.strictObject({ deployment_id: z.string().min(1).max(64).optional() }).optional(),
    responses: {
      201: { description: 'Rolled back', schema: ProjectChange },
      404: { description: 'Not found' },
      409: { description: 'Nothing to roll back to' },
    },
    handler: async ({ svc, principal, params, body }) =>
      json(201, await rollbackProject(svc, principal.team_id, params.id, { deployment_id: body?.deployment_id })),
  }),
  route({
    method: 'DELETE',
    path: '/projects/:id/deployments',
    tag: 'projects',
    summary: 'Stop serving anything under the project (history kept; its jobs stay deployed)',
    params: projectParam,
    responses: {
      200: { description: 'Cleared', schema: ProjectChange },
      404: { description: 'Not found' },
      409: { description: 'Nothing deployed' },
    },
    handler: async ({ svc, principal, params }) =>
      json(200, await clearProjectDeployment(svc, principal.team_id, params.id)),
  }),
];

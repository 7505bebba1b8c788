/** Adaptive inference (docs/reference/decisions.md#adaptive-inference): a project's improvement cycles, run on demand or on the schedule. */
import { z } from 'zod';
import { getCycle, listCycles, promoteCycle, startCycle } from '../../core/adaptive/cycles';
import { getProject } from '../../core/projects';
import { json, route } from '../types';
import { projectParam } from './projects';
import { AdaptiveCycleSchema, ProjectDeploymentSchema, ProjectSchema, list } from './schemas';
import { computeStartErrors } from './errorDocs';

const cycleParams = projectParam.extend({ cycle_id: z.string().min(1).max(64) });

export const adaptiveRoutes = [
  route({
    method: 'POST',
    path: '/projects/:id/adaptive-cycles',
    tag: 'projects',
    summary:
      'Run an adaptive cycle now: reviewed and informative traces → training data → candidate → evaluation against the deployed model',
    description:
      "The schedule runs the same cycle for every deployed project. Nothing is promoted: a finished cycle is `offered` with both models' F1, precision and recall on the same held-out traces, or `skipped` with the reason (usually: not enough feedback yet; `review` lists the traces to give feedback on). Pro, Research and Custom plans.",
    params: projectParam,
    responses: {
      202: { description: 'Started', schema: AdaptiveCycleSchema },
      ...computeStartErrors,
      403: { description: "Not included on the team's plan" },
      404: { description: 'Project not found' },
      409: { description: 'No deployed model, or a cycle is already running' },
    },
    handler: async ({ svc, principal, params }) => json(202, await startCycle(svc, principal.team_id, params.id)),
  }),
  route({
    method: 'GET',
    path: '/projects/:id/adaptive-cycles',
    tag: 'projects',
    summary: "The project's adaptive cycles, newest first",
    params: projectParam,
    responses: {
      200: { description: 'Cycles', schema: list(AdaptiveCycleSchema).extend({ project: ProjectSchema }) },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params }) => {
      const { project, cycles } = await listCycles(svc, principal.team_id, params.id);
      return json(200, { project, data: cycles });
    },
  }),
  route({
    method: 'GET',
    path: '/projects/:id/adaptive-cycles/:cycle_id',
    tag: 'projects',
    summary: 'One adaptive cycle: its stage, trace counts, datasets, candidate and comparison',
    params: cycleParams,
    responses: { 200: { description: 'Cycle', schema: AdaptiveCycleSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) => {
      const project = await getProject(svc, principal.team_id, params.id);
      return json(200, await getCycle(svc, principal.team_id, project.id, params.cycle_id));
    },
  }),
  route({
    method: 'POST',
    path: '/projects/:id/adaptive-cycles/:cycle_id/promote',
    tag: 'projects',
    summary: 'Accept an offered candidate: the project (and every client using its name) is served by it from now on',
    description:
      'The same as promoting the candidate job through POST /projects/{id}/deployments, and marks the cycle `promoted`; POST /projects/{id}/rollback undoes it.',
    params: cycleParams,
    responses: {
      201: {
        description: 'Promoted',
        schema: z.object({ cycle: AdaptiveCycleSchema, deployment: ProjectDeploymentSchema }),
      },
      404: { description: 'Not found' },
      409: { description: 'The cycle has no offered candidate' },
    },
    handler: async ({ svc, principal, params }) =>
      json(201, await promoteCycle(svc, principal.team_id, params.id, params.cycle_id)),
  }),
];

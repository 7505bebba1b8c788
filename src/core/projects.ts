import { PROJECTS_PREFIX, projectItem, projectNameItem, teamPartition } from './recordKeys';
import { WriteConflict } from './ports';
import type { Services } from './context';
import { ConflictError, NotFoundError } from './errors';
import { isUuid, newUuid } from './ids';

export interface Project {
  id: string;
  name: string;
  description: string | null;
  /** The training job currently served under this project's name (set by deployments). */
  active_training_job_id: string | null;
  /** The project-history entry that set the current target (see deployments.ts). */
  active_deployment_id?: string | null;
  /** The adaptive cycle working on this project, while one runs (adaptive/cycles.ts). */
  adaptive_cycle_id?: string | null;
  created_at: string;
  updated_at?: string;
}

/** The longest project name the API accepts (src/http/validation.ts `resourceName`). */
const MAX_PROJECT_NAME_CHARS = 128;

/** A second item (projectNameItem) claims the name, so two projects of a team can never share one. */

export async function createProject(
  svc: Services,
  teamId: string,
  input: { name: string; description?: string | undefined },
): Promise<Project> {
  const project: Project = {
    id: newUuid(),
    name: input.name,
    description: input.description ?? null,
    active_training_job_id: null,
    created_at: svc.now().toISOString(),
  };
  try {
    await svc.records.put(projectNameItem(teamId, project.name), { project_id: project.id }, { ifAbsent: true });
  } catch (err) {
    if (err instanceof WriteConflict) throw new ConflictError(`A project named '${project.name}' already exists`);
    throw err;
  }
  try {
    await svc.records.put(projectItem(teamId, project.id), project, { ifAbsent: true });
  } catch (err) {
    await svc.records.delete(projectNameItem(teamId, project.name).pk, projectNameItem(teamId, project.name).sk);
    throw err;
  }
  return project;
}

export async function listProjects(svc: Services, teamId: string): Promise<Project[]> {
  const items = await svc.records.queryAll<Project>(teamPartition(teamId), { beginsWith: PROJECTS_PREFIX });
  return items.sort((a, b) => b.created_at.localeCompare(a.created_at));
}

/** Accepts a project id or a project name (both identify a project on every route). */
export async function getProject(svc: Services, teamId: string, idOrName: string): Promise<Project> {
  let id = isUuid(idOrName) ? idOrName : undefined;
  // no project has a longer name (validation.ts resourceName), and as a key it could pass the store's limit (DynamoDB: 1 KB)
  if (!id && idOrName.length > MAX_PROJECT_NAME_CHARS)
    throw new NotFoundError(`Project '${idOrName.slice(0, MAX_PROJECT_NAME_CHARS)}…' not found`);
  if (!id) {
    const claim = await svc.records.get<{ project_id: string }>(
      projectNameItem(teamId, idOrName).pk,
      projectNameItem(teamId, idOrName).sk,
    );
    id = claim?.project_id;
  }
  const project = id
    ? await svc.records.get<Project>(projectItem(teamId, id).pk, projectItem(teamId, id).sk)
    : undefined;
  if (!project) throw new NotFoundError(`Project '${idOrName}' not found`);
  return project;
}

export async function deleteProject(svc: Services, teamId: string, idOrName: string): Promise<void> {
  const project = await getProject(svc, teamId, idOrName);
  await svc.records.delete(projectItem(teamId, project.id).pk, projectItem(teamId, project.id).sk);
  await svc.records.delete(projectNameItem(teamId, project.name).pk, projectNameItem(teamId, project.name).sk);
}

import { findBaseModel } from './catalog';
import type { Services } from './context';
import { latestReadyVersion, getVersion } from './datasets/service';
import { ConflictError, NotFoundError, ValidationError } from './errors';
import { isUuid, newUuid } from './ids';
import { getTrainingJob } from './trainingJobs';

export type EvaluationStatus = 'running' | 'complete' | 'failed';

export interface Evaluation {
  id: string;
  status: EvaluationStatus;
  base_model: string;
  /** Set when `base_model` is a training job id. */
  training_job_id: string | null;
  project_id: string | null;
  dataset_name: string;
  dataset_version: number;
  metrics: Record<string, unknown> | null;
  error: string | null;
  created_at: string;
  finished_at: string | null;
}

const evalItem = (teamId: string, id: string) => ({ pk: `TEAM#${teamId}`, sk: `EVAL#${id}` });
const evalIndex = (teamId: string) => `TEAM#${teamId}#EVALS`;

export async function createEvaluation(
  svc: Services,
  teamId: string,
  input: { base_model: string; dataset_name: string; dataset_version?: number | undefined; project_id?: string | undefined },
): Promise<Evaluation> {
  let trainingJobId: string | null = null;
  if (isUuid(input.base_model)) {
    const job = await getTrainingJob(svc, teamId, input.base_model).catch(() => undefined);
    if (!job) throw ValidationError.field(['body', 'base_model'], `no training job '${input.base_model}' exists`, 'unknown_model');
    if (job.status !== 'complete') throw new ConflictError(`Training job '${job.id}' is ${job.status}; only a complete job can be evaluated`);
    trainingJobId = job.id;
  } else if (!findBaseModel(input.base_model)) {
    throw ValidationError.field(['body', 'base_model'], `'${input.base_model}' is neither a training job id nor a catalog model id`, 'unknown_model');
  }
  const version =
    input.dataset_version !== undefined
      ? await getVersion(svc, teamId, input.dataset_name, input.dataset_version)
      : await latestReadyVersion(svc, teamId, input.dataset_name);
  if (!version) {
    await getVersion(svc, teamId, input.dataset_name);
    throw new ConflictError(`Dataset '${input.dataset_name}' has no ready version yet`);
  }
  if (version.status !== 'ready') throw new ConflictError(`Dataset '${input.dataset_name}' version ${version.version} is ${version.status}, not ready`);
  const evaluation: Evaluation = {
    id: newUuid(),
    status: 'running',
    base_model: input.base_model,
    training_job_id: trainingJobId,
    project_id: input.project_id ?? null,
    dataset_name: input.dataset_name,
    dataset_version: version.version,
    metrics: null,
    error: null,
    created_at: svc.now().toISOString(),
    finished_at: null,
  };
  await svc.records.put({ ...evalItem(teamId, evaluation.id), gsi1pk: evalIndex(teamId), gsi1sk: `${evaluation.created_at}#${evaluation.id}` }, evaluation, {
    ifAbsent: true,
  });
  return evaluation;
}

export async function getEvaluation(svc: Services, teamId: string, id: string): Promise<Evaluation> {
  const found = isUuid(id) ? await svc.records.get<Evaluation>(evalItem(teamId, id).pk, evalItem(teamId, id).sk) : undefined;
  if (!found) throw new NotFoundError(`Evaluation '${id}' not found`);
  return found;
}

export async function listEvaluations(svc: Services, teamId: string, filter: { project_id?: string | undefined }): Promise<Evaluation[]> {
  const all = await svc.records.queryAll<Evaluation>(evalIndex(teamId), { index: 'gsi1', newestFirst: true });
  return filter.project_id ? all.filter((e) => e.project_id === filter.project_id) : all;
}

export async function deleteEvaluation(svc: Services, teamId: string, id: string): Promise<void> {
  await getEvaluation(svc, teamId, id);
  await svc.records.delete(evalItem(teamId, id).pk, evalItem(teamId, id).sk);
}

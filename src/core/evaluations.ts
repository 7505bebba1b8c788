import { byCreation, evaluationItem, evaluationsIndex } from './recordKeys';
import { baseModelManifestKey } from './modelLayout';
import { ENCODER_TASK_TYPES } from './datasets/rows';
import { getProject } from './projects';
import type { Services } from './context';
import { latestReadyVersion, getVersion } from './datasets/service';
import { ConflictError, NotFoundError, ValidationError, notFoundAsUndefined } from './errors';
import { missingWeightsError } from './modelBuild';
import { isUuid, newUuid } from './ids';
import { findModel } from './modelRegistry';
import { getTrainingJob } from './trainingJobs';
import { admitCompute, billEvaluation } from './billing/compute';
import { releaseComputeSlot } from './computeSlots';
import { WriteConflict } from './ports';

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

/**
 * Validates and records an evaluation, then starts its workflow (docs/reference/decisions.md#evaluations: `{id, status: running}`).
 * A complete training job is scored on its final model whether or not it is deployed; a catalog
 * encoder id gives the baseline. Anything the workflow can't do is refused here with a 4xx.
 */
export async function createEvaluation(
  svc: Services,
  teamId: string,
  input: {
    base_model: string;
    dataset_name: string;
    dataset_version?: number | undefined;
    project_id?: string | undefined;
  },
): Promise<Evaluation> {
  let trainingJobId: string | null = null;
  let projectId = input.project_id ?? null;
  if (isUuid(input.base_model)) {
    const job = await getTrainingJob(svc, teamId, input.base_model).catch(notFoundAsUndefined);
    if (!job)
      throw ValidationError.field(
        ['body', 'base_model'],
        `no training job '${input.base_model}' exists`,
        'unknown_model',
      );
    if (job.model_type !== 'encoder')
      throw ValidationError.field(
        ['body', 'base_model'],
        `training job '${job.id}' trained a decoder; evaluations score extraction models (F1 on labelled spans, labels, fields, relations)`,
      );
    if (job.status !== 'complete')
      throw new ConflictError(`Training job '${job.id}' is ${job.status}; only a complete job can be evaluated`);
    trainingJobId = job.id;
  } else {
    const base = await findModel(svc, input.base_model, teamId);
    if (!base)
      throw ValidationError.field(
        ['body', 'base_model'],
        `'${input.base_model}' is neither a training job id nor a base model id (GET /base-models)`,
        'unknown_model',
      );
    if (base.type !== 'encoder')
      throw ValidationError.field(
        ['body', 'base_model'],
        `'${base.id}' is a decoder; evaluations score extraction models (F1 on labelled spans, labels, fields, relations)`,
      );
    if (!(await svc.blobs.head(baseModelManifestKey(base.id)))) {
      throw missingWeightsError(
        svc,
        base.id,
        `Model '${base.id}' is in the catalog but its weights are not in the model store on this deployment`,
      );
    }
  }
  if (projectId !== null) {
    const project = await getProject(svc, teamId, projectId).catch(notFoundAsUndefined);
    if (!project)
      throw ValidationError.field(['body', 'project_id'], `no project '${input.project_id}' exists`, 'unknown_project');
    projectId = project.id;
  }
  const version =
    input.dataset_version !== undefined
      ? await getVersion(svc, teamId, input.dataset_name, input.dataset_version)
      : await latestReadyVersion(svc, teamId, input.dataset_name);
  if (!version) {
    await getVersion(svc, teamId, input.dataset_name);
    throw new ConflictError(`Dataset '${input.dataset_name}' has no ready version yet`);
  }
  if (version.status !== 'ready')
    throw new ConflictError(
      `Dataset '${input.dataset_name}' version ${version.version} is ${version.status}, not ready`,
    );
  if (!version.task_types.some((t) => (ENCODER_TASK_TYPES as string[]).includes(t))) {
    throw ValidationError.field(
      ['body', 'dataset_name'],
      `dataset '${version.name}' has no labelled extraction rows (its task types: ${version.task_types.join(', ') || 'none'}); evaluations need entities, label(s), json_structures or relations`,
    );
  }
  // compute is money: out of credit (402), past the daily cap or at the plan's running cap (429) → nothing is written
  const id = newUuid();
  await admitCompute(svc, teamId, 'evaluation', id);
  const evaluation: Evaluation = {
    id,
    status: 'running',
    base_model: input.base_model,
    training_job_id: trainingJobId,
    project_id: projectId,
    dataset_name: input.dataset_name,
    dataset_version: version.version,
    metrics: null,
    error: null,
    created_at: svc.now().toISOString(),
    finished_at: null,
  };
  try {
    await svc.records.put(
      {
        ...evaluationItem(teamId, evaluation.id),
        gsi1pk: evaluationsIndex(teamId),
        gsi1sk: byCreation(evaluation.created_at, evaluation.id),
      },
      evaluation,
      {
        ifAbsent: true,
      },
    );
  } catch (err) {
    await releaseComputeSlot(svc, teamId, 'evaluation', id);
    throw err;
  }
  try {
    if (!svc.workflows) throw new Error('this deployment has no workflow runner configured');
    await svc.workflows.start('evaluation', `eval-${evaluation.id}`, { evaluationId: evaluation.id, teamId });
  } catch (err) {
    // never leave a record `running` that nothing will finish
    const failed = { status: 'failed' as const, error: `could not start the evaluation: ${(err as Error).message}` };
    return (
      (await finishEvaluation(svc, teamId, evaluation.id, failed)) ?? {
        ...evaluation,
        ...failed,
        finished_at: svc.now().toISOString(),
      }
    );
  }
  return evaluation;
}

/**
 * The one transition that ends an evaluation (`running` → `complete` | `failed`), conditional on
 * `running`: only the write that wins bills the shards that were scored and frees the team's slot,
 * so a retried aggregate or failure step does nothing. Undefined when it had already ended (or was deleted).
 */
export async function finishEvaluation(
  svc: Services,
  teamId: string,
  id: string,
  set: { status: 'complete' | 'failed'; error: string | null; metrics?: object },
): Promise<Evaluation | undefined> {
  const key = evaluationItem(teamId, id);
  let after: Evaluation;
  try {
    after = await svc.records.update<Evaluation>(key.pk, key.sk, {
      set: { ...set, finished_at: svc.now().toISOString() },
      condition: [{ attr: 'status', equals: 'running' }],
    });
  } catch (err) {
    if (err instanceof WriteConflict) return undefined;
    throw err;
  }
  await billEvaluation(svc, teamId, after);
  await releaseComputeSlot(svc, teamId, 'evaluation', id);
  return after;
}

export async function getEvaluation(svc: Services, teamId: string, id: string): Promise<Evaluation> {
  const found = isUuid(id)
    ? await svc.records.get<Evaluation>(evaluationItem(teamId, id).pk, evaluationItem(teamId, id).sk)
    : undefined;
  if (!found) throw new NotFoundError(`Evaluation '${id}' not found`);
  return found;
}

export async function listEvaluations(
  svc: Services,
  teamId: string,
  filter: { project_id?: string | undefined },
): Promise<Evaluation[]> {
  const all = await svc.records.queryAll<Evaluation>(evaluationsIndex(teamId), { index: 'gsi1', newestFirst: true });
  return filter.project_id ? all.filter((e) => e.project_id === filter.project_id) : all;
}

export async function deleteEvaluation(svc: Services, teamId: string, id: string): Promise<void> {
  const evaluation = await getEvaluation(svc, teamId, id);
  await svc.records
    .delete(evaluationItem(teamId, id).pk, evaluationItem(teamId, id).sk, [
      { attr: 'status', equals: evaluation.status },
    ])
    .catch((err: unknown) => {
      if (err instanceof WriteConflict)
        throw new ConflictError(`Evaluation '${id}' changed meanwhile (it finished, or was deleted); read it again`);
      throw err;
    });
  if (evaluation.status === 'running') {
    // deleting a running evaluation ends it (once: the delete above is conditional on `running`):
    // it pays for the shards scored so far and frees its slot
    await billEvaluation(svc, teamId, evaluation);
    await releaseComputeSlot(svc, teamId, 'evaluation', id);
  }
  // shard counts (a running workflow's aggregate step also cleans up after a delete)
  await svc.blobs.deletePrefix(`evaluations/${teamId}/${id}/`);
}

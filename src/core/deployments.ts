/**
 * Inference deployments and the model identifiers that route through them (docs/reference/decisions.md#model-identifiers).
 *
 * - A training job is servable only while it has an active deployment, which pins one checkpoint
 *   (the final model unless another servable checkpoint is named). The pin lives on the job record
 *   (`deployment`), so resolving a job id costs the one read it already needed.
 * - A project points at one deployed job (`active_training_job_id`); promoting, rolling back and
 *   clearing append to the project's deployment history (newest first), so every change is auditable
 *   and reversible. Project writes are conditional on the previous target: two concurrent promotions
 *   can't silently overwrite each other.
 */
import { ITEM_EXISTS, WriteConflict } from './ports';
import { jobItem, projectDeploymentItem, projectDeploymentsPrefix, projectItem, teamPartition } from './recordKeys';
import type { BaseModel } from './catalog';
import type { Services } from './context';
import { ConflictError, NotFoundError, ValidationError, notFoundAsUndefined } from './errors';
import { getEvaluation, listEvaluations, type Evaluation } from './evaluations';
import type { CalibratedThresholds } from './extraction/thresholds';
import { isUuid, newUuid } from './ids';
import { findModel } from './modelRegistry';
import { deleteProject, getProject, listProjects, type Project } from './projects';
import { getCheckpoint, listCheckpoints, modelPrefix } from './training/artifacts';
import {
  fineTunedModelName,
  getTrainingJob,
  jobIdOfFineTunedModel,
  type JobDeployment,
  type TrainingJob,
} from './trainingJobs';

export type { JobDeployment } from './trainingJobs';

export type ProjectDeploymentAction = 'promote' | 'rollback' | 'clear';

export interface ProjectDeployment {
  id: string;
  project_id: string;
  action: ProjectDeploymentAction;
  /** What the project serves after this change (null after `clear`). */
  training_job_id: string | null;
  checkpoint_id: string | null;
  previous_training_job_id: string | null;
  created_at: string;
}

/** Which files make a model directory servable by each engine (read from the training manifest). */
async function servableWeights(svc: Services, job: TrainingJob, prefix: string, what: string): Promise<void> {
  const key = `${prefix}manifest.json`;
  const manifest = (await svc.blobs.head(key))
    ? (JSON.parse(await svc.blobs.getText(key)) as { files?: Record<string, unknown> })
    : undefined;
  const files = manifest?.files ?? {};
  const ok =
    job.model_type === 'encoder'
      ? typeof files.onnx_dir === 'string'
      : typeof files.adapter_gguf === 'string' || typeof files.adapter === 'string';
  if (!ok) {
    const needs = job.model_type === 'encoder' ? 'an ONNX export' : 'a LoRA adapter';
    throw new ConflictError(
      `${what} has no servable weights (${needs}); only the final model of a complete job is exported for serving`,
    );
  }
}

/** How a deployment sets thresholds for requests that send none (docs/reference/evaluation.md#calibrated-thresholds). */
export interface ThresholdChoice {
  /** `calibrated`: per-type thresholds from an evaluation of the job; `default`: 0.5 (SPEC); absent: a re-pin keeps what it had. */
  thresholds?: 'default' | 'calibrated' | undefined;
  /** The evaluation to take them from (default: the job's latest complete one with a calibration). */
  evaluation_id?: string | undefined;
}

/** What a deployment reads of an evaluation's `calibration` (scoring/calibration.ts; not imported: scoring's types reach back here through extraction/api.ts). */
type Best = Record<string, { best_threshold: number | null }> | undefined;
interface CalibrationBest {
  per_entity?: Best;
  per_label?: Best;
  per_field?: Best;
  per_relation?: Best;
}
const calibrationOf = (e: Evaluation) => (e.metrics as { calibration?: CalibrationBest } | null)?.calibration;

/** The per-type best thresholds of an evaluation of `job`'s final model (the one named, else its latest). */
async function calibratedThresholds(
  svc: Services,
  teamId: string,
  job: TrainingJob,
  evaluationId: string | undefined,
): Promise<CalibratedThresholds> {
  let evaluation: Evaluation | undefined;
  if (evaluationId !== undefined) {
    const field = ['body', 'evaluation_id'];
    evaluation = isUuid(evaluationId)
      ? await getEvaluation(svc, teamId, evaluationId).catch(notFoundAsUndefined)
      : undefined;
    if (!evaluation) throw ValidationError.field(field, `no evaluation '${evaluationId}' exists`, 'unknown_evaluation');
    if (evaluation.training_job_id !== job.id)
      throw ValidationError.field(
        field,
        `evaluation '${evaluation.id}' scored '${evaluation.base_model}', not training job '${job.id}'`,
      );
    if (evaluation.status !== 'complete')
      throw ValidationError.field(field, `evaluation '${evaluation.id}' is ${evaluation.status}, not complete`);
    if (!calibrationOf(evaluation))
      throw ValidationError.field(
        field,
        `evaluation '${evaluation.id}' has no calibration (its dataset has no entity type, multi-label label, field or relation with a threshold)`,
      );
  } else {
    evaluation = (await listEvaluations(svc, teamId, {})).find(
      (e) => e.training_job_id === job.id && e.status === 'complete' && calibrationOf(e),
    );
    if (!evaluation)
      throw ValidationError.field(
        ['body', 'thresholds'],
        `training job '${job.id}' has no complete evaluation with calibrated thresholds: run one (POST /core/evaluations with base_model '${job.id}') or name one with evaluation_id`,
      );
  }
  const cal = calibrationOf(evaluation)!;
  const best = (m: Best) =>
    Object.fromEntries(
      Object.entries(m ?? {}).flatMap(([k, c]) => (c.best_threshold === null ? [] : [[k, c.best_threshold]])),
    );
  return {
    evaluation_id: evaluation.id,
    entities: best(cal.per_entity),
    labels: best(cal.per_label),
    fields: best(cal.per_field),
    relations: best(cal.per_relation),
  };
}

/** Activates (or re-pins) a job's deployment. Idempotent for the same checkpoint and thresholds. */
export async function deployTrainingJob(
  svc: Services,
  teamId: string,
  jobId: string,
  opts: { checkpoint_id?: string | undefined } & ThresholdChoice = {},
): Promise<TrainingJob> {
  if (opts.evaluation_id !== undefined && opts.thresholds !== 'calibrated')
    throw ValidationError.field(['body', 'evaluation_id'], 'evaluation_id is only used with thresholds: "calibrated"');
  const job = await getTrainingJob(svc, teamId, jobId);
  let checkpointId: string | null;
  let prefix: string;
  if (opts.checkpoint_id !== undefined) {
    const ckpt = isUuid(opts.checkpoint_id)
      ? await getCheckpoint(svc, teamId, opts.checkpoint_id).catch(notFoundAsUndefined)
      : undefined;
    if (!ckpt || ckpt.job_id !== job.id) {
      throw ValidationError.field(
        ['body', 'checkpoint_id'],
        `'${opts.checkpoint_id}' is not a checkpoint of training job '${job.id}' (GET /core/training-jobs/${job.id}/checkpoints lists them)`,
        'unknown_checkpoint',
      );
    }
    checkpointId = ckpt.id;
    prefix = ckpt.blob_prefix;
    await servableWeights(svc, job, prefix, `Checkpoint '${ckpt.id}'`);
  } else {
    if (job.status !== 'complete') {
      throw new ConflictError(
        `Training job '${job.id}' is ${job.status}; only a complete job can be deployed (or name one of its servable checkpoints with checkpoint_id)`,
      );
    }
    checkpointId =
      job.final_checkpoint_id ?? (await listCheckpoints(svc, teamId, job.id)).find((c) => c.is_final)?.id ?? null;
    prefix = modelPrefix(teamId, job.id);
    await servableWeights(svc, job, prefix, `Training job '${job.id}'`);
  }
  const samePin = job.deployment?.checkpoint_id === checkpointId && job.deployment.blob_prefix === prefix;
  let thresholds: CalibratedThresholds | undefined;
  if (opts.thresholds === 'calibrated') {
    // evaluations score the job's final model: its thresholds fit no other checkpoint
    if (prefix !== modelPrefix(teamId, job.id))
      throw ValidationError.field(
        ['body', 'thresholds'],
        `calibrated thresholds come from evaluations of training job '${job.id}''s final model; checkpoint '${checkpointId}' is another`,
      );
    thresholds = await calibratedThresholds(svc, teamId, job, opts.evaluation_id);
  } else if (opts.thresholds === undefined && samePin) thresholds = job.deployment?.thresholds;
  if (samePin && JSON.stringify(job.deployment?.thresholds) === JSON.stringify(thresholds)) return job;
  const deployment: JobDeployment = {
    status: 'active',
    checkpoint_id: checkpointId,
    blob_prefix: prefix,
    deployed_at: svc.now().toISOString(),
    ...(thresholds ? { thresholds } : {}),
  };
  try {
    // conditional on the job still existing: a concurrent delete must not be resurrected
    return await svc.records.update<TrainingJob>(jobItem(teamId, job.id).pk, jobItem(teamId, job.id).sk, {
      set: { deployment },
      condition: ITEM_EXISTS,
    });
  } catch (err) {
    if (err instanceof WriteConflict) throw new NotFoundError(`Training job '${jobId}' not found`);
    throw err;
  }
}

/** Projects (of a team) currently serving a job; a job can't be undeployed or deleted under them. */
export async function projectsServing(svc: Services, teamId: string, jobId: string): Promise<Project[]> {
  return (await listProjects(svc, teamId)).filter((p) => p.active_training_job_id === jobId);
}

export async function undeployTrainingJob(svc: Services, teamId: string, jobId: string): Promise<TrainingJob> {
  const job = await getTrainingJob(svc, teamId, jobId);
  if (!job.deployment) throw new ConflictError(`Training job '${job.id}' has no active inference deployment`);
  const serving = await projectsServing(svc, teamId, job.id);
  if (serving.length) {
    throw new ConflictError(
      `Training job '${job.id}' is serving project${serving.length > 1 ? 's' : ''} ${serving.map((p) => `'${p.name}'`).join(', ')}: promote another model there (or clear the project's deployment) first`,
    );
  }
  return svc.records.update<TrainingJob>(jobItem(teamId, job.id).pk, jobItem(teamId, job.id).sk, {
    remove: ['deployment'],
    condition: ITEM_EXISTS,
  });
}

async function retarget(
  svc: Services,
  teamId: string,
  project: Project,
  action: ProjectDeploymentAction,
  job: TrainingJob | null,
): Promise<{ project: Project; deployment: ProjectDeployment }> {
  const entry: ProjectDeployment = {
    id: newUuid(),
    project_id: project.id,
    action,
    training_job_id: job?.id ?? null,
    checkpoint_id: job?.deployment?.checkpoint_id ?? null,
    previous_training_job_id: project.active_training_job_id,
    created_at: svc.now().toISOString(),
  };
  let updated: Project;
  try {
    updated = await svc.records.update<Project>(
      projectItem(teamId, project.id).pk,
      projectItem(teamId, project.id).sk,
      {
        set: {
          active_training_job_id: entry.training_job_id,
          active_deployment_id: entry.id,
          updated_at: entry.created_at,
        },
        condition:
          project.active_training_job_id === null
            ? [
                { itemExists: true },
                {
                  anyOf: [
                    { attr: 'active_training_job_id', present: false },
                    { attr: 'active_training_job_id', equals: null },
                  ],
                },
              ]
            : [{ itemExists: true }, { attr: 'active_training_job_id', equals: project.active_training_job_id }],
      },
    );
  } catch (err) {
    if (err instanceof WriteConflict)
      throw new ConflictError(`Project '${project.name}' changed while this request ran; read it again and retry`);
    throw err;
  }
  await svc.records.put(projectDeploymentItem(teamId, project.id, entry.created_at, entry.id), entry);
  return { project: updated, deployment: entry };
}

/** Deploys the job (if needed) and points the project at it: every route using the project's name follows. */
export async function promoteToProject(
  svc: Services,
  teamId: string,
  projectIdOrName: string,
  input: { training_job_id: string; checkpoint_id?: string | undefined } & ThresholdChoice,
): Promise<{ project: Project; deployment: ProjectDeployment }> {
  const project = await getProject(svc, teamId, projectIdOrName);
  const known = isUuid(input.training_job_id)
    ? await getTrainingJob(svc, teamId, input.training_job_id).catch(notFoundAsUndefined)
    : undefined;
  if (!known)
    throw ValidationError.field(
      ['body', 'training_job_id'],
      `no training job '${input.training_job_id}' exists`,
      'unknown_training_job',
    );
  const job = await deployTrainingJob(svc, teamId, known.id, {
    checkpoint_id: input.checkpoint_id,
    thresholds: input.thresholds,
    evaluation_id: input.evaluation_id,
  });
  return retarget(svc, teamId, project, 'promote', job);
}

export async function listProjectDeployments(
  svc: Services,
  teamId: string,
  projectIdOrName: string,
): Promise<{ project: Project; deployments: ProjectDeployment[] }> {
  const project = await getProject(svc, teamId, projectIdOrName);
  const items = await svc.records.queryAll<ProjectDeployment>(teamPartition(teamId), {
    beginsWith: projectDeploymentsPrefix(project.id),
    newestFirst: true,
  });
  return { project, deployments: items };
}

/**
 * Points the project back at an earlier deployment: the one named, else the most recent one that
 * served a different job than the current. The job is re-deployed if it was undeployed meanwhile.
 */
export async function rollbackProject(
  svc: Services,
  teamId: string,
  projectIdOrName: string,
  input: { deployment_id?: string | undefined },
): Promise<{ project: Project; deployment: ProjectDeployment }> {
  const { project, deployments } = await listProjectDeployments(svc, teamId, projectIdOrName);
  let target: ProjectDeployment | undefined;
  if (input.deployment_id !== undefined) {
    target = deployments.find((d) => d.id === input.deployment_id);
    if (!target)
      throw ValidationError.field(
        ['body', 'deployment_id'],
        `'${input.deployment_id}' is not in project '${project.name}''s deployment history`,
        'unknown_deployment',
      );
    if (!target.training_job_id)
      throw ValidationError.field(
        ['body', 'deployment_id'],
        `deployment '${target.id}' cleared the project; roll back to one that served a model`,
      );
  } else {
    target = deployments.find(
      (d) => d.training_job_id !== null && d.training_job_id !== project.active_training_job_id,
    );
    if (!target) throw new ConflictError(`Project '${project.name}' has no earlier deployment to roll back to`);
  }
  const job = await getTrainingJob(svc, teamId, target.training_job_id!).catch(notFoundAsUndefined);
  if (!job)
    throw new ConflictError(
      `Training job '${target.training_job_id}' of deployment '${target.id}' was deleted; it can't be served again`,
    );
  const deployed = await deployTrainingJob(
    svc,
    teamId,
    job.id,
    target.checkpoint_id && target.checkpoint_id !== job.final_checkpoint_id
      ? { checkpoint_id: target.checkpoint_id }
      : {},
  );
  return retarget(svc, teamId, project, 'rollback', deployed);
}

/** The project keeps its history but serves nothing (its name answers 409 until the next promotion). */
export async function clearProjectDeployment(
  svc: Services,
  teamId: string,
  projectIdOrName: string,
): Promise<{ project: Project; deployment: ProjectDeployment }> {
  const project = await getProject(svc, teamId, projectIdOrName);
  if (!project.active_training_job_id)
    throw new ConflictError(`Project '${project.name}' has no active inference deployment`);
  return retarget(svc, teamId, project, 'clear', null);
}

/** Deletes a project, its name claim and its deployment history (the jobs stay deployed). */
export async function deleteProjectAndHistory(svc: Services, teamId: string, projectIdOrName: string): Promise<void> {
  const project = await getProject(svc, teamId, projectIdOrName);
  await deleteProject(svc, teamId, project.id);
  const items = await svc.records.queryAll<ProjectDeployment>(teamPartition(teamId), {
    beginsWith: projectDeploymentsPrefix(project.id),
  });
  for (const d of items) {
    const k = projectDeploymentItem(teamId, project.id, d.created_at, d.id);
    await svc.records.delete(k.pk, k.sk);
  }
}

/** What a model identifier routes to. */
export type ServingTarget =
  | { kind: 'catalog'; model: BaseModel; projectId: null; job: null }
  | {
      kind: 'deployment';
      model: BaseModel;
      job: TrainingJob & { deployment: JobDeployment };
      projectId: string | null;
    };

/**
 * docs/reference/decisions.md#model-identifiers: a catalog id or an imported model's name (modelRegistry.ts); a training job id (only while deployed, else 409 "has no
 * active inference deployment"); a project name or id (whatever it serves now). Projects resolve on
 * every inference route, native included.
 */
export async function resolveServingTarget(svc: Services, teamId: string, model: string): Promise<ServingTarget> {
  const base = await findModel(svc, model, teamId);
  if (base) return { kind: 'catalog', model: base, projectId: null, job: null };
  let job: TrainingJob | undefined;
  let projectId: string | null = null;
  if (isUuid(model)) job = await getTrainingJob(svc, teamId, model).catch(notFoundAsUndefined);
  const ftJob = jobIdOfFineTunedModel(model);
  if (ftJob) {
    // an OpenAI fine-tuned model name: the whole name must be this team's job's (another team's is unknown)
    job = await getTrainingJob(svc, teamId, ftJob).catch(notFoundAsUndefined);
    if (!job || fineTunedModelName(job, teamId) !== model)
      throw new NotFoundError(`The model '${model}' does not exist or you do not have access to it`);
  }
  if (!job) {
    const project = await getProject(svc, teamId, model).catch(notFoundAsUndefined);
    if (!project) throw new NotFoundError(`The model '${model}' does not exist or you do not have access to it`);
    if (!project.active_training_job_id)
      throw new ConflictError(
        `Project '${model}' has no active inference deployment: deploy a trained model to it first`,
      );
    job = await getTrainingJob(svc, teamId, project.active_training_job_id).catch(notFoundAsUndefined);
    if (!job)
      throw new ConflictError(`Project '${model}' has no active inference deployment: its training job was deleted`);
    projectId = project.id;
  }
  if (!job.deployment) throw new ConflictError(`Training job '${job.id}' has no active inference deployment`);
  const root = await findModel(svc, job.root_model, teamId);
  if (!root)
    throw new ConflictError(
      `Training job '${job.id}' was trained from '${job.root_model}', which this deployment no longer has (neither in its catalog nor imported)`,
    );
  return { kind: 'deployment', model: root, job: job as TrainingJob & { deployment: JobDeployment }, projectId };
}

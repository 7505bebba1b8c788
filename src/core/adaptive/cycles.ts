/**
 * Adaptive inference cycles (docs/reference/decisions.md#adaptive-inference): one record per attempt to improve a project's
 * deployed encoder from its own traffic. A cycle is started by the schedule or by the caller, runs in
 * the adaptive state machine (workflow.ts), and ends `skipped` (not enough reviewed traffic),
 * `failed`, or `offered` with the candidate's and the baseline's scores on the same held-out traces.
 * Nothing is promoted without the caller: `promote` retargets the project like any deployment.
 */
import { cycleItem, cyclesPrefix, projectItem, teamPartition } from '../recordKeys';
import { ITEM_EXISTS, WriteConflict } from '../ports';
import type { Services } from '../context';
import { promoteToProject, type ProjectDeployment } from '../deployments';
import { ConflictError, ForbiddenError, NotFoundError, PaymentRequiredError, RateLimitError } from '../errors';
import { checkSpendAllowance } from '../usage';
import { newUlid } from '../ids';
import { getProject, type Project } from '../projects';
import { getTeam, type Plan } from '../teams';

export type CycleStatus = 'running' | 'skipped' | 'failed' | 'offered' | 'promoted';
export type CycleStage = 'selecting' | 'preparing_data' | 'training' | 'evaluating' | 'done';

export interface Scores {
  f1: number;
  precision: number;
  recall: number;
}

export interface AdaptiveCycle {
  id: string;
  project_id: string;
  trigger: 'manual' | 'schedule';
  status: CycleStatus;
  stage: CycleStage;
  /** Why a cycle was skipped or failed. */
  reason: string | null;
  /** The training job the project served when the cycle started: what the candidate must beat. */
  baseline_training_job_id: string | null;
  traces: Record<string, number> | null;
  /** Informative traces without feedback, most uncertain first: review these next. */
  review: { inference_id: string; uncertainty: number }[];
  datasets: {
    train: { name: string; version: number | null };
    holdout: { name: string; version: number | null };
  } | null;
  candidate_training_job_id: string | null;
  candidate_evaluation_id: string | null;
  baseline_evaluation_id: string | null;
  comparison: { candidate: Scores; baseline: Scores; delta_f1: number; recommendation: 'promote' | 'keep' } | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** docs/reference/decisions.md#adaptive-inference: included on the Pro, Research and Custom plans, excluded from Free. */
export const ADAPTIVE_PLANS: Plan[] = ['pro', 'research', 'custom'];

const newCycleId = () => `adc_${newUlid()}`;

export async function getCycle(
  svc: Services,
  teamId: string,
  projectId: string,
  cycleId: string,
): Promise<AdaptiveCycle> {
  const item = cycleItem(teamId, projectId, cycleId);
  const cycle = /^adc_[0-9A-HJKMNP-TV-Z]{26}$/.test(cycleId)
    ? await svc.records.get<AdaptiveCycle>(item.pk, item.sk)
    : undefined;
  if (!cycle) throw new NotFoundError(`Adaptive cycle '${cycleId}' not found in this project`);
  return cycle;
}

export async function updateCycle(
  svc: Services,
  teamId: string,
  cycle: Pick<AdaptiveCycle, 'project_id' | 'id'>,
  set: Partial<AdaptiveCycle>,
): Promise<AdaptiveCycle> {
  const item = cycleItem(teamId, cycle.project_id, cycle.id);
  return svc.records.update<AdaptiveCycle>(item.pk, item.sk, {
    set: { ...set, updated_at: svc.now().toISOString() },
    condition: ITEM_EXISTS,
  });
}

/** A project's cycles by its id, newest first (cycle ids are ULIDs). */
const cyclesOf = (svc: Services, teamId: string, projectId: string) =>
  svc.records.queryAll<AdaptiveCycle>(teamPartition(teamId), {
    beginsWith: cyclesPrefix(projectId),
    newestFirst: true,
  });

export async function listCycles(
  svc: Services,
  teamId: string,
  projectIdOrName: string,
): Promise<{ project: Project; cycles: AdaptiveCycle[] }> {
  const project = await getProject(svc, teamId, projectIdOrName);
  return { project, cycles: await cyclesOf(svc, teamId, project.id) };
}

/** The last cycle that got as far as training: its start is when "new feedback" begins counting. */
export async function lastTrainedCycle(
  svc: Services,
  teamId: string,
  projectId: string,
  except: string,
): Promise<AdaptiveCycle | undefined> {
  return (await cyclesOf(svc, teamId, projectId)).find((c) => c.id !== except && c.candidate_training_job_id !== null);
}

export async function assertPlanIncludesAdaptive(svc: Services, teamId: string): Promise<void> {
  const team = await getTeam(svc, teamId);
  if (!ADAPTIVE_PLANS.includes(team.plan)) {
    throw new ForbiddenError(
      `Adaptive inference is not included on the ${team.plan} plan (it is on ${ADAPTIVE_PLANS.join(', ')})`,
    );
  }
}

/**
 * Records a new cycle and claims the project for it (one running cycle per project, by a conditional
 * write on the project record). Returns undefined when another cycle holds the project.
 */
export async function claimCycle(
  svc: Services,
  teamId: string,
  project: Project,
  trigger: AdaptiveCycle['trigger'],
): Promise<AdaptiveCycle | undefined> {
  const now = svc.now().toISOString();
  const cycle: AdaptiveCycle = {
    id: newCycleId(),
    project_id: project.id,
    trigger,
    status: 'running',
    stage: 'selecting',
    reason: null,
    baseline_training_job_id: project.active_training_job_id,
    traces: null,
    review: [],
    datasets: null,
    candidate_training_job_id: null,
    candidate_evaluation_id: null,
    baseline_evaluation_id: null,
    comparison: null,
    created_at: now,
    updated_at: now,
    finished_at: null,
  };
  const p = projectItem(teamId, project.id);
  try {
    await svc.records.update(p.pk, p.sk, {
      set: { adaptive_cycle_id: cycle.id },
      condition: [
        { itemExists: true },
        {
          anyOf: [
            { attr: 'adaptive_cycle_id', present: false },
            { attr: 'adaptive_cycle_id', equals: null },
          ],
        },
      ],
    });
  } catch (err) {
    if (err instanceof WriteConflict) return undefined;
    throw err;
  }
  await svc.records.put(cycleItem(teamId, project.id, cycle.id), cycle, { ifAbsent: true });
  return cycle;
}

/** Ends a cycle and frees its project for the next one. */
export async function finishCycle(
  svc: Services,
  teamId: string,
  cycle: AdaptiveCycle,
  set: Partial<AdaptiveCycle>,
): Promise<AdaptiveCycle> {
  const done = await updateCycle(svc, teamId, cycle, { ...set, stage: 'done', finished_at: svc.now().toISOString() });
  await releaseProject(svc, teamId, cycle);
  return done;
}

/** Clears the project's claim if this cycle holds it (idempotent: a retried task, or a project since deleted). */
export async function releaseProject(
  svc: Services,
  teamId: string,
  cycle: Pick<AdaptiveCycle, 'project_id' | 'id'>,
): Promise<void> {
  const p = projectItem(teamId, cycle.project_id);
  await svc.records
    .update(p.pk, p.sk, { remove: ['adaptive_cycle_id'], condition: [{ attr: 'adaptive_cycle_id', equals: cycle.id }] })
    .catch((err: unknown) => {
      if (!(err instanceof WriteConflict)) throw err;
    });
}

/**
 * The reason a cycle is skipped when the team's compute is refused for money: out of credit (402) or
 * past the daily spending cap (429 with that reason). Undefined for any other error.
 */
export function spendRefusal(err: unknown): string | undefined {
  if (err instanceof PaymentRequiredError) return `${err.message} (402): a cycle trains and evaluates, which is billed`;
  if (err instanceof RateLimitError && err.headers['x-ratelimit-reason'] === 'daily_spend_cap_exceeded')
    return `${err.message} (429 daily_spend_cap_exceeded)`;
  return undefined;
}

/** `POST /projects/{id}/adaptive-cycles`: run one cycle now instead of waiting for the schedule. */
export async function startCycle(svc: Services, teamId: string, projectIdOrName: string): Promise<AdaptiveCycle> {
  await assertPlanIncludesAdaptive(svc, teamId);
  const project = await getProject(svc, teamId, projectIdOrName);
  // a cycle trains and evaluates (billed): refused like any compute, before a cycle is recorded
  await checkSpendAllowance(svc, teamId);
  if (!project.active_training_job_id) {
    throw new ConflictError(
      `Project '${project.name}' has no deployed model; adaptive cycles improve a deployed training job (POST /projects/${project.name}/deployments first)`,
    );
  }
  const cycle = await claimCycle(svc, teamId, project, 'manual');
  if (!cycle) {
    const running = project.adaptive_cycle_id;
    throw new ConflictError(
      `Project '${project.name}' already has a running adaptive cycle${running ? ` (${running})` : ''}; wait for it to finish`,
    );
  }
  try {
    if (!svc.workflows) throw new Error('this deployment has no workflow runner configured');
    await svc.workflows.start('adaptive', `adaptive-${cycle.id}`, {
      trigger: 'manual',
      teamId,
      projectId: project.id,
      cycleId: cycle.id,
    });
  } catch (err) {
    return finishCycle(svc, teamId, cycle, {
      status: 'failed',
      reason: `could not start the adaptive workflow: ${(err as Error).message}`,
    });
  }
  return cycle;
}

/** `POST /projects/{id}/adaptive-cycles/{cycle}/promote`: the caller accepts the offered candidate. */
export async function promoteCycle(
  svc: Services,
  teamId: string,
  projectIdOrName: string,
  cycleId: string,
): Promise<{ cycle: AdaptiveCycle; deployment: ProjectDeployment }> {
  const project = await getProject(svc, teamId, projectIdOrName);
  const cycle = await getCycle(svc, teamId, project.id, cycleId);
  if (cycle.status !== 'offered' || !cycle.candidate_training_job_id) {
    throw new ConflictError(
      `Adaptive cycle '${cycle.id}' is ${cycle.status}; only an offered candidate can be promoted`,
    );
  }
  const { deployment } = await promoteToProject(svc, teamId, project.id, {
    training_job_id: cycle.candidate_training_job_id,
  });
  const promoted = await updateCycle(svc, teamId, cycle, { status: 'promoted' });
  return { cycle: promoted, deployment };
}

/**
 * The adaptive loop's task functions (lib/workflows/definitions.ts `adaptive`):
 * SelectProjects → per project: SelectTraces → BuildDataset → poll the candidate's training →
 * StartEvaluations (candidate and baseline on the same held-out traces) → poll → OfferPromotion,
 * any failure → RecordProjectFailure. Every function reads and writes the cycle record, so a
 * retried or resumed task picks up where the last attempt stopped.
 */
import type { Services } from '../context';
import { reserveProducedVersion, submitProducedRows, waitForProcessing } from '../datasets/produced';
import { notFoundAsUndefined } from '../errors';
import { createEvaluation, getEvaluation } from '../evaluations';
import { listInferences } from '../inferences';
import { getProject, listProjects, type Project } from '../projects';
import { listTeams } from '../teams';
import { createTrainingJob, getTrainingJob, headlineMetrics, type TrainingJob } from '../trainingJobs';
import { failureReason, type TaskTable, type WorkflowError } from '../workflowTasks';
import {
  ADAPTIVE_PLANS,
  claimCycle,
  finishCycle,
  getCycle,
  lastTrainedCycle,
  releaseProject,
  spendRefusal,
  updateCycle,
  type AdaptiveCycle,
  type Scores,
} from './cycles';
import { checkSpendAllowance } from '../usage';
import { examplesFromTrace, selectExamples } from './examples';

/** Newest traces a cycle reads (DynamoDB pages of the project's stored inferences). */
export const MAX_TRACES = 5000;

export interface CycleRef {
  teamId: string;
  projectId: string;
  cycleId: string;
}
type State = { project: CycleRef; error?: WorkflowError };

/** Dataset names: one train and one holdout dataset per project, a new version per cycle. */
export const adaptiveDatasetNames = (project: Project) => {
  const stem = `adaptive-${project.name.replace(/[^A-Za-z0-9._-]/g, '-').slice(0, 64)}`;
  return { train: `${stem}-train`, holdout: `${stem}-holdout` };
};

const jsonl = (rows: unknown[]) => `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;

/** `adaptive.projects`: the schedule claims a cycle for every deployed project of an eligible team; a manual run brings its own. */
export async function selectProjects(
  svc: Services,
  input: { trigger?: string; teamId?: string; projectId?: string; cycleId?: string },
): Promise<{ projects: CycleRef[] }> {
  if (input.cycleId && input.teamId && input.projectId) {
    const cycle = await getCycle(svc, input.teamId, input.projectId, input.cycleId);
    if (cycle.status === 'running')
      return { projects: [{ teamId: input.teamId, projectId: input.projectId, cycleId: cycle.id }] };
    await releaseProject(svc, input.teamId, cycle); // finished, but stopped before freeing its project
    return { projects: [] };
  }
  const projects: CycleRef[] = [];
  for (const team of await listTeams(svc)) {
    if (!ADAPTIVE_PLANS.includes(team.plan)) continue;
    // a team out of credit or past its daily cap trains nothing: each deployed project's cycle is skipped, saying why
    const refused = await checkSpendAllowance(svc, team.id).then(
      () => undefined,
      (err: unknown) => spendRefusal(err) ?? Promise.reject(err),
    );
    for (const project of await listProjects(svc, team.id)) {
      if (!project.active_training_job_id) continue;
      const cycle = await claimCycle(svc, team.id, project, 'schedule');
      if (!cycle) continue;
      if (refused) await finishCycle(svc, team.id, cycle, { status: 'skipped', reason: refused });
      else projects.push({ teamId: team.id, projectId: project.id, cycleId: cycle.id });
    }
  }
  return { projects };
}

async function baselineJob(svc: Services, teamId: string, cycle: AdaptiveCycle): Promise<TrainingJob | string> {
  if (!cycle.baseline_training_job_id) return 'the project had no deployed model when the cycle started';
  const job = await getTrainingJob(svc, teamId, cycle.baseline_training_job_id).catch(notFoundAsUndefined);
  if (!job) return `the deployed training job ${cycle.baseline_training_job_id} no longer exists`;
  if (job.model_type !== 'encoder')
    return 'the project serves a decoder; the adaptive loop improves encoder (extraction) models from scored traces';
  if (job.status !== 'complete' || !job.final_checkpoint_id)
    return `the deployed training job ${job.id} has no final checkpoint to continue from`;
  return job;
}

/**
 * `adaptive.traces`: reads the project's traces, decides whether there is enough new reviewed data,
 * and if so writes the train and holdout rows as new dataset versions (processed like uploads).
 */
export async function selectTraces(svc: Services, s: State): Promise<{ enough: boolean }> {
  const { teamId } = s.project;
  const cycle = await getCycle(svc, teamId, s.project.projectId, s.project.cycleId);
  if (cycle.status !== 'running') return { enough: false };
  if (cycle.datasets) return { enough: true }; // a resumed cycle: the data is already chosen
  const project = await getProject(svc, teamId, cycle.project_id);
  const baseline = await baselineJob(svc, teamId, cycle);
  if (typeof baseline === 'string') {
    await finishCycle(svc, teamId, cycle, { status: 'skipped', reason: baseline });
    return { enough: false };
  }
  const { items } = await listInferences(svc, teamId, { limit: MAX_TRACES, offset: 0, project_id: project.id });
  const previous = await lastTrainedCycle(svc, teamId, project.id, cycle.id);
  const selection = selectExamples(
    items.length,
    items.flatMap((r) => examplesFromTrace(r)),
    previous?.created_at ?? null,
  );
  const { counts } = selection;
  const minimum = svc.config.adaptiveMinExamples;
  const reason =
    counts.gold < minimum
      ? `${counts.gold} reviewed traces (inferences with feedback) for this project; a cycle needs ${minimum}. Give feedback on the traces in \`review\` (the ones the model was least sure about).`
      : counts.new_gold === 0
        ? `no new feedback since cycle ${previous!.id}; the candidate would learn nothing new`
        : counts.holdout === 0 || selection.train.length === 0
          ? 'the reviewed traces could not be split into training and held-out rows'
          : null;
  if (reason) {
    await finishCycle(svc, teamId, cycle, { status: 'skipped', reason, traces: counts, review: selection.review });
    return { enough: false };
  }
  const names = adaptiveDatasetNames(project);
  const datasets = {
    train: { name: names.train, version: await reserveProducedVersion(svc, teamId, names.train, 'traces.jsonl') },
    holdout: { name: names.holdout, version: await reserveProducedVersion(svc, teamId, names.holdout, 'traces.jsonl') },
  };
  // remember the versions before writing them: a retry must not reserve two more
  await updateCycle(svc, teamId, cycle, {
    stage: 'preparing_data',
    traces: counts,
    review: selection.review,
    datasets,
  });
  await submitProducedRows(svc, teamId, datasets.train.name, datasets.train.version, jsonl(selection.train));
  await submitProducedRows(svc, teamId, datasets.holdout.name, datasets.holdout.version, jsonl(selection.holdout));
  return { enough: true };
}

/** `adaptive.dataset`: once both versions are ready, starts the candidate: the deployed job, continued on the new rows. */
export async function startCandidate(svc: Services, s: State): Promise<{ jobId: string }> {
  const { teamId } = s.project;
  const cycle = await getCycle(svc, teamId, s.project.projectId, s.project.cycleId);
  if (cycle.candidate_training_job_id) return { jobId: cycle.candidate_training_job_id };
  if (!cycle.datasets?.train.version || !cycle.datasets.holdout.version)
    throw new Error('the cycle has no datasets yet');
  for (const d of [cycle.datasets.train, cycle.datasets.holdout]) {
    const v = await waitForProcessing(svc, teamId, d.name, d.version!);
    if (v.status === 'failed')
      throw new Error(
        `dataset '${d.name}' version ${d.version} failed validation: ${v.errors
          .slice(0, 3)
          .map((e) => e.message)
          .join('; ')}`,
      );
  }
  const baseline = await baselineJob(svc, teamId, cycle);
  if (typeof baseline === 'string') throw new Error(baseline);
  const project = await getProject(svc, teamId, cycle.project_id);
  const job = await skipIfRefused(svc, teamId, cycle, () =>
    createTrainingJob(svc, teamId, {
      model_name: `${project.name}-adaptive-${cycle.created_at.slice(0, 10)}`,
      base_model: baseline.final_checkpoint_id!,
      datasets: [{ name: cycle.datasets!.train.name, version: cycle.datasets!.train.version! }],
      training_type: baseline.training_type,
      // a baseline whose epochs the trainer sized from its data lets the candidate's be sized from its own
      ...(baseline.epochs_from_data ? {} : { nr_epochs: baseline.nr_epochs }),
      learning_rate: baseline.learning_rate,
    }),
  );
  await updateCycle(svc, teamId, cycle, { stage: 'training', candidate_training_job_id: job.id });
  return { jobId: job.id };
}

/**
 * Creates the cycle's compute; when the team ran out of credit or reached its daily cap meanwhile,
 * the cycle ends `skipped` with that reason (the error still ends the workflow's run).
 */
async function skipIfRefused<T>(
  svc: Services,
  teamId: string,
  cycle: AdaptiveCycle,
  create: () => Promise<T>,
): Promise<T> {
  try {
    return await create();
  } catch (err) {
    const reason = spendRefusal(err);
    if (reason) await finishCycle(svc, teamId, cycle, { status: 'skipped', reason });
    throw err;
  }
}

/** `adaptive.training`: polled by the state machine; a failed or stopped candidate fails the cycle. */
export async function checkTraining(svc: Services, s: State): Promise<{ done: boolean; status: string }> {
  const cycle = await getCycle(svc, s.project.teamId, s.project.projectId, s.project.cycleId);
  if (!cycle.candidate_training_job_id) throw new Error(`cycle ${cycle.id} has no candidate training job yet`);
  const job = await getTrainingJob(svc, s.project.teamId, cycle.candidate_training_job_id);
  if (job.status === 'failed' || job.status === 'stopped')
    throw new Error(`candidate training job ${job.id} ${job.status}${job.error ? `: ${job.error}` : ''}`);
  return { done: job.status === 'complete', status: job.status };
}

/** `adaptive.evaluate`: the candidate and the baseline, scored on the same held-out traces. */
export async function startEvaluations(svc: Services, s: State): Promise<{ candidate: string; baseline: string }> {
  const { teamId } = s.project;
  const cycle = await getCycle(svc, teamId, s.project.projectId, s.project.cycleId);
  if (cycle.candidate_evaluation_id && cycle.baseline_evaluation_id)
    return { candidate: cycle.candidate_evaluation_id, baseline: cycle.baseline_evaluation_id };
  const holdout = cycle.datasets!.holdout;
  const evaluate = (jobId: string) =>
    skipIfRefused(svc, teamId, cycle, () =>
      createEvaluation(svc, teamId, {
        base_model: jobId,
        dataset_name: holdout.name,
        dataset_version: holdout.version!,
        project_id: cycle.project_id,
      }),
    );
  const candidate = cycle.candidate_evaluation_id ?? (await evaluate(cycle.candidate_training_job_id!)).id;
  await updateCycle(svc, teamId, cycle, { candidate_evaluation_id: candidate });
  const baseline = (await evaluate(cycle.baseline_training_job_id!)).id;
  await updateCycle(svc, teamId, cycle, { stage: 'evaluating', baseline_evaluation_id: baseline });
  return { candidate, baseline };
}

async function scoresOf(
  svc: Services,
  teamId: string,
  evaluationId: string,
  what: string,
): Promise<Scores | undefined> {
  const evaluation = await getEvaluation(svc, teamId, evaluationId);
  if (evaluation.status === 'failed')
    throw new Error(`the ${what} evaluation ${evaluation.id} failed: ${evaluation.error ?? 'no reason recorded'}`);
  if (evaluation.status !== 'complete') return undefined;
  const scores = headlineMetrics(evaluation.metrics);
  if (!scores) throw new Error(`the ${what} evaluation ${evaluation.id} has no f1/precision/recall`);
  return scores;
}

/** `adaptive.scores`: polled until both evaluations are complete. */
export async function checkEvaluations(svc: Services, s: State): Promise<{ done: boolean }> {
  const cycle = await getCycle(svc, s.project.teamId, s.project.projectId, s.project.cycleId);
  const candidate = await scoresOf(svc, s.project.teamId, cycle.candidate_evaluation_id!, 'candidate');
  const baseline = await scoresOf(svc, s.project.teamId, cycle.baseline_evaluation_id!, 'baseline');
  return { done: candidate !== undefined && baseline !== undefined };
}

/** `adaptive.offer`: records the comparison; the caller decides whether to promote. */
export async function offerCandidate(svc: Services, s: State): Promise<{ status: string; recommendation: string }> {
  const { teamId } = s.project;
  const cycle = await getCycle(svc, teamId, s.project.projectId, s.project.cycleId);
  if (cycle.status !== 'running')
    return { status: cycle.status, recommendation: cycle.comparison?.recommendation ?? 'keep' };
  const candidate = (await scoresOf(svc, teamId, cycle.candidate_evaluation_id!, 'candidate'))!;
  const baseline = (await scoresOf(svc, teamId, cycle.baseline_evaluation_id!, 'baseline'))!;
  const delta = Math.round((candidate.f1 - baseline.f1) * 1e6) / 1e6;
  const comparison = {
    candidate,
    baseline,
    delta_f1: delta,
    recommendation: delta > 0 ? ('promote' as const) : ('keep' as const),
  };
  await finishCycle(svc, teamId, cycle, { status: 'offered', comparison });
  return { status: 'offered', recommendation: comparison.recommendation };
}

/** `adaptive.failed`: the reason goes on the cycle, and the project is free for the next one. */
export async function recordCycleFailure(svc: Services, s: State): Promise<{ status: string }> {
  const cycle = await getCycle(svc, s.project.teamId, s.project.projectId, s.project.cycleId).catch(
    notFoundAsUndefined,
  );
  if (cycle?.status !== 'running') return { status: cycle?.status ?? 'deleted' };
  await finishCycle(svc, s.project.teamId, cycle, {
    status: 'failed',
    reason: failureReason(s.error, 'the adaptive workflow failed'),
  });
  return { status: 'failed' };
}

export function adaptiveTasks(svc: Services): TaskTable {
  return {
    'adaptive.projects': (input: Parameters<typeof selectProjects>[1]) => selectProjects(svc, input),
    'adaptive.traces': (s: State) => selectTraces(svc, s),
    'adaptive.dataset': (s: State) => startCandidate(svc, s),
    'adaptive.training': (s: State) => checkTraining(svc, s),
    'adaptive.evaluate': (s: State) => startEvaluations(svc, s),
    'adaptive.scores': (s: State) => checkEvaluations(svc, s),
    'adaptive.offer': (s: State) => offerCandidate(svc, s),
    'adaptive.failed': (s: State) => recordCycleFailure(svc, s),
  } as TaskTable;
}

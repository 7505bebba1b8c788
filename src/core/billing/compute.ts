/**
 * Compute is billed like inference (README "Billing"): checked before it starts — 402 out of credit,
 * 429 past the daily cap (`checkSpendAllowance`, as inference), 429 `concurrent_jobs` over the
 * plan's running cap (computeSlots.ts) — and charged into the same ledger (`recordBilledUsage`:
 * usage counters by model and endpoint, the per-request list, the prepaid balance, the daily cap,
 * finance's EMF) by the one conditional transition that ends it, so a repeated completion, a
 * retried workflow task or a replayed event never bills twice.
 *
 * Units: a training job's seconds at its instance type's price per minute; an evaluation's input
 * tokens at the encoder token price (the serving engine over its rows: the same work as
 * inference); a generation job's decoder tokens at the decoder model's prices, plus its NER
 * labelling at the encoder price. Prices: prices.ts.
 */
import type { Services } from '../context';
import { acquireComputeSlot, type ComputeKind } from '../computeSlots';
import { jobItem } from '../recordKeys';
import { checkSpendAllowance, recordBilledUsage } from '../usage';
import { TRAINING_ENDPOINT } from './metricNames';
import { decoderTokensCostMicros, encoderTokensCostMicros, trainingCostMicros } from './prices';

export const EVALUATIONS_ENDPOINT = '/core/evaluations';
export const GENERATE_ENDPOINT = '/generate';

/**
 * Before any record of new compute is written: the spend allowance (402 / spend-cap 429, the same
 * errors and headers as inference), then one of the team's slots for it (429 `concurrent_jobs`).
 * The caller releases the slot if its create fails after this.
 */
export async function admitCompute(svc: Services, teamId: string, kind: ComputeKind, holderId: string): Promise<void> {
  await checkSpendAllowance(svc, teamId);
  await acquireComputeSlot(svc, teamId, kind, holderId);
}

/** What billing reads of a finished training job (trainingJobs.ts `TrainingJob`). */
export interface BillableTrainingJob {
  id: string;
  base_model: string;
  root_model?: string;
  started_at: string | null;
  finished_at?: string | null;
  /** Where it ran: a SageMaker type (set by `training.prepare`) or `local` (the local runner). */
  instance_type?: string;
  /** The seconds the platform reports it trained (SageMaker's TrainingTimeInSeconds); else the record's wall time. */
  compute_seconds?: number;
}

/** Where the job ran: its own record's type, else the process's (`svc.config.trainingInstanceType`: `local`, or the stage's SageMaker type). */
export const trainingInstanceType = (job: Pick<BillableTrainingJob, 'instance_type'>, fallback: string): string =>
  job.instance_type ?? fallback;

export function trainingSeconds(job: BillableTrainingJob): number {
  if (typeof job.compute_seconds === 'number') return job.compute_seconds;
  if (!job.started_at || !job.finished_at) return 0; // never ran (stopped or failed while requested)
  return Math.max(0, Date.parse(job.finished_at) - Date.parse(job.started_at)) / 1000;
}

/** A finished training job's charge: one row, keyed by the job id. Nothing when it never ran. */
export async function billTrainingJob(svc: Services, teamId: string, job: BillableTrainingJob): Promise<void> {
  const seconds = trainingSeconds(job);
  if (seconds <= 0) return;
  await recordBilledUsage(svc, teamId, 'training_create', {
    inference_id: job.id,
    endpoint: TRAINING_ENDPOINT,
    model: job.id,
    base_model: job.root_model ?? job.base_model,
    input_tokens: 0,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cost_usd_micros: trainingCostMicros(trainingInstanceType(job, svc.config.trainingInstanceType), seconds),
  });
}

/** Per-shard usage notes, written as each shard finishes (a retried shard overwrites its own): what the end bills. */
export const evaluationUsagePrefix = (teamId: string, evaluationId: string) =>
  `evaluations/${teamId}/${evaluationId}/usage/`;
export const generationUsagePrefix = (teamId: string, jobId: string) => `generation/${teamId}/${jobId}/usage/`;

export interface EvaluationShardUsage {
  input_tokens: number;
}

export interface GenerationShardUsage {
  /** The decoder that wrote the texts, and what it read and wrote. */
  model: string;
  input_tokens: number;
  output_tokens: number;
  /** The encoder that labelled NER rows (null for other tasks), and its input tokens. */
  label_model: string | null;
  label_tokens: number;
}

async function readNotes<T>(svc: Services, prefix: string): Promise<T[]> {
  const keys = (await svc.blobs.list(prefix)).filter((k) => k.endsWith('.json'));
  return Promise.all(keys.map(async (k) => JSON.parse(await svc.blobs.getText(k)) as T));
}

/**
 * A finished evaluation's charge: the engine's input tokens over every shard that was scored (a
 * failed evaluation pays for the shards it ran), at the encoder price, keyed by the evaluation id.
 */
export async function billEvaluation(
  svc: Services,
  teamId: string,
  evaluation: { id: string; base_model: string; training_job_id: string | null },
): Promise<void> {
  const tokens = (await readNotes<EvaluationShardUsage>(svc, evaluationUsagePrefix(teamId, evaluation.id))).reduce(
    (n, u) => n + (u.input_tokens ?? 0),
    0,
  );
  if (tokens <= 0) return;
  let root = evaluation.base_model;
  if (evaluation.training_job_id) {
    const key = jobItem(teamId, evaluation.training_job_id);
    root = (await svc.records.get<{ root_model?: string }>(key.pk, key.sk))?.root_model ?? root;
  }
  await recordBilledUsage(svc, teamId, 'default', {
    inference_id: evaluation.id,
    endpoint: EVALUATIONS_ENDPOINT,
    model: evaluation.base_model,
    base_model: root,
    input_tokens: tokens,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cost_usd_micros: encoderTokensCostMicros(tokens),
  });
}

/**
 * A finished generation job's charge, over every shard that ran: one row per model — the decoder's
 * tokens at its prices (`<job id>`), and the NER labelling at the encoder price (`<job id>#labels`).
 */
export async function billGeneration(svc: Services, teamId: string, jobId: string): Promise<void> {
  const notes = await readNotes<GenerationShardUsage>(svc, generationUsagePrefix(teamId, jobId));
  const text = new Map<string, { input: number; output: number }>();
  const labels = new Map<string, number>();
  for (const u of notes) {
    const t = text.get(u.model) ?? { input: 0, output: 0 };
    text.set(u.model, { input: t.input + u.input_tokens, output: t.output + u.output_tokens });
    if (u.label_model && u.label_tokens) labels.set(u.label_model, (labels.get(u.label_model) ?? 0) + u.label_tokens);
  }
  const row = (suffix: string, model: string, input: number, output: number, cost: number) =>
    recordBilledUsage(svc, teamId, 'generate', {
      inference_id: `${jobId}${suffix}`,
      endpoint: GENERATE_ENDPOINT,
      model,
      base_model: model,
      input_tokens: input,
      output_tokens: output,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      cost_usd_micros: cost,
    });
  // one decoder and one labeller per deployment; a model changed mid-job gets a row of its own
  for (const [i, [model, t]] of [...text].entries()) {
    if (t.input + t.output > 0)
      await row(
        i === 0 ? '' : `#${model}`,
        model,
        t.input,
        t.output,
        decoderTokensCostMicros(model, t.input, t.output),
      );
  }
  for (const [i, [model, tokens]] of [...labels].entries())
    await row(i === 0 ? '#labels' : `#labels#${model}`, model, tokens, 0, encoderTokensCostMicros(tokens));
}

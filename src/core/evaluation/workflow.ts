/**
 * Running an evaluation: the task functions of the evaluation state machine
 * (lib/workflows/definitions.ts: PrepareEvaluation → EvaluateShards (Map) → AggregateEvaluation,
 * failures → MarkEvaluationFailed). Local mode runs that ASL in-process; on AWS Step Functions
 * calls the workflow Lambda, which forwards shards to the encoder service (the only place with
 * the engine). Every function is idempotent on its input, so Step Functions retries are safe.
 */
import { createInterface } from 'node:readline';
import type { Services } from '../context';
import { getVersion, rowsKey, type DatasetVersion } from '../datasets/service';
import type { NormalizedRow } from '../datasets/rows';
import { formatResult, toEncoderSchema, type SchemaInput } from '../extraction/api';
import type { ResolvedEncoder } from '../extraction/runtime';
import { cutResult } from '../extraction/thresholds';
import type { ClassificationRoute, EncoderResult } from '../extraction/types';
import { ConflictError } from '../errors';
import { baseModelPrefix } from '../modelLayout';
import { requireRuntime } from '../models';
import { modelPrefix } from '../training/artifacts';
import { getTrainingJob } from '../trainingJobs';
import { finishEvaluation, getEvaluation, type Evaluation } from '../evaluations';
import { evaluationUsagePrefix, type EvaluationShardUsage } from '../billing/compute';
import { evaluationItem } from '../recordKeys';
import { failureReason, type TaskTable, type WorkflowError } from '../workflowTasks';
import {
  emptyCounts,
  evaluationSchemaFor,
  finalizeMetrics,
  mergeCounts,
  routeCounts,
  scoreRow,
  scoreRowCurve,
  THRESHOLD_GRID,
  type DatasetVocabulary,
  type EncoderPrediction,
  type EvaluationCounts,
  type EvaluationMetrics,
} from './scoring';

/** Rows per Map item: small enough for a 15-minute task on CPU, large enough to batch well. */
export const SHARD_ROWS = 256;
/** Texts per engine call inside a shard. */
const BATCH = 16;
/** The threshold evaluations run at: the API default, i.e. what users get without tuning. */
export const EVALUATION_THRESHOLD = 0.5;

export interface Shard {
  offset: number;
  count: number;
}

/** The serving engine, wherever it runs (in-process locally; the encoder service on AWS). */
export interface EvaluationPredictor {
  /** Predictions in the order of `texts`, the engine's input tokens (what the work is billed by) and which head answered each classification task. */
  predict(
    model: ResolvedEncoder,
    texts: string[],
    schema: SchemaInput,
    threshold: number,
    grid?: readonly number[],
  ): Promise<Predicted>;
}

/** `predictions` at the threshold asked; with a `grid`, `cuts`: per text, its predictions at each grid threshold. */
export interface Predicted {
  predictions: EncoderPrediction[];
  inputTokens: number;
  routes: Record<string, ClassificationRoute>;
  cuts?: EncoderPrediction[][];
}

/**
 * The engine in this process (local mode, and the encoder service on ECS). One instance serves one
 * task run: the model's files are checked against the store once, not for every batch.
 */
export class InProcessPredictor implements EvaluationPredictor {
  private readonly models = new Map<string, Promise<string>>();
  private readonly schemas = new WeakMap<SchemaInput, ReturnType<typeof toEncoderSchema>>();

  constructor(private readonly svc: Services) {}

  async predict(
    model: ResolvedEncoder,
    texts: string[],
    schema: SchemaInput,
    threshold: number,
    grid?: readonly number[],
  ): Promise<Predicted> {
    const runtime = requireRuntime(this.svc, 'encoder');
    let dir = this.models.get(model.prefix);
    if (!dir) {
      dir = runtime.localDir(this.svc.blobs, model);
      dir.catch(() => this.models.delete(model.prefix));
      this.models.set(model.prefix, dir);
    }
    const engine = await runtime.model(await dir);
    let engineSchema = this.schemas.get(schema);
    if (!engineSchema) {
      engineSchema = toEncoderSchema(schema);
      this.schemas.set(schema, engineSchema);
    }
    const format = (r: EncoderResult) => formatResult(r, engineSchema) as EncoderPrediction;
    if (!grid?.length) {
      const out = await engine.infer(texts, engineSchema, { threshold });
      return { predictions: out.results.map(format), inputTokens: out.inputTokens, routes: out.routes };
    }
    // once at the lowest threshold, then cut at each: every type's candidates below 0.5 are seen
    const out = await engine.infer(texts, engineSchema, { threshold: Math.min(threshold, ...grid) });
    const predictions = out.results.map((r) => format(cutResult(r, engineSchema, threshold)));
    // merging a long text's windows does not commute with a cut (cutResult): its answer at `threshold` is run as such
    const windowed = texts.flatMap((_, i) => (out.chunks[i]! > 1 ? [i] : []));
    let inputTokens = out.inputTokens;
    if (windowed.length) {
      const exact = await engine.infer(
        windowed.map((i) => texts[i]!),
        engineSchema,
        { threshold },
      );
      windowed.forEach((i, j) => {
        predictions[i] = format(exact.results[j]!);
      });
      inputTokens += exact.inputTokens;
    }
    const cuts = out.results.map((r) => grid.map((t) => format(cutResult(r, engineSchema, t))));
    return { predictions, inputTokens, routes: out.routes, cuts };
  }
}

/** The weights an evaluation scores: a catalog model's, or a complete job's final model (no deployment needed). */
export async function evaluationModel(svc: Services, teamId: string, evaluation: Evaluation): Promise<ResolvedEncoder> {
  if (evaluation.training_job_id) {
    const job = await getTrainingJob(svc, teamId, evaluation.training_job_id);
    return {
      type: 'encoder',
      requested: evaluation.base_model,
      baseModel: job.root_model,
      prefix: modelPrefix(teamId, job.id),
      projectId: evaluation.project_id,
      trainingJobId: job.id,
    };
  }
  return {
    type: 'encoder',
    requested: evaluation.base_model,
    baseModel: evaluation.base_model,
    prefix: baseModelPrefix(evaluation.base_model),
    projectId: evaluation.project_id,
    trainingJobId: null,
  };
}

async function datasetOf(svc: Services, teamId: string, evaluation: Evaluation): Promise<DatasetVersion> {
  const version = await getVersion(svc, teamId, evaluation.dataset_name, evaluation.dataset_version);
  if (version.status !== 'ready')
    throw new ConflictError(`Dataset '${version.name}' version ${version.version} is ${version.status}`);
  return version;
}

/** `evaluation.prepare`: splits the dataset into shards. */
export async function prepareEvaluation(
  svc: Services,
  input: { evaluationId: string; teamId: string },
): Promise<{ shards: Shard[]; rows: number }> {
  const evaluation = await getEvaluation(svc, input.teamId, input.evaluationId);
  const version = await datasetOf(svc, input.teamId, evaluation);
  const rows = version.row_count ?? 0;
  const shards: Shard[] = [];
  for (let offset = 0; offset < rows; offset += SHARD_ROWS)
    shards.push({ offset, count: Math.min(SHARD_ROWS, rows - offset) });
  return { shards, rows };
}

async function readShard(svc: Services, key: string, shard: Shard): Promise<NormalizedRow[]> {
  const rows: NormalizedRow[] = [];
  const lines = createInterface({ input: await svc.blobs.stream(key), crlfDelay: Infinity });
  let index = 0;
  try {
    for await (const line of lines) {
      if (!line) continue;
      if (index >= shard.offset + shard.count) break;
      if (index >= shard.offset) rows.push(JSON.parse(line) as NormalizedRow);
      index += 1;
    }
  } finally {
    lines.close();
  }
  return rows;
}

/** Shard counts live in the blob store: a Step Functions state holds at most 256 KB, and confusion maps grow with labels. */
export const shardResultKey = (teamId: string, evaluationId: string, shard: Shard) =>
  `evaluations/${teamId}/${evaluationId}/shards/${String(shard.offset).padStart(10, '0')}.json`;

export interface ShardResult {
  key: string;
  rows: number;
}

/** `evaluation.shard`: scores one shard and stores its counts; returns where (small, whatever the label count). */
export async function evaluateShard(
  svc: Services,
  predictor: EvaluationPredictor,
  input: { evaluationId: string; teamId: string; shard: Shard },
): Promise<ShardResult> {
  const { counts, inputTokens } = await scoreShard(svc, predictor, input);
  const key = shardResultKey(input.teamId, input.evaluationId, input.shard);
  await svc.blobs.put(key, JSON.stringify(counts), 'application/json');
  // what the evaluation is billed for when it ends (a retried shard overwrites its own note: counted once)
  const usage: EvaluationShardUsage = { input_tokens: inputTokens };
  await svc.blobs.put(
    `${evaluationUsagePrefix(input.teamId, input.evaluationId)}${String(input.shard.offset).padStart(10, '0')}.json`,
    JSON.stringify(usage),
    'application/json',
  );
  return { key, rows: counts.rows };
}

/** Runs the engine over one shard's rows and scores them. */
export async function scoreShard(
  svc: Services,
  predictor: EvaluationPredictor,
  input: { evaluationId: string; teamId: string; shard: Shard },
): Promise<{ counts: EvaluationCounts; inputTokens: number }> {
  const evaluation = await getEvaluation(svc, input.teamId, input.evaluationId);
  const version = await datasetOf(svc, input.teamId, evaluation);
  const model = await evaluationModel(svc, input.teamId, evaluation);
  const rows = await readShard(svc, rowsKey(input.teamId, version.name, version.version), input.shard);
  return scoreRows(predictor, model, rows, evaluationSchemaFor(version), input.shard.offset, true);
}

/**
 * Predicts `rows` in batches with the serving engine and scores each against its labels; the engine's
 * input tokens beside. `calibrate`: also the threshold curve of every type (counts' `curve`).
 */
export async function scoreRows(
  predictor: EvaluationPredictor,
  model: ResolvedEncoder,
  rows: NormalizedRow[],
  schema: SchemaInput,
  firstRow = 0,
  calibrate = false,
): Promise<{ counts: EvaluationCounts; inputTokens: number }> {
  let counts = emptyCounts();
  let inputTokens = 0;
  for (let i = 0; i < rows.length; i += BATCH) {
    const batch = rows.slice(i, i + BATCH).filter((r) => typeof r.text === 'string' && r.text.trim() !== '');
    const out = batch.length
      ? await predictor.predict(
          model,
          batch.map((r) => r.text as string),
          schema,
          EVALUATION_THRESHOLD,
          calibrate ? THRESHOLD_GRID : undefined,
        )
      : ({ predictions: [], inputTokens: 0, routes: {} } as Predicted);
    inputTokens += out.inputTokens;
    counts = mergeCounts(counts, { ...emptyCounts(), ...routeCounts(out.routes, batch.length) });
    batch.forEach((row, j) => {
      const one = scoreRow(row, out.predictions[j], { schema, row: firstRow + i + j + 1 });
      const cuts = out.cuts?.[j];
      if (cuts) one.curve = scoreRowCurve(row, cuts, THRESHOLD_GRID, schema);
      counts = mergeCounts(counts, one);
    });
  }
  return { counts, inputTokens };
}

/** The union of several dataset versions' vocabularies (a job may train on several datasets). */
export function mergeVocabularies(versions: DatasetVocabulary[]): DatasetVocabulary {
  const union = (xs: (readonly string[] | undefined)[]) => [...new Set(xs.flatMap((x) => [...(x ?? [])]))];
  // Maps, not objects: structure and field names are the caller's data (`__proto__` is a name like any other, F13)
  const structures = new Map<string, Map<string, { dtype: 'str' | 'list' }>>();
  for (const v of versions) {
    for (const [name, fields] of Object.entries(v.structures ?? {})) {
      const merged = structures.get(name) ?? new Map<string, { dtype: 'str' | 'list' }>();
      structures.set(name, merged);
      for (const [field, spec] of Object.entries(fields)) {
        // a field that is a list anywhere is a list
        if (merged.get(field)?.dtype !== 'list') merged.set(field, spec);
      }
    }
  }
  return {
    task_types: union(versions.map((v) => v.task_types)),
    label_vocabulary: union(versions.map((v) => v.label_vocabulary)),
    entity_types: union(versions.map((v) => v.entity_types)),
    relation_types: union(versions.map((v) => v.relation_types)),
    // fromEntries defines own properties, so no name reaches a prototype
    structures: Object.fromEntries([...structures].map(([name, fields]) => [name, Object.fromEntries(fields)])),
  };
}

/**
 * A complete encoder job's headline metrics, from this evaluator and the serving engine on the
 * held-out rows the trainer wrote (`validation.jsonl` beside the exported model) — so a job's
 * `metrics` and an evaluation of the job mean exactly the same thing. Null when there are none.
 */
export async function validationMetrics(
  svc: Services,
  predictor: EvaluationPredictor,
  teamId: string,
  jobId: string,
): Promise<EvaluationMetrics | null> {
  const job = await getTrainingJob(svc, teamId, jobId);
  const prefix = modelPrefix(teamId, job.id);
  const key = `${prefix}validation.jsonl`;
  if (job.model_type !== 'encoder' || !(await svc.blobs.head(key))) return null;
  const rows = (await svc.blobs.getText(key))
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as NormalizedRow);
  if (!rows.length) return null;
  const vocabulary = mergeVocabularies(
    await Promise.all(job.datasets.map((d) => getVersion(svc, teamId, d.name, d.version))),
  );
  const model: ResolvedEncoder = {
    type: 'encoder',
    requested: job.id,
    baseModel: job.root_model,
    prefix,
    projectId: null,
    trainingJobId: job.id,
  };
  // part of the training job (its minutes include this scoring), not billed on its own
  return finalizeMetrics((await scoreRows(predictor, model, rows, evaluationSchemaFor(vocabulary))).counts);
}

/** `evaluation.aggregate`: merges the shards' counts and completes the record (unless it was deleted meanwhile). */
export async function aggregateEvaluation(
  svc: Services,
  input: { evaluationId: string; teamId: string; shardResults?: ShardResult[] },
): Promise<{ status: string; f1: number }> {
  const key = evaluationItem(input.teamId, input.evaluationId);
  const exists = await svc.records.get<Evaluation>(key.pk, key.sk);
  if (!exists) {
    await svc.blobs.deletePrefix(`evaluations/${input.teamId}/${input.evaluationId}/`);
    return { status: 'deleted', f1: 0 };
  }
  let total = emptyCounts();
  for (const r of input.shardResults ?? []) {
    const prefix = `evaluations/${input.teamId}/${input.evaluationId}/`;
    if (!r.key.startsWith(prefix)) throw new Error(`shard result ${r.key} is not this evaluation's`);
    total = mergeCounts(total, JSON.parse(await svc.blobs.getText(r.key)) as EvaluationCounts);
  }
  const metrics = finalizeMetrics(total);
  // conditional on `running`: a retried aggregate (or one after a failure or a delete) changes and bills nothing
  const done = await finishEvaluation(svc, input.teamId, input.evaluationId, {
    status: 'complete',
    metrics,
    error: null,
  });
  if (!done) {
    const now = await svc.records.get<Evaluation>(key.pk, key.sk);
    return { status: now?.status ?? 'deleted', f1: headlineF1(now?.metrics) };
  }
  return { status: 'complete', f1: metrics.f1 };
}

const headlineF1 = (m: Record<string, unknown> | null | undefined) => (typeof m?.f1 === 'number' ? m.f1 : 0);

/** `evaluation.failed`: the workflow's error becomes the record's `error`. */
export async function recordEvaluationFailure(
  svc: Services,
  input: { evaluationId: string; teamId: string; error?: WorkflowError },
): Promise<{ status: string }> {
  const done = await finishEvaluation(svc, input.teamId, input.evaluationId, {
    status: 'failed',
    error: failureReason(input.error, 'the evaluation workflow failed'),
  });
  if (done) return { status: 'failed' };
  // already ended (a retried failure step) or deleted: left as it is
  const key = evaluationItem(input.teamId, input.evaluationId);
  return { status: (await svc.records.get<Evaluation>(key.pk, key.sk))?.status ?? 'deleted' };
}

type ShardInput = { evaluationId: string; teamId: string; shard: Shard };

/**
 * The evaluation tasks by ASL task name. `shard` is where shards run: in this process
 * (`(i) => evaluateShard(svc, predictor, i)`), or forwarded to the engine's service (workflow Lambda).
 */
export function evaluationTasks(svc: Services, shard: (input: ShardInput) => Promise<ShardResult>): TaskTable {
  return {
    'evaluation.prepare': (input: { evaluationId: string; teamId: string }) => prepareEvaluation(svc, input),
    'evaluation.shard': shard,
    'evaluation.aggregate': (input: { evaluationId: string; teamId: string; shardResults?: ShardResult[] }) =>
      aggregateEvaluation(svc, input),
    'evaluation.failed': (input: { evaluationId: string; teamId: string; error?: WorkflowError }) =>
      recordEvaluationFailure(svc, input),
  } as TaskTable;
}

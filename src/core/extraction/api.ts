/**
 * The encoder extraction API: request validation (docs/reference/decisions.md#schema-object, #inference-semantics),
 * running the engine, the response shape of docs/reference/decisions.md#encoder-response, usage and persistence.
 */
import { z } from 'zod';
import type { Principal, Services } from '../context';
import { PayloadTooLargeError, ValidationError, type FieldError } from '../errors';
import { newInferenceId, storeInference, type InferenceTask } from '../inferences';
import { billedModel, checkSpendAllowance, recordBilledUsage } from '../usage';
import { ENCODER_PRICE_PER_MTOK } from '../billing/prices';
import type { LimitClass } from '../rateLimits';
import {
  EncoderInputError,
  type EncoderResult,
  type EncoderSchema,
  type FieldSpec,
  type FieldValue,
  type Span,
} from './types';
import type { ServableEncoder } from '../models';
import { withCalibratedThresholds } from './thresholds';

/** Documented limits (README "Encoder extraction limits"). */
export const ENCODER_LIMITS = {
  /** Characters (code points) per text; longer texts get 413. Long texts are chunked, never truncated. */
  maxTextChars: 100_000,
  /** Texts per request (`text` array). */
  maxTexts: 64,
  /** Characters over all texts of one request (413 above). */
  maxTotalChars: 400_000,
  /** Entity types + labels + fields + relations over the whole schema. */
  maxLabels: 200,
  /** Characters per label / field / task name, and per description. */
  maxLabelChars: 100,
  maxDescriptionChars: 500,
} as const;

const name = z.string().min(1).max(ENCODER_LIMITS.maxLabelChars);
const description = z.string().max(ENCODER_LIMITS.maxDescriptionChars);

const FieldEntry = z.strictObject({
  name,
  dtype: z.enum(['str', 'list']).optional(),
  choices: z.array(name).min(1).optional(),
  description: description.optional(),
  threshold: z.number().min(0).max(1).optional(),
});

export const SchemaBody = z.strictObject({
  entities: z.union([z.array(name), z.record(name, description)]).optional(),
  classifications: z
    .array(
      z.strictObject({
        task: name,
        labels: z.array(name).min(1),
        multi_label: z.boolean().optional(),
        top_k: z.number().int().min(1).optional(),
        threshold: z.number().min(0).max(1).optional(),
      }),
    )
    .optional(),
  structures: z
    .record(
      name,
      z.strictObject({
        fields: z.array(z.preprocess((f) => (typeof f === 'string' ? { name: f } : f), FieldEntry)).min(1),
      }),
    )
    .optional(),
  relations: z
    .array(
      z.union([
        name,
        z.strictObject({ name, description: description.optional(), threshold: z.number().min(0).max(1).optional() }),
      ]),
    )
    .optional(),
});
export type SchemaInput = z.output<typeof SchemaBody>;

export const EncoderInferenceBody = z.strictObject({
  model_id: z.string().min(1),
  task: z.string().optional(),
  text: z.union([z.string(), z.array(z.string()).min(1)]),
  schema: SchemaBody,
  threshold: z.number().min(0).max(1).optional(),
  store: z.boolean().optional(),
});
export type EncoderInferenceInput = z.output<typeof EncoderInferenceBody>;

function dupes(xs: string[]): string[] {
  const seen = new Set<string>();
  const d = new Set<string>();
  for (const x of xs) (seen.has(x) ? d : seen).add(x);
  return [...d];
}

/** API schema (docs/reference/decisions.md#schema-object) → engine schema, with every semantic check the zod shape cannot express. */
export function toEncoderSchema(
  input: SchemaInput,
  base: (string | number)[] = ['body', 'schema'],
  /** The gliner2 client's route: a `list` field with choices picks every choice over the threshold, as the library does. */
  opts: { listChoices?: boolean } = {},
): EncoderSchema {
  const errors: FieldError[] = [];
  const err = (loc: (string | number)[], msg: string) =>
    errors.push({ loc: [...base, ...loc], msg, type: 'value_error' });
  const out: EncoderSchema = { entities: [], classifications: [], structures: [], relations: [] };
  if (input.entities !== undefined) {
    out.entities = Array.isArray(input.entities)
      ? input.entities.map((n) => ({ name: n }))
      : Object.entries(input.entities).map(([n, d]) => (d ? { name: n, description: d } : { name: n }));
    for (const d of dupes(out.entities.map((e) => e.name))) err(['entities'], `duplicate entity type '${d}'`);
  }
  for (const [i, c] of (input.classifications ?? []).entries()) {
    for (const d of dupes(c.labels)) err(['classifications', i, 'labels'], `duplicate label '${d}'`);
    if (c.top_k !== undefined && c.top_k > c.labels.length)
      err(['classifications', i, 'top_k'], `top_k (${c.top_k}) exceeds the number of labels (${c.labels.length})`);
    out.classifications.push({
      task: c.task,
      labels: c.labels,
      multiLabel: c.multi_label ?? false,
      ...(c.top_k !== undefined ? { topK: c.top_k } : {}),
      ...(c.threshold !== undefined ? { threshold: c.threshold } : {}),
    });
  }
  for (const d of dupes(out.classifications.map((c) => c.task)))
    err(['classifications'], `duplicate classification task '${d}'`);
  for (const [sname, s] of Object.entries(input.structures ?? {})) {
    const fields: FieldSpec[] = s.fields.map((f, j) => {
      if (f.choices && f.dtype === 'list' && !opts.listChoices)
        err(
          ['structures', sname, 'fields', j, 'choices'],
          "choices are only allowed on a 'str' field (one value picked from the list)",
        );
      if (f.choices)
        for (const d of dupes(f.choices)) err(['structures', sname, 'fields', j, 'choices'], `duplicate choice '${d}'`);
      return {
        name: f.name,
        dtype: f.dtype ?? (f.choices ? 'str' : 'list'),
        ...(f.choices ? { choices: f.choices } : {}),
        ...(f.description ? { description: f.description } : {}),
        ...(f.threshold !== undefined ? { threshold: f.threshold } : {}),
      };
    });
    for (const d of dupes(fields.map((f) => f.name))) err(['structures', sname, 'fields'], `duplicate field '${d}'`);
    out.structures.push({ name: sname, fields });
  }
  out.relations = (input.relations ?? []).map((r) =>
    typeof r === 'string'
      ? { name: r }
      : {
          name: r.name,
          ...(r.description ? { description: r.description } : {}),
          ...(r.threshold !== undefined ? { threshold: r.threshold } : {}),
        },
  );
  for (const d of dupes(out.relations.map((r) => r.name))) err(['relations'], `duplicate relation '${d}'`);
  const count =
    out.entities.length +
    out.classifications.reduce((n, c) => n + c.labels.length, 0) +
    out.structures.reduce(
      (n, s) => n + s.fields.length + s.fields.reduce((m, f) => m + (f.choices?.length ?? 0), 0),
      0,
    ) +
    out.relations.length;
  if (count === 0)
    err(
      [],
      'the schema is empty: give at least one of entities, classifications, structures or relations (with at least one label)',
    );
  if (count > ENCODER_LIMITS.maxLabels)
    err(
      [],
      `the schema has ${count} labels, fields and choices in all; at most ${ENCODER_LIMITS.maxLabels} are accepted per request`,
    );
  if (errors.length) throw new ValidationError(errors);
  return out;
}

export function checkTexts(text: string | string[], loc: (string | number)[] = ['body', 'text']): string[] {
  const texts = Array.isArray(text) ? text : [text];
  if (texts.length > ENCODER_LIMITS.maxTexts)
    throw ValidationError.field(loc, `at most ${ENCODER_LIMITS.maxTexts} texts per request`);
  let total = 0;
  texts.forEach((t, i) => {
    const where = Array.isArray(text) ? [...loc, i] : loc;
    if (!t.trim()) throw ValidationError.field(where, 'text must not be empty');
    const n = [...t].length;
    if (n > ENCODER_LIMITS.maxTextChars)
      throw new PayloadTooLargeError(
        `text${Array.isArray(text) ? `[${i}]` : ''} has ${n} characters; at most ${ENCODER_LIMITS.maxTextChars} per text are accepted (split the document)`,
      );
    total += n;
  });
  if (total > ENCODER_LIMITS.maxTotalChars)
    throw new PayloadTooLargeError(
      `the texts have ${total} characters in all; at most ${ENCODER_LIMITS.maxTotalChars} per request are accepted`,
    );
  return texts;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;
const span = (s: Span) => ({ text: s.text, score: round(s.score), start: s.start, end: s.end });

/** The `result` for one text (docs/reference/decisions.md#encoder-response): only the heads the schema asked for. */
export function formatResult(r: EncoderResult, schema: EncoderSchema): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (schema.entities.length) {
    const flat = Object.entries(r.entities ?? {}).flatMap(([label, spans]) =>
      spans.map((s) => ({ text: s.text, label, score: round(s.score), start: s.start, end: s.end })),
    );
    const order = new Map(schema.entities.map((e, i) => [e.name, i]));
    flat.sort((a, b) => a.start - b.start || a.end - b.end || order.get(a.label)! - order.get(b.label)!);
    out.entities = flat;
  }
  if (schema.classifications.length) {
    out.classifications = Object.fromEntries(
      schema.classifications.map((c) => [
        c.task,
        (r.classifications[c.task] ?? []).map((x) => ({ label: x.label, score: round(x.score) })),
      ]),
    );
  }
  if (schema.structures.length) {
    const fmt = (v: FieldValue): unknown => {
      if (v === null) return null;
      if (Array.isArray(v)) return v.map((x) => ('start' in x ? span(x) : { text: x.text, score: round(x.score) }));
      return 'start' in v ? span(v) : { text: v.text, score: round(v.score) };
    };
    out.structures = Object.fromEntries(
      schema.structures.map((s) => [
        s.name,
        (r.structures[s.name] ?? []).map((inst) =>
          Object.fromEntries(s.fields.map((f) => [f.name, fmt(inst[f.name] ?? (f.dtype === 'list' ? [] : null))])),
        ),
      ]),
    );
  }
  if (schema.relations.length) {
    out.relations = Object.fromEntries(
      schema.relations.map((rel) => [
        rel.name,
        (r.relations[rel.name] ?? []).map((x) => ({
          head: span(x.head),
          tail: span(x.tail),
          score: round(Math.min(x.head.score, x.tail.score)),
        })),
      ]),
    );
  }
  return out;
}

export function tasksOf(schema: EncoderSchema): InferenceTask[] {
  const t: InferenceTask[] = [];
  if (schema.entities.length) t.push('ner');
  if (schema.classifications.length) t.push('classification');
  if (schema.structures.length) t.push('structures');
  if (schema.relations.length) t.push('relations');
  return t;
}

export interface ExtractionArgs {
  svc: Services;
  principal: Principal;
  /** The request's model, resolved once with its weights checked and the engine attached (models.ts resolveServable). */
  servable: ServableEncoder;
  texts: string[];
  /** Whether `text` was an array (then `result` is an array). */
  batch: boolean;
  schema: EncoderSchema;
  rawInput: Record<string, unknown>;
  threshold?: number | undefined;
  store: boolean;
  endpoint: string;
  limitClass: LimitClass;
  /** One text's result as the route answers it (default: formatResult, docs/reference/decisions.md#encoder-response). */
  format?: (r: EncoderResult) => Record<string, unknown>;
  /** The client went away: a request still queued for its batch leaves it. */
  signal?: AbortSignal | undefined;
}

export interface ExtractionOutput {
  inference_id: string;
  model_id: string;
  type: 'encoder';
  latency_ms: number;
  usage: { input_tokens: number };
  result: Record<string, unknown> | Array<Record<string, unknown>>;
  /**
   * Per text, the encoder passes it was read in (docs/reference/decisions.md#encoder-response): 1 = the
   * whole text in one pass; more = overlapping windows merged back into document offsets. A number when
   * `result` is one object, an array in input order when it is an array.
   */
  windows: number | number[];
}

/** Run, bill, persist: the model comes resolved, weights checked and engine attached (resolveServable). */
export async function runExtraction(a: ExtractionArgs): Promise<ExtractionOutput> {
  const started = performance.now();
  const { model: resolved, runtime } = a.servable;
  await checkSpendAllowance(a.svc, a.principal.team_id);
  const model = await runtime.model(await runtime.localDir(a.svc.blobs, resolved));
  let out: Awaited<ReturnType<typeof runtime.infer>>;
  try {
    // a deployment's calibrated thresholds stand in for the default only: a request's threshold wins
    const schema =
      a.threshold === undefined && resolved.thresholds
        ? withCalibratedThresholds(a.schema, resolved.thresholds)
        : a.schema;
    out = await runtime.infer(model, a.texts, schema, { threshold: a.threshold ?? 0.5, signal: a.signal });
  } catch (err) {
    if (err instanceof EncoderInputError) throw ValidationError.field(['body', 'schema'], err.message);
    throw err;
  }
  const results = out.results.map((r) => (a.format ? a.format(r) : formatResult(r, a.schema)));
  const result = a.batch ? results : results[0]!;
  const windows = a.batch ? out.chunks : out.chunks[0]!;
  const inferenceId = newInferenceId();
  const latency = Math.round(performance.now() - started);
  const usage = { input_tokens: out.inputTokens };
  await recordBilledUsage(a.svc, a.principal.team_id, a.limitClass, {
    inference_id: inferenceId,
    endpoint: a.endpoint,
    ...billedModel(resolved),
    base_model: resolved.baseModel,
    input_tokens: out.inputTokens,
    output_tokens: 0,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cost_usd_micros: Math.ceil(out.inputTokens * ENCODER_PRICE_PER_MTOK),
  });
  await storeInference(
    a.svc,
    a.principal.team_id,
    {
      inference_id: inferenceId,
      model_id: resolved.requested,
      type: 'encoder',
      tasks: tasksOf(a.schema),
      project_id: resolved.projectId,
      training_job_id: resolved.trainingJobId,
      endpoint: a.endpoint,
      input: a.rawInput,
      output: result,
      ...(a.schema.classifications.length ? { routes: out.routes } : {}),
      usage,
      latency_ms: latency,
    },
    a.store,
  );
  return {
    inference_id: inferenceId,
    model_id: resolved.requested,
    type: 'encoder',
    latency_ms: latency,
    usage,
    result,
    windows,
  };
}

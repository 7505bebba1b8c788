/**
 * What the core needs of an encoder engine, in its own terms: the extraction schema it sends, the
 * results it formats, bills and stores, and the one error it turns into a 422. The GLiNER2 engine
 * (src/encoder/) implements these; this file imports nothing, so the engine depends on the core's
 * vocabulary and never the other way round (`npm run check:deps`).
 */

// ---------------------------------------------------------------------------------------------
// The schema (docs/reference/decisions.md#schema-object, normalized: toEncoderSchema in api.ts)

export type Dtype = 'str' | 'list';

export interface EntitySpec {
  name: string;
  description?: string;
  threshold?: number;
}
export interface ClassificationSpec {
  task: string;
  labels: string[];
  labelDescriptions?: Record<string, string>;
  multiLabel: boolean;
  topK?: number;
  /** Multi-label cut-off (docs/reference/decisions.md#inference-semantics rule 2: the call threshold unless set per head). */
  threshold?: number;
  /** Multi-label: per-label cut-offs (a deployment's calibrated thresholds), over `threshold`. */
  labelThresholds?: Record<string, number>;
  prompt?: string;
}
export interface FieldSpec {
  name: string;
  dtype: Dtype;
  choices?: string[];
  description?: string;
  threshold?: number;
}
export interface StructureSpec {
  name: string;
  fields: FieldSpec[];
}
export interface RelationSpec {
  name: string;
  description?: string;
  threshold?: number;
}
export interface EncoderSchema {
  entities: EntitySpec[];
  classifications: ClassificationSpec[];
  structures: StructureSpec[];
  relations: RelationSpec[];
}

// ---------------------------------------------------------------------------------------------
// Results

export interface Span {
  text: string;
  score: number;
  /** Code-point offsets into the original text, end exclusive. */
  start: number;
  end: number;
}

export type Precision = 'fp32' | 'int8';

export interface ChoiceValue {
  text: string;
  score: number;
}
export type FieldValue = Span | Span[] | ChoiceValue | ChoiceValue[] | null;
export interface RelationInstance {
  head: Span;
  tail: Span;
}
export interface LabelScore {
  label: string;
  score: number;
}

/** Raw per-text result (before API formatting). Keys present only for requested heads. */
export interface EncoderResult {
  /** label → spans (greedy non-overlap per label, ranked by score); absent when no entity types. */
  entities?: Record<string, Span[]>;
  classifications: Record<string, LabelScore[]>;
  structures: Record<string, Array<Record<string, FieldValue>>>;
  relations: Record<string, RelationInstance[]>;
}

/** Which head answered a classification task (docs/reference/encoder.md "Pooled classifier"). */
export type ClassificationRoute = 'pooled' | 'gliner2';

export interface InferOutput {
  results: EncoderResult[];
  /** Per classification task of the schema: the head that answered it (the same for every text of a call). */
  routes: Record<string, ClassificationRoute>;
  /** Encoder input tokens over all texts (and chunks). */
  inputTokens: number;
  /** Per text: its encoder input tokens (sums to `inputTokens`); bills each request of a shared batch. */
  textTokens: number[];
  /** Per text: how many chunks it was split into (1 = not chunked; the most over its label groups). */
  chunks: number[];
  /** Per text: how many label groups the schema was split into for it (1 = the whole prompt at once). */
  groups: number[];
}

/** Input the engine cannot run (a prompt or text that cannot fit the encoder); the API answers 422. */
export class EncoderInputError extends Error {}

// ---------------------------------------------------------------------------------------------
// Calls

/** What one extraction may ask of the engine besides texts and schema. */
export interface ExtractOptions {
  threshold?: number;
  /** Word windows for texts longer than the encoder's position limit. */
  chunkWords?: number;
  chunkOverlap?: number;
  /** Prompt tokens per label group (docs/reference/encoder.md "Large label sets"); unset: only where a text does not fit. */
  labelGroupTokens?: number;
}

/** A request's extraction through the runtime (which may share one engine call between requests). */
export interface RuntimeExtractOptions extends ExtractOptions {
  /** Aborted: the request leaves the queue, or stops waiting for its running batch. */
  signal?: AbortSignal | undefined;
}

/** onnxruntime execution providers the encoder knows: `cpu`, or `cuda` on a GPU task. */
export const EXECUTION_PROVIDERS = ['cpu', 'cuda'] as const;
export type ExecutionProvider = (typeof EXECUTION_PROVIDERS)[number];

/** Which provider a model's sessions asked for, which they run on, and why they differ (onnxruntime's error). */
export interface ExecutionProviderOutcome {
  requested: ExecutionProvider;
  used: ExecutionProvider;
  reason?: string;
}

/** One loaded model, as the core uses it: extraction, unbatched (evaluation shards run it directly). */
export interface LoadedEncoder {
  infer(texts: string[], schema: EncoderSchema, opts?: ExtractOptions): Promise<InferOutput>;
  /** Where its sessions run (readiness compares it with SIFT_REQUIRE_EXECUTION_PROVIDER); absent: not known. */
  readonly executionProvider?: ExecutionProviderOutcome;
}

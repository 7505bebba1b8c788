/** Public result and option types of the encoder engine (re-exported by engine.ts), and its one error. */
import type { Span } from './decode';

export type { Span } from './decode';

export interface FragmentConfig {
  hidden_size: number;
  max_width: number;
  max_count: number;
  counting_layer: string;
  max_position_embeddings: number;
  pad_token_id: number;
  special_tokens: Record<string, number>;
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

export interface InferOptions {
  threshold?: number;
  /** Texts per encoder pass (gliner2 default 8). */
  batchSize?: number;
  /** Word windows for texts longer than the encoder's position limit. */
  chunkWords?: number;
  chunkOverlap?: number;
  /**
   * Prompt tokens per label group ("Large label sets" in docs/reference/encoder.md). Unset: labels are split only
   * for a text that does not fit with the whole prompt when that prompt leaves less than
   * `GROUP_TEXT_TOKENS` for text. Set: any prompt longer than this is split, for every text (tests).
   */
  labelGroupTokens?: number;
}

export interface InferOutput {
  results: EncoderResult[];
  /** Encoder input tokens over all texts (and chunks). */
  inputTokens: number;
  /** Per text: its encoder input tokens (sums to `inputTokens`); bills each request of a shared batch. */
  textTokens: number[];
  /** Per text: how many chunks it was split into (1 = not chunked; the most over its label groups). */
  chunks: number[];
  /** Per text: how many label groups the schema was split into for it (1 = the whole prompt at once). */
  groups: number[];
}

/**
 * Room for text that label groups leave (tokens). A prompt longer than `max_position_embeddings` minus
 * this is split into label groups for the texts that do not fit with it, so a long text still gets
 * windows of at least this many tokens.
 */
export const GROUP_TEXT_TOKENS = 128;

/** A classification label's score with the classifier's raw logit (label-group runs). */
export interface RawLabelScore extends LabelScore {
  logit: number;
}

/** One text (or window) serialized for the encoder. */
export interface EncodedRecord {
  textIndex: number;
  text: string; // normalized text the words index into (chunk text for chunks)
  offset: number; // code-point offset of `text` in the original
  words: string[];
  starts: number[];
  ends: number[];
  prefix: string[];
  ids: number[];
  wordPos: number[]; // first-subword position of each (prefix + text) word
  taskPos: number[][]; // per task: [P] then field markers
}

/** Input the engine cannot run (a prompt or text that cannot fit the encoder); the API answers 422. */
export class EncoderInputError extends Error {}

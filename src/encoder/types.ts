/**
 * Public result and option types of the encoder engine (re-exported by engine.ts), and its one error.
 * The request and result vocabulary is the core's (src/core/extraction/types.ts: what the core needs
 * of an engine); the engine's own options and internals are here.
 */
import type { ExtractOptions, LabelScore } from '../core/extraction/types';

export { EncoderInputError } from '../core/extraction/types';
export type {
  ChoiceValue,
  ClassificationRoute,
  EncoderResult,
  FieldValue,
  InferOutput,
  LabelScore,
  Precision,
  RelationInstance,
  Span,
} from '../core/extraction/types';

export interface FragmentConfig {
  /** gliner2's `architecture`; absent in exports before boundary models were served: `span`. */
  architecture?: 'span' | 'boundary';
  hidden_size: number;
  /** Span models: the widest span (words), the count head's slots and its layer. */
  max_width?: number;
  max_count?: number;
  counting_layer?: string;
  /** Boundary models (boundary.ts): candidate decoding as the library's `BoundaryHeadSettings` sets it. */
  pair_temperature?: number;
  classification_temperature?: number;
  enable_abstention?: boolean;
  abstention_threshold?: number;
  /** Canonical overlap policy per label: `disallow` (gliner2's `flat`), `nested`, `longest` or `allow`. */
  overlap_policy?: string;
  /** Boundary models with a relation scorer (`relation_mlp.onnx`) and its pair proposal settings. */
  enable_relations?: boolean;
  relation_temperature?: number;
  relation_heads_per_type?: number;
  relation_tails_per_type?: number;
  relation_pair_cap?: number;
  relation_argument_threshold?: number;
  directional_relation_states?: boolean;
  max_position_embeddings: number;
  /**
   * Tokens per encoder pass (prompt + text) a long text's windows are sized to (windows.ts `windowPlan`);
   * absent: `max_position_embeddings`, or 512 where `relative_positions`.
   */
  window_tokens?: number | null;
  /** The backbone has relative attention and no absolute position embeddings (DeBERTa-v3: `position_biased_input: false`). */
  relative_positions?: boolean;
  pad_token_id: number;
  special_tokens: Record<string, number>;
}

export interface InferOptions extends ExtractOptions {
  /** Texts per encoder pass (gliner2 default 8). */
  batchSize?: number;
  /**
   * Prompt tokens per label group ("Large label sets" in docs/reference/encoder.md). Unset: labels are split only
   * for a text that does not fit with the whole prompt when that prompt leaves less than
   * `GROUP_TEXT_TOKENS` for text. Set: any prompt longer than this is split, for every text (tests).
   */
  labelGroupTokens?: number;
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

/** The scorer's data shapes (inputs, mergeable counts, finalized metrics) and shared constants. */
import type { SchemaInput } from '../../extraction/api';
import type { ClassificationRoute } from '../../extraction/types';

/** The classification task name the trainer's manifest uses for `label` / `labels` columns. */
export const CLASSIFICATION_TASK = 'classification';
/** The confusion-matrix column for single-label rows where no label was predicted. */
export const NO_PREDICTION = '(none)';
export const DEFAULT_MAX_EXAMPLES = 20;

/** A dataset version's vocabulary (DatasetVersion / DatasetSummary.describe()). */
export interface DatasetVocabulary {
  task_types: readonly string[];
  label_vocabulary: readonly string[];
  entity_types?: readonly string[];
  relation_types?: readonly string[];
  structures?: Record<string, Record<string, { dtype: 'str' | 'list' }>>;
}

export interface PredictedSpan {
  text: string;
  score?: number;
  start?: number;
  end?: number;
}

/** The per-text `result` of the encoder API (`formatResult` in src/core/extraction/api.ts). */
export interface EncoderPrediction {
  entities?: { text: string; label: string; score?: number; start: number; end: number }[];
  classifications?: Record<string, { label: string; score?: number }[]>;
  structures?: Record<string, Record<string, PredictedSpan | PredictedSpan[] | null>[]>;
  relations?: Record<string, { head: PredictedSpan; tail: PredictedSpan; score?: number }[]>;
}

export interface Tally {
  tp: number;
  fp: number;
  fn: number;
}
export type TallyMap = Record<string, Tally>;

/** What the model got wrong on one row: the unmatched gold items and the unmatched predictions. */
export interface ExampleItems {
  entities?: { text: string; label: string; start?: number; end?: number }[];
  labels?: string[];
  /** `<structure>.<field>` → values (normalised). */
  fields?: Record<string, string[]>;
  relations?: { relation: string; head: string; tail: string }[];
}

export interface EvaluationExample {
  /** The row's `id` column, or the row number passed in `ScoreOptions.row`. */
  id?: string | number;
  /** The first `EXAMPLE_TEXT_CHARS` code points of the row's text. */
  text: string;
  gold: ExampleItems;
  predicted: ExampleItems;
}

/**
 * Mergeable, JSON-serialisable counts (plain numbers and small objects: shard results travel
 * through Step Functions). Size grows with the number of types/labels/fields and distinct
 * (gold, predicted) confusion pairs, not with the number of rows.
 */
export interface EvaluationCounts {
  /** Rows passed to `scoreRow`. */
  rows: number;
  /** Rows on which each head was scored (the row had the gold column and the schema the head). */
  scored: { entities: number; classification: number; structures: number; relations: number };
  per_entity: TallyMap;
  per_label: TallyMap;
  /** Keyed `<structure>.<field>`. */
  per_field: TallyMap;
  per_relation: TallyMap;
  /** Single-label only: gold label → top-1 predicted label (or `(none)`) → rows. */
  confusion: Record<string, Record<string, number>>;
  examples: EvaluationExample[];
  max_examples: number;
  /** Classification task → the head that answered (pooled or gliner2) → rows it answered; absent: none counted. */
  routes?: Record<string, Partial<Record<ClassificationRoute, number>>>;
  /** Per grid threshold, the tallies with every prediction cut at it (calibration.ts); absent when not calibrated. */
  curve?: CurveCounts;
}

export interface Breakdown {
  f1: number;
  precision: number;
  recall: number;
  /** Gold items: tp + fn. */
  support: number;
  tp: number;
  fp: number;
  fn: number;
}

export interface EvaluationMetrics {
  f1: number;
  precision: number;
  recall: number;
  per_entity?: Record<string, Breakdown>;
  per_label?: Record<string, Breakdown>;
  per_field?: Record<string, Breakdown>;
  per_relation?: Record<string, Breakdown>;
  /** Gold labels are rows, predicted labels columns, in `labels` order; `(none)` (last, when present) is a column only: its row is all zeros. */
  confusion?: { labels: string[]; matrix: number[][] };
  examples?: EvaluationExample[];
  /** Classification task → the head that answered its rows (docs/reference/encoder.md "Pooled classifier"). */
  routes?: Record<string, ClassificationRoute>;
  /** Per type: F1/precision/recall at each grid threshold and the best threshold (calibration.ts). */
  calibration?: Calibration;
  /** `rows`: rows scored; per head: gold items (entities, labels, field values, relations). */
  support: { rows: number; entities?: number; labels?: number; fields?: number; relations?: number };
}

export interface ScoreOptions {
  /** The schema the predictions were made with; restricts what is scored (see the rules above). */
  schema?: SchemaInput | undefined;
  /** Examples kept (default 20). */
  maxExamples?: number | undefined;
  /** Row number for the example, when the row has no `id`. */
  row?: number | undefined;
}

/** What a schema asks to be scored (see `viewOf`). */
export interface SchemaView {
  entities: Set<string>;
  classification?: { labels: Set<string>; multi: boolean };
  structures: Map<string, string[]>;
  relations: Set<string>;
}

/** One row being scored: the counts the heads add to, the schema view, and the unmatched items kept for an example. */
export interface RowScoring {
  counts: EvaluationCounts;
  view: SchemaView | undefined;
  missed: ExampleItems;
  spurious: ExampleItems;
}

/** The heads that have a threshold: single-label `per_label` is left out (its head has none). */
export interface CurveTallies {
  per_entity: TallyMap;
  per_label: TallyMap;
  per_field: TallyMap;
  per_relation: TallyMap;
}
/** Threshold (`t.toFixed(2)`) → the tallies of every prediction cut at it. */
export type CurveCounts = Record<string, CurveTallies>;

export interface CurvePoint {
  threshold: number;
  f1: number;
  precision: number;
  recall: number;
}

export interface TypeCalibration {
  /** The grid threshold with the highest F1 (ties: the one nearest 0.5, then the lower); null when F1 is 0 at every one. */
  best_threshold: number | null;
  /** At `best_threshold` (at 0.5 when it is null). */
  f1: number;
  precision: number;
  recall: number;
  /** Gold items. */
  support: number;
  curve: CurvePoint[];
}

export interface Calibration {
  grid: number[];
  per_entity?: Record<string, TypeCalibration>;
  per_label?: Record<string, TypeCalibration>;
  per_field?: Record<string, TypeCalibration>;
  per_relation?: Record<string, TypeCalibration>;
}

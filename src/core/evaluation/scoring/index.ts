/**
 * The evaluation scorer: gold dataset rows vs encoder predictions → tp/fp/fn counts → P/R/F1.
 * Pure functions, no I/O. Used by evaluations (one `scoreRow` per row, shards merged with
 * `mergeCounts`, then `finalizeMetrics`) and mirrored rule for rule by the trainer's validation
 * metrics (containers/training/sift_trainer/data/metrics.py); test/fixtures/evaluation/cases.json holds
 * hand-computed cases that both languages must reproduce. docs/reference/evaluation.md states the same rules.
 *
 * Matching rules
 * - Normalising: "ws" = split on whitespace (the characters in `WHITESPACE`, Python's `str.isspace`
 *   set), drop empty pieces, join with one space (so also trimmed). "value" = ws + lower-case.
 * - A head is scored on a row only when the row has that head's gold column (`entities`; `label`
 *   for single-label / `labels` for multi-label; `json_structures`; `relations`), an empty list
 *   included (`entities: []` says "no entities", so every predicted entity is a false positive).
 *   A row without the column says nothing about that head: its predictions for it are ignored.
 * - With a schema (`evaluationSchemaFor`) only the heads it asks for are scored, and entity types,
 *   structure fields and relation types it does not name are ignored on both sides. Classification
 *   is per row: every gold and predicted label counts, inside the schema's label list or not.
 * - Entities: gold with offsets and predictions are sets of exact `(label, start, end)` (Unicode
 *   code points; duplicates collapse; a prediction without integer offsets is ignored). A gold
 *   entity without offsets (mention only) matches a predicted span of the same label left unmatched
 *   by the exact pass whose `text` equals the mention after ws-normalising (case-sensitive); each
 *   such gold is consumed at most once, so per `(label, mention)`:
 *   tp = min(#gold mentions, #leftover predictions with that text); further predictions of that
 *   exact mention are ignored (the label doesn't say which occurrence it meant). Every other prediction is a fp,
 *   every other gold a fn.
 * - Classification (task `classification`): single-label compares the top-1 prediction (highest
 *   score; the first on ties; none when the list is empty) with `label`: equal → tp for it;
 *   otherwise fn for the gold label and fp for the predicted one (if any). The confusion matrix
 *   counts gold × top-1, with `(none)` when nothing was predicted. Multi-label compares the set of
 *   predicted labels with the set `labels`, per label.
 * - Structures: per `<structure>.<field>`, the multiset of normalised ("value") non-empty values over
 *   all predicted instances vs over all gold instances of that structure in the row (values are
 *   pooled across instances, not aligned instance by instance): tp = Σ min(count_pred, count_gold).
 *   A `null` str field or empty list contributes nothing.
 * - Relations: sets of `(relation, value(head text), value(tail text))` triples.
 * - Micro-averaging: precision = Σtp / (Σtp + Σfp), recall = Σtp / (Σtp + Σfn),
 *   f1 = 2PR / (P + R), over every breakdown of every head scored; a 0/0 ratio is 0 (no
 *   predictions → precision 0; no gold → recall 0). Values are rounded to 6 decimals.
 *
 * Layout: this file dispatches a row to the heads (scoring/entities.ts, classification.ts,
 * structures.ts, relations.ts); scoring/metrics.ts merges counts and turns them into P/R/F1;
 * scoring/tally.ts and normalize.ts hold the shared counting and normalising; scoring/types.ts the shapes.
 */
import type { NormalizedRow } from '../../datasets/rows';
import { scoreClassification } from './classification';
import { scoreEntities } from './entities';
import { curvePoint, gridKey } from './calibration';
import { addExample } from './examples';
import { emptyCounts } from './metrics';
import { scoreRelations } from './relations';
import { viewOf } from './schema';
import { scoreStructures } from './structures';
import { isObject, setOwn } from './tally';
import {
  DEFAULT_MAX_EXAMPLES,
  type CurveCounts,
  type EncoderPrediction,
  type EvaluationCounts,
  type RowScoring,
  type ScoreOptions,
} from './types';

export { DEFAULT_THRESHOLD, THRESHOLD_GRID, bestThreshold, finalizeCalibration, gridKey } from './calibration';
export { EXAMPLE_TEXT_CHARS } from './examples';
export { emptyCounts, finalizeMetrics, mergeCounts, prf, routeCounts } from './metrics';
export { normalizeSpace, normalizeValue } from './normalize';
export { evaluationSchemaFor } from './schema';
export {
  CLASSIFICATION_TASK,
  DEFAULT_MAX_EXAMPLES,
  NO_PREDICTION,
  type Breakdown,
  type Calibration,
  type CurveCounts,
  type CurvePoint,
  type DatasetVocabulary,
  type EncoderPrediction,
  type EvaluationCounts,
  type EvaluationExample,
  type EvaluationMetrics,
  type ExampleItems,
  type PredictedSpan,
  type ScoreOptions,
  type Tally,
  type TallyMap,
  type TypeCalibration,
} from './types';

/** Scores one gold row against the engine's `result` for its text. */
export function scoreRow(
  gold: NormalizedRow,
  prediction: EncoderPrediction | null | undefined,
  opts: ScoreOptions = {},
): EvaluationCounts {
  const counts = emptyCounts(opts.maxExamples ?? DEFAULT_MAX_EXAMPLES);
  counts.rows = 1;
  const pred: EncoderPrediction = isObject(prediction) ? prediction : {};
  const row: RowScoring = { counts, view: opts.schema ? viewOf(opts.schema) : undefined, missed: {}, spurious: {} };
  scoreEntities(gold, pred, row);
  scoreClassification(gold, pred, row);
  scoreStructures(gold, pred, row);
  scoreRelations(gold, pred, row);
  addExample(counts, gold, opts.row, row.missed, row.spurious);
  return counts;
}

/** One gold row's curve: `cuts[i]` is its prediction cut at `grid[i]` (calibration.ts). */
export function scoreRowCurve(
  gold: NormalizedRow,
  cuts: (EncoderPrediction | null | undefined)[],
  grid: readonly number[],
  schema?: ScoreOptions['schema'],
): CurveCounts {
  const multi = schema ? (viewOf(schema).classification?.multi ?? false) : gold.labels !== undefined;
  const curve: CurveCounts = {};
  grid.forEach((t, i) => {
    setOwn(curve, gridKey(t), curvePoint(scoreRow(gold, cuts[i], { schema, maxExamples: 0 }), multi));
  });
  return curve;
}

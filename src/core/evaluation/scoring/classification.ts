/** Classification head: single-label top-1 (with the confusion matrix counts) or multi-label sets. */
import type { NormalizedRow } from '../../datasets/rows';
import { add, getOwn, isObject, setOwn, tallyOf } from './tally';
import { CLASSIFICATION_TASK, NO_PREDICTION, type EncoderPrediction, type RowScoring } from './types';

export function scoreClassification(
  gold: NormalizedRow,
  pred: EncoderPrediction,
  { counts, view, missed, spurious }: RowScoring,
): void {
  const multi = view ? view.classification?.multi : gold.labels !== undefined;
  const goldLabels =
    multi === undefined ? undefined : multi ? gold.labels : gold.label !== undefined ? [gold.label] : undefined;
  if (goldLabels === undefined || multi === undefined) return;
  counts.scored.classification = 1;
  for (const l of view?.classification?.labels ?? []) tallyOf(counts.per_label, l);
  const raw = isObject(pred.classifications) ? getOwn(pred.classifications, CLASSIFICATION_TASK) : undefined;
  const items = (Array.isArray(raw) ? raw : []).filter(
    (x): x is { label: string; score?: number } => isObject(x) && typeof x.label === 'string',
  );
  let predicted: string[];
  if (multi) predicted = [...new Set(items.map((x) => x.label))];
  else {
    let top: { label: string; score: number } | undefined;
    for (const x of items) {
      const s = typeof x.score === 'number' ? x.score : -Infinity;
      if (!top || s > top.score) top = { label: x.label, score: s };
    }
    predicted = top ? [top.label] : [];
    const g = goldLabels[0]!;
    const row = getOwn(counts.confusion, g) ?? setOwn(counts.confusion, g, {});
    const col = top?.label ?? NO_PREDICTION;
    setOwn(row, col, (getOwn(row, col) ?? 0) + 1);
  }
  const goldSet = new Set(goldLabels);
  const predSet = new Set(predicted);
  for (const l of goldSet) {
    if (predSet.has(l)) add(counts.per_label, l, 1, 0, 0);
    else {
      add(counts.per_label, l, 0, 0, 1);
      missed.labels ??= [];
      missed.labels.push(l);
    }
  }
  for (const l of predSet) {
    if (!goldSet.has(l)) {
      add(counts.per_label, l, 0, 1, 0);
      spurious.labels ??= [];
      spurious.labels.push(l);
    }
  }
}

/** Relations head: sets of `(relation, head, tail)` triples with normalised arguments. */
import type { NormalizedRow } from '../../datasets/rows';
import { normalizeValue } from './normalize';
import { add, getOwn, isObject, key, tallyOf } from './tally';
import type { EncoderPrediction, RowScoring } from './types';

export function scoreRelations(
  gold: NormalizedRow,
  pred: EncoderPrediction,
  { counts, view, missed, spurious }: RowScoring,
): void {
  if (gold.relations === undefined || (view && view.relations.size === 0)) return;
  counts.scored.relations = 1;
  for (const r of view?.relations ?? []) tallyOf(counts.per_relation, r);
  const allowed = (r: string) => !view || view.relations.has(r);
  const goldT = new Map<string, { relation: string; head: string; tail: string }>();
  for (const r of gold.relations) {
    if (!allowed(r.relation)) continue;
    const t = { relation: r.relation, head: normalizeValue(r.head), tail: normalizeValue(r.tail) };
    goldT.set(key(t.relation, t.head, t.tail), t);
  }
  const predT = new Map<string, { relation: string; head: string; tail: string }>();
  const predRel = isObject(pred.relations) ? pred.relations : {};
  for (const relation of Object.keys(predRel)) {
    if (!allowed(relation)) continue;
    const items = getOwn(predRel, relation);
    for (const it of Array.isArray(items) ? items : []) {
      if (!isObject(it) || !isObject(it.head) || !isObject(it.tail)) continue;
      const head = typeof it.head.text === 'string' ? normalizeValue(it.head.text) : '';
      const tail = typeof it.tail.text === 'string' ? normalizeValue(it.tail.text) : '';
      if (head && tail) predT.set(key(relation, head, tail), { relation, head, tail });
    }
  }
  for (const [k, t] of goldT) {
    if (predT.has(k)) add(counts.per_relation, t.relation, 1, 0, 0);
    else {
      add(counts.per_relation, t.relation, 0, 0, 1);
      missed.relations ??= [];
      missed.relations.push(t);
    }
  }
  for (const [k, t] of predT) {
    if (!goldT.has(k)) {
      add(counts.per_relation, t.relation, 0, 1, 0);
      spurious.relations ??= [];
      spurious.relations.push(t);
    }
  }
}

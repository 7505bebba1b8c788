/** Entities head: exact `(label, start, end)` spans, then mention-only gold matched by text. */
import type { NormalizedRow } from '../../datasets/rows';
import { normalizeSpace } from './normalize';
import { add, Counter, isObject, key, tallyOf } from './tally';
import type { EncoderPrediction, RowScoring } from './types';

export function scoreEntities(
  gold: NormalizedRow,
  pred: EncoderPrediction,
  { counts, view, missed, spurious }: RowScoring,
): void {
  if (gold.entities === undefined || (view && view.entities.size === 0)) return;
  counts.scored.entities = 1;
  const allowed = (label: string) => !view || view.entities.has(label);
  for (const t of view?.entities ?? []) tallyOf(counts.per_entity, t);
  const exactGold = new Map<string, { text: string; label: string; start: number; end: number }>();
  const mentionGold = new Counter();
  const mentionItems: { text: string; label: string }[] = [];
  for (const e of gold.entities) {
    if (!allowed(e.label)) continue;
    if (typeof e.start === 'number' && typeof e.end === 'number') {
      const k = key(e.label, e.start, e.end);
      if (!exactGold.has(k)) exactGold.set(k, { text: e.text, label: e.label, start: e.start, end: e.end });
    } else {
      mentionGold.add(key(e.label, normalizeSpace(e.text)));
      mentionItems.push({ text: e.text, label: e.label });
    }
  }
  const preds = new Map<string, { text: string; label: string; start: number; end: number }>();
  for (const p of Array.isArray(pred.entities) ? pred.entities : []) {
    if (
      !isObject(p) ||
      typeof p.label !== 'string' ||
      !allowed(p.label) ||
      !Number.isInteger(p.start) ||
      !Number.isInteger(p.end)
    )
      continue;
    const k = key(p.label, p.start, p.end);
    if (!preds.has(k))
      preds.set(k, { text: typeof p.text === 'string' ? p.text : '', label: p.label, start: p.start, end: p.end });
  }
  const leftover: { k: string; p: { text: string; label: string; start: number; end: number } }[] = [];
  for (const [k, p] of preds) {
    if (exactGold.has(k)) add(counts.per_entity, p.label, 1, 0, 0);
    else leftover.push({ k: key(p.label, normalizeSpace(p.text)), p });
  }
  for (const [k, g] of exactGold) {
    if (!preds.has(k)) {
      add(counts.per_entity, g.label, 0, 0, 1);
      missed.entities ??= [];
      missed.entities.push(g);
    }
  }
  // mention-only golds: each consumed at most once, by leftover predictions in order
  const remaining = new Map(mentionGold.m);
  for (const { k, p } of leftover) {
    const left = remaining.get(k) ?? 0;
    if (left > 0) {
      remaining.set(k, left - 1);
      add(counts.per_entity, p.label, 1, 0, 0);
    } else if (mentionGold.m.has(k)) {
      // another occurrence of a mention labelled without offsets: consistent with the label, not an error
    } else {
      add(counts.per_entity, p.label, 0, 1, 0);
      spurious.entities ??= [];
      spurious.entities.push(p);
    }
  }
  for (const m of mentionItems) {
    const k = key(m.label, normalizeSpace(m.text));
    const left = remaining.get(k) ?? 0;
    if (left > 0) {
      remaining.set(k, left - 1);
      add(counts.per_entity, m.label, 0, 0, 1);
      missed.entities ??= [];
      missed.entities.push(m);
    }
  }
}

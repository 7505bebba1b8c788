/** Structures head: per `<structure>.<field>`, multisets of normalised values pooled over instances. */
import type { NormalizedRow } from '../../datasets/rows';
import { normalizeValue } from './normalize';
import { add, Counter, getOwn, isObject, tallyOf } from './tally';
import type { EncoderPrediction, RowScoring } from './types';

export function scoreStructures(
  gold: NormalizedRow,
  pred: EncoderPrediction,
  { counts, view, missed, spurious }: RowScoring,
): void {
  if (gold.json_structures === undefined || (view && view.structures.size === 0)) return;
  counts.scored.structures = 1;
  const fieldsOf = (name: string): string[] | undefined => (view ? view.structures.get(name) : undefined);
  const goldC = new Map<string, Counter>();
  const predC = new Map<string, Counter>();
  const bump = (m: Map<string, Counter>, k: string, v: string) => {
    const n = normalizeValue(v);
    if (!n) return;
    const c = m.get(k) ?? new Counter();
    m.set(k, c);
    c.add(n);
  };
  for (const [name, fields] of view?.structures ?? [])
    for (const f of fields) tallyOf(counts.per_field, `${name}.${f}`);
  for (const instance of gold.json_structures) {
    for (const [name, fields] of Object.entries(instance)) {
      if (view && !view.structures.has(name)) continue;
      const allowed = fieldsOf(name);
      for (const [f, v] of Object.entries(fields)) {
        if (allowed && !allowed.includes(f)) continue;
        for (const x of Array.isArray(v) ? v : [v]) if (typeof x === 'string') bump(goldC, `${name}.${f}`, x);
      }
    }
  }
  const predStructures = isObject(pred.structures) ? pred.structures : {};
  const names = view ? [...view.structures.keys()] : Object.keys(predStructures);
  for (const name of names) {
    const instances = getOwn(predStructures, name);
    for (const inst of Array.isArray(instances) ? instances : []) {
      if (!isObject(inst)) continue;
      for (const f of fieldsOf(name) ?? Object.keys(inst)) {
        const v = getOwn(inst, f);
        for (const x of Array.isArray(v) ? v : [v])
          if (isObject(x) && typeof x.text === 'string') bump(predC, `${name}.${f}`, x.text);
      }
    }
  }
  for (const k of new Set([...goldC.keys(), ...predC.keys()])) {
    const g = goldC.get(k) ?? new Counter();
    const p = predC.get(k) ?? new Counter();
    let tp = 0;
    for (const [v, n] of g.m) {
      const hit = Math.min(n, p.get(v));
      tp += hit;
      for (let i = hit; i < n; i++) noteField(missed, k, v);
    }
    for (const [v, n] of p.m) for (let i = Math.min(n, g.get(v)); i < n; i++) noteField(spurious, k, v);
    add(counts.per_field, k, tp, p.total() - tp, g.total() - tp);
  }
}

/** Appends `v` to the list under `k` in `bag.fields`, making the record and the list when missing. */
function noteField(bag: { fields?: Record<string, string[]> }, k: string, v: string): void {
  const fields = bag.fields ?? {};
  bag.fields = fields;
  const list = fields[k] ?? [];
  fields[k] = list;
  list.push(v);
}

/**
 * Canonical form of engine results for parity checks against the Python `gliner2` library: every
 * span, label and choice becomes one `key → score` entry, exactly as
 * containers/training/sift_trainer/export/gliner2_reference.py `canon` flattens gliner2's output. Used by
 * bench/parity/encoder-parity.ts and by `sift models import`, which refuses weights whose export disagrees.
 */
import type { EncoderResult } from './engine';
import type { EncoderSchema } from './schema';

export type CanonResult = Record<string, number>;

export function canonResult(r: EncoderResult, schema: EncoderSchema): CanonResult {
  const out: CanonResult = {};
  const sk = (p: string, v: { start: number; end: number; text: string }) => `${p}|${v.start}|${v.end}|${v.text}`;
  if (r.entities && Object.keys(r.entities).length) {
    for (const [label, spans] of Object.entries(r.entities)) {
      for (const v of spans) out[sk(`E|${label}`, v)] = v.score;
      out[`E|${label}|present`] = 1;
    }
  }
  for (const c of schema.classifications) {
    (r.classifications[c.task] ?? []).forEach((it, rank) => {
      out[`C|${c.task}|${rank}|${it.label}`] = it.score;
    });
  }
  for (const s of schema.structures)
    (r.structures[s.name] ?? []).forEach((inst, i) => {
      for (const [f, v] of Object.entries(inst)) {
        const vals = Array.isArray(v) ? v : [v];
        vals.forEach((x, k) => {
          if (x === null) out[`S|${s.name}|${i}|${f}|null`] = 0;
          else if ('start' in x) out[sk(`S|${s.name}|${i}|${f}|${k}`, x)] = x.score;
          else out[`S|${s.name}|${i}|${f}|${k}|choice|${x.text}`] = x.score;
        });
      }
    });
  for (const rel of schema.relations)
    (r.relations[rel.name] ?? []).forEach((inst, i) => {
      out[sk(`R|${rel.name}|${i}|head`, inst.head)] = inst.head.score;
      out[sk(`R|${rel.name}|${i}|tail`, inst.tail)] = inst.tail.score;
    });
  return out;
}

export interface ParityReport {
  /** Keys compared (the union of both sides). */
  items: number;
  /** Largest |Δscore| over keys both sides have. */
  maxDiff: number;
  /** One line per disagreement: a key only one side has, or a score further apart than the tolerance. */
  mismatches: string[];
}

/** Compares one text's canonical results; `where` prefixes each mismatch line. */
export function compareCanon(ours: CanonResult, reference: CanonResult, tolerance: number, where = ''): ParityReport {
  const keys = new Set([...Object.keys(ours), ...Object.keys(reference)]);
  const mismatches: string[] = [];
  let maxDiff = 0;
  for (const k of keys) {
    const a = ours[k];
    const b = reference[k];
    if (a === undefined) mismatches.push(`${where}only in python: ${k} (${b})`);
    else if (b === undefined) mismatches.push(`${where}only in TS: ${k} (${a})`);
    else {
      const d = Math.abs(a - b);
      maxDiff = Math.max(maxDiff, d);
      if (d > tolerance) mismatches.push(`${where}score ${k}: ts ${a} python ${b} (Δ ${d.toExponential(2)})`);
    }
  }
  return { items: keys.size, maxDiff, mismatches };
}

/**
 * Per-type thresholds (docs/reference/evaluation.md#calibrated-thresholds): cutting an engine result
 * at a higher threshold after the fact (what an evaluation's threshold curve scores), and a
 * deployment's calibrated thresholds written into a request's schema.
 */
import type { EncoderResult, EncoderSchema, FieldValue } from './types';

/** A deployment's calibrated thresholds, per type, from one evaluation's `calibration`. */
export interface CalibratedThresholds {
  evaluation_id: string;
  entities: Record<string, number>;
  /** Multi-label classification labels (single-label heads have no threshold). */
  labels: Record<string, number>;
  /** Keyed `<structure>.<field>`. */
  fields: Record<string, number>;
  relations: Record<string, number>;
}

// labels and types are the caller's data: `__proto__` is a name like any other
const own = (m: Record<string, number>, k: string) => (Object.hasOwn(m, k) ? m[k] : undefined);
const keep = <T extends { score: number }>(xs: T[], t: number) => xs.filter((x) => x.score >= t);

/**
 * `r` (decoded at a threshold ≤ `t`) as the engine decodes it at `t`: every span, label, choice and
 * relation scoring below `t` dropped, and structure instances left empty. Exact for a text read in
 * one window: span de-overlap is greedy by score, so a lower-scored span never removed one scoring
 * `t` or more; a relation's head and tail are each its best span; multi-label `top_k` keeps a
 * prefix of the ranked labels. Merging a long text's windows is not (docs/reference/evaluation.md).
 * Single-label classifications have no threshold and are kept as they are.
 */
export function cutResult(r: EncoderResult, schema: EncoderSchema, t: number): EncoderResult {
  const multi = new Set(schema.classifications.filter((c) => c.multiLabel).map((c) => c.task));
  const field = (v: FieldValue): FieldValue =>
    v === null ? null : Array.isArray(v) ? (keep(v as { score: number }[], t) as FieldValue) : v.score >= t ? v : null;
  const empty = (v: FieldValue) => v === null || (Array.isArray(v) && v.length === 0);
  const map = <A, B>(m: Record<string, A>, f: (k: string, v: A) => B): Record<string, B> =>
    Object.fromEntries(Object.entries(m).map(([k, v]) => [k, f(k, v)]));
  return {
    ...(r.entities ? { entities: map(r.entities, (_, spans) => keep(spans, t)) } : {}),
    classifications: map(r.classifications, (task, xs) => (multi.has(task) ? keep(xs, t) : xs)),
    structures: map(r.structures, (_, list) =>
      list.map((inst) => map(inst, (_f, v) => field(v))).filter((inst) => Object.values(inst).some((v) => !empty(v))),
    ),
    relations: map(r.relations, (_, list) => list.filter((x) => x.head.score >= t && x.tail.score >= t)),
  };
}

/**
 * `schema` with a deployment's calibrated thresholds on every type that has one and sets none of its
 * own (a head's threshold in the request wins; the caller applies these only when the request sent
 * no `threshold`). Single-label classification tasks are left as they are.
 */
export function withCalibratedThresholds(schema: EncoderSchema, th: CalibratedThresholds): EncoderSchema {
  const at = <T extends { threshold?: number }>(spec: T, t: number | undefined): T =>
    spec.threshold === undefined && t !== undefined ? { ...spec, threshold: t } : spec;
  return {
    entities: schema.entities.map((e) => at(e, own(th.entities, e.name))),
    classifications: schema.classifications.map((c) => {
      if (!c.multiLabel || c.threshold !== undefined) return c;
      const labels = Object.fromEntries(
        c.labels.flatMap((l) => {
          const t = own(th.labels, l);
          return t === undefined ? [] : [[l, t]];
        }),
      );
      return Object.keys(labels).length ? { ...c, labelThresholds: labels } : c;
    }),
    structures: schema.structures.map((s) => ({
      ...s,
      fields: s.fields.map((f) => at(f, own(th.fields, `${s.name}.${f.name}`))),
    })),
    relations: schema.relations.map((r) => at(r, own(th.relations, r.name))),
  };
}

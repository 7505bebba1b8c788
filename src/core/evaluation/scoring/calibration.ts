/**
 * Threshold calibration: per entity type, multi-label label, structure field and relation type, the
 * F1 / precision / recall at each threshold of `THRESHOLD_GRID` and the threshold that maximises F1
 * (docs/reference/evaluation.md#calibrated-thresholds). Each type's tally depends only on that
 * type's own predictions, so scoring every prediction cut at `t` gives every type's point at `t`.
 */
import { getOwn, mergeTallies, prf, setOwn } from './tally';
import type { Calibration, CurveCounts, CurvePoint, CurveTallies, EvaluationCounts, TypeCalibration } from './types';

/** 0.05, 0.10, …, 0.95. */
export const THRESHOLD_GRID: readonly number[] = Array.from({ length: 19 }, (_, i) => (i + 1) / 20);
/** The threshold a request without one gets (SPEC), preferred on ties. */
export const DEFAULT_THRESHOLD = 0.5;

export const gridKey = (t: number) => t.toFixed(2);

/** The curve tallies of one row's counts at one threshold (`multiLabel`: whether its labels have a threshold). */
export function curvePoint(c: EvaluationCounts, multiLabel: boolean): CurveTallies {
  return {
    per_entity: c.per_entity,
    per_label: multiLabel ? c.per_label : {},
    per_field: c.per_field,
    per_relation: c.per_relation,
  };
}

export function mergeCurves(a: CurveCounts | undefined, b: CurveCounts | undefined): CurveCounts | undefined {
  if (!a || !b) return a ?? b;
  const out: CurveCounts = {};
  for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
    const x = getOwn(a, k);
    const y = getOwn(b, k);
    setOwn(
      out,
      k,
      x && y
        ? {
            per_entity: mergeTallies(x.per_entity, y.per_entity),
            per_label: mergeTallies(x.per_label, y.per_label),
            per_field: mergeTallies(x.per_field, y.per_field),
            per_relation: mergeTallies(x.per_relation, y.per_relation),
          }
        : (x ?? y)!,
    );
  }
  return out;
}

/** The best threshold of one curve (see `TypeCalibration.best_threshold`). */
export function bestThreshold(curve: CurvePoint[]): CurvePoint | undefined {
  const away = (p: CurvePoint) => Math.round(Math.abs(p.threshold - DEFAULT_THRESHOLD) * 1e6);
  let best: CurvePoint | undefined;
  for (const p of curve) {
    if (p.f1 <= 0) continue;
    if (
      !best ||
      p.f1 > best.f1 ||
      (p.f1 === best.f1 && (away(p) < away(best) || (away(p) === away(best) && p.threshold < best.threshold)))
    )
      best = p;
  }
  return best;
}

/** Curve counts → per-type curves and best thresholds (undefined when no type has a threshold). */
export function finalizeCalibration(curve: CurveCounts | undefined): Calibration | undefined {
  if (!curve) return undefined;
  const grid = THRESHOLD_GRID.filter((t) => getOwn(curve, gridKey(t)));
  if (!grid.length) return undefined;
  const out: Calibration = { grid: [...grid] };
  for (const head of ['per_entity', 'per_label', 'per_field', 'per_relation'] as const) {
    const types = new Set(grid.flatMap((t) => Object.keys(curve[gridKey(t)]![head])));
    if (!types.size) continue;
    const byType: Record<string, TypeCalibration> = {};
    for (const type of [...types].sort()) {
      const tallies = grid.map((t) => getOwn(curve[gridKey(t)]![head], type) ?? { tp: 0, fp: 0, fn: 0 });
      const points = grid.map((threshold, i) => {
        const { f1, precision, recall } = prf(tallies[i]!);
        return { threshold, f1, precision, recall };
      });
      const best = bestThreshold(points);
      const at = best ?? points.find((p) => p.threshold === DEFAULT_THRESHOLD) ?? points[0]!;
      const t = tallies[points.indexOf(at)]!;
      setOwn(byType, type, {
        best_threshold: best?.threshold ?? null,
        f1: at.f1,
        precision: at.precision,
        recall: at.recall,
        support: t.tp + t.fn,
        curve: points,
      });
    }
    out[head] = byType;
  }
  return Object.keys(out).length > 1 ? out : undefined;
}

/** Counts → metrics: empty and merged counts, breakdowns and the confusion matrix (P/R/F1 arithmetic: tally.ts `prf`). */
import type { ClassificationRoute } from '../../extraction/types';
import { finalizeCalibration, mergeCurves } from './calibration';
import { getOwn, mergeTallies, prf, setOwn } from './tally';

export { prf } from './tally';
import {
  DEFAULT_MAX_EXAMPLES,
  NO_PREDICTION,
  type Breakdown,
  type EvaluationCounts,
  type EvaluationMetrics,
  type Tally,
  type TallyMap,
} from './types';

export function emptyCounts(maxExamples = DEFAULT_MAX_EXAMPLES): EvaluationCounts {
  return {
    rows: 0,
    scored: { entities: 0, classification: 0, structures: 0, relations: 0 },
    per_entity: {},
    per_label: {},
    per_field: {},
    per_relation: {},
    confusion: {},
    examples: [],
    max_examples: maxExamples,
  };
}

/** Sums two counts (associative and commutative except for which examples are kept: `a`'s first). Inputs are not modified. */
export function mergeCounts(a: EvaluationCounts, b: EvaluationCounts): EvaluationCounts {
  const confusion: EvaluationCounts['confusion'] = {};
  for (const m of [a.confusion, b.confusion]) {
    for (const [g, row] of Object.entries(m)) {
      const out = getOwn(confusion, g) ?? setOwn(confusion, g, {});
      for (const [p, n] of Object.entries(row)) setOwn(out, p, (getOwn(out, p) ?? 0) + n);
    }
  }
  const max = Math.min(a.max_examples, b.max_examples);
  return {
    rows: a.rows + b.rows,
    scored: {
      entities: a.scored.entities + b.scored.entities,
      classification: a.scored.classification + b.scored.classification,
      structures: a.scored.structures + b.scored.structures,
      relations: a.scored.relations + b.scored.relations,
    },
    per_entity: mergeTallies(a.per_entity, b.per_entity),
    per_label: mergeTallies(a.per_label, b.per_label),
    per_field: mergeTallies(a.per_field, b.per_field),
    per_relation: mergeTallies(a.per_relation, b.per_relation),
    confusion,
    examples: [...a.examples, ...b.examples].slice(0, max),
    max_examples: max,
    ...(a.routes || b.routes ? { routes: mergeRoutes(a.routes ?? {}, b.routes ?? {}) } : {}),
    ...(a.curve || b.curve ? { curve: mergeCurves(a.curve, b.curve) } : {}),
  };
}

function mergeRoutes(a: RouteCounts, b: RouteCounts): RouteCounts {
  const out: RouteCounts = {};
  for (const m of [a, b])
    for (const [task, byRoute] of Object.entries(m)) {
      const t = getOwn(out, task) ?? setOwn(out, task, {});
      for (const [route, n] of Object.entries(byRoute) as [ClassificationRoute, number][])
        t[route] = (t[route] ?? 0) + n;
    }
  return out;
}

/** Counts saying that `rows` rows of each classification task were answered by the route `routes` names. */
export function routeCounts(
  routes: Record<string, ClassificationRoute>,
  rows: number,
): Pick<EvaluationCounts, 'routes'> {
  const out: RouteCounts = {};
  for (const [task, route] of Object.entries(routes)) setOwn(out, task, { [route]: rows });
  return { routes: out };
}

type RouteCounts = NonNullable<EvaluationCounts['routes']>;

const sortedKeys = (m: object) => Object.keys(m).sort();

/** Micro-averaged metrics with per-type breakdowns (only for heads that were scored), confusion and examples. */
export function finalizeMetrics(counts: EvaluationCounts): EvaluationMetrics {
  const total: Tally = { tp: 0, fp: 0, fn: 0 };
  const support: EvaluationMetrics['support'] = { rows: counts.rows };
  const breakdown = (m: TallyMap) => {
    const out: Record<string, Breakdown> = {};
    let gold = 0;
    for (const k of sortedKeys(m)) {
      const t = m[k]!;
      total.tp += t.tp;
      total.fp += t.fp;
      total.fn += t.fn;
      gold += t.tp + t.fn;
      setOwn(out, k, prf(t));
    }
    return { out, gold };
  };
  const overall: Partial<EvaluationMetrics> = {};
  // head scored → its tallies, its breakdown key, its support key
  const heads = [
    [counts.scored.entities, 'per_entity', 'entities'],
    [counts.scored.classification, 'per_label', 'labels'],
    [counts.scored.structures, 'per_field', 'fields'],
    [counts.scored.relations, 'per_relation', 'relations'],
  ] as const;
  for (const [scored, key, supportKey] of heads) {
    if (!scored) continue;
    const b = breakdown(counts[key]);
    overall[key] = b.out;
    support[supportKey] = b.gold;
  }
  const { f1, precision, recall } = prf(total);
  const metrics: EvaluationMetrics = { f1, precision, recall, ...overall, support };
  const golds = sortedKeys(counts.confusion);
  if (golds.length) {
    const predicted = new Set<string>();
    for (const g of golds) for (const p of Object.keys(counts.confusion[g]!)) predicted.add(p);
    const labels = [...new Set([...golds, ...predicted])].filter((l) => l !== NO_PREDICTION).sort();
    if (predicted.has(NO_PREDICTION)) labels.push(NO_PREDICTION);
    metrics.confusion = {
      labels,
      matrix: labels.map((g) => {
        const row = getOwn(counts.confusion, g) ?? {};
        return labels.map((p) => getOwn(row, p) ?? 0);
      }),
    };
  }
  if (counts.examples.length) metrics.examples = counts.examples;
  if (counts.routes && Object.keys(counts.routes).length) {
    // one model and one schema per evaluation: every row of a task takes the same route; were it mixed, the majority's
    metrics.routes = {};
    for (const task of sortedKeys(counts.routes)) {
      const byRoute = Object.entries(counts.routes[task]!) as [ClassificationRoute, number][];
      setOwn(metrics.routes, task, byRoute.sort((x, y) => y[1] - x[1] || x[0].localeCompare(y[0]))[0]![0]);
    }
  }
  const calibration = finalizeCalibration(counts.curve);
  if (calibration) metrics.calibration = calibration;
  return metrics;
}

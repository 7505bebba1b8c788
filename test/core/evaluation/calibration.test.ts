import { describe, expect, it } from '@jest/globals';
import type { NormalizedRow } from '../../../src/core/datasets/rows';
import { formatResult, toEncoderSchema, type SchemaInput } from '../../../src/core/extraction/api';
import { cutResult, withCalibratedThresholds } from '../../../src/core/extraction/thresholds';
import type { EncoderResult } from '../../../src/core/extraction/types';
import {
  bestThreshold,
  finalizeMetrics,
  mergeCounts,
  scoreRow,
  scoreRowCurve,
  THRESHOLD_GRID,
  type EncoderPrediction,
} from '../../../src/core/evaluation/scoring';
import type { Services } from '../../../src/core/context';
import { InProcessPredictor } from '../../../src/core/evaluation/workflow';
import { decodeClassification } from '../../../src/encoder/classification';

const span = (text: string, start: number, score: number) => ({ text, start, end: start + text.length, score });

/** Scores `rows` with `results` (decoded at the grid's minimum) the way an evaluation does. */
function evaluate(rows: NormalizedRow[], results: EncoderResult[], input: SchemaInput) {
  const schema = toEncoderSchema(input);
  const fmt = (r: EncoderResult) => formatResult(r, schema) as EncoderPrediction;
  return finalizeMetrics(
    rows
      .map((row, i) => {
        const one = scoreRow(row, fmt(cutResult(results[i]!, schema, 0.5)), { schema: input });
        one.curve = scoreRowCurve(
          row,
          THRESHOLD_GRID.map((t) => fmt(cutResult(results[i]!, schema, t))),
          THRESHOLD_GRID,
          input,
        );
        return one;
      })
      .reduce(mergeCounts),
  );
}

describe('calibration: the threshold that maximises F1, per type', () => {
  const text = 'Ann met Bob in Rome';
  const row = {
    text,
    entities: [
      { text: 'Ann', label: 'person', start: 0, end: 3 },
      { text: 'Bob', label: 'person', start: 8, end: 11 },
    ],
  } as NormalizedRow;
  // Ann 0.9 (right), Rome 0.6 (wrong), Bob 0.3 (right):
  // t ≤ 0.30: tp 2 fp 1 → F1 0.8; ≤ 0.60: tp 1 fp 1 fn 1 → 0.5; ≤ 0.90: tp 1 fn 1 → 0.666667; above: 0
  const result: EncoderResult = {
    entities: { person: [span('Ann', 0, 0.9), span('Rome', 15, 0.6), span('Bob', 8, 0.3)] },
    classifications: {},
    structures: {},
    relations: {},
  };

  it('reports the curve and the best threshold of a hand-checked case; the F1 at 0.5 is unchanged', () => {
    const m = evaluate([row], [result], { entities: ['person'] });
    expect(m.f1).toBe(0.5);
    const person = m.calibration!.per_entity!.person!;
    // 0.05 … 0.30 tie at 0.8: the one nearest 0.5 wins
    expect(person).toMatchObject({ best_threshold: 0.3, f1: 0.8, precision: 0.666667, recall: 1, support: 2 });
    const at = (t: number) => person.curve.find((p) => p.threshold === t)!.f1;
    expect([at(0.05), at(0.3), at(0.35), at(0.5), at(0.6), at(0.65), at(0.9), at(0.95)]).toEqual([
      0.8, 0.8, 0.5, 0.5, 0.5, 0.666667, 0.666667, 0,
    ]);
    expect(m.calibration!.grid).toEqual(THRESHOLD_GRID);
  });

  it('multi-label labels, structure fields and relation types are calibrated; single-label labels are not', () => {
    const gold = {
      text: 'x',
      labels: ['a'],
      json_structures: [{ order: { item: 'tea' } }],
      relations: [{ relation: 'works_for', head: 'Ann', tail: 'Acme' }],
    } as unknown as NormalizedRow;
    const r: EncoderResult = {
      classifications: {
        classification: [
          { label: 'a', score: 0.4 },
          { label: 'b', score: 0.2 },
        ],
      },
      structures: { order: [{ item: [span('tea', 0, 0.7), span('milk', 4, 0.1)] }] },
      relations: { works_for: [{ head: span('Ann', 0, 0.8), tail: span('Acme', 9, 0.25) }] },
    };
    const multi = evaluate([gold], [r], {
      classifications: [{ task: 'classification', labels: ['a', 'b'], multi_label: true }],
      structures: { order: { fields: [{ name: 'item', dtype: 'list' }] } },
      relations: ['works_for'],
    });
    expect(multi.calibration!.per_label!.a!.best_threshold).toBe(0.4);
    expect(multi.calibration!.per_label!.b!.best_threshold).toBeNull(); // no gold: F1 0 everywhere
    expect(multi.calibration!.per_field!['order.item']!).toMatchObject({ best_threshold: 0.5, f1: 1 });
    expect(multi.calibration!.per_relation!.works_for!).toMatchObject({ best_threshold: 0.25, f1: 1 });

    const single = evaluate([{ text: 'x', label: 'a' } as NormalizedRow], [r], {
      classifications: [{ task: 'classification', labels: ['a', 'b'] }],
    });
    expect(single.per_label!.a!.f1).toBe(1);
    expect(single.calibration).toBeUndefined();
  });

  it('ties go to the threshold nearest 0.5, then the lower', () => {
    const pts = (xs: [number, number][]) => xs.map(([threshold, f1]) => ({ threshold, f1, precision: 0, recall: 0 }));
    expect(
      bestThreshold(
        pts([
          [0.2, 0.7],
          [0.45, 0.7],
          [0.55, 0.7],
          [0.9, 0.6],
        ]),
      )?.threshold,
    ).toBe(0.45);
    expect(
      bestThreshold(
        pts([
          [0.2, 0],
          [0.5, 0],
        ]),
      ),
    ).toBeUndefined();
  });
});

describe('calibrated thresholds in a request schema', () => {
  const th = {
    evaluation_id: 'e',
    entities: { person: 0.3 },
    labels: { a: 0.2, ['__proto__']: 0.9 },
    fields: { 'order.item': 0.7 },
    relations: { works_for: 0.25 },
  };

  it('fill every type without a threshold of its own; single-label tasks are untouched', () => {
    const schema = toEncoderSchema({
      entities: ['person', 'place'],
      classifications: [
        { task: 'm', labels: ['a', 'b'], multi_label: true },
        { task: 's', labels: ['a', 'b'] },
        { task: 'own', labels: ['a'], multi_label: true, threshold: 0.6 },
      ],
      structures: { order: { fields: [{ name: 'item', threshold: 0.4 }, { name: 'qty' }] } },
      relations: ['works_for'],
    });
    const out = withCalibratedThresholds(schema, th);
    expect(out.entities).toEqual([{ name: 'person', threshold: 0.3 }, { name: 'place' }]);
    expect(out.classifications[0]!.labelThresholds).toEqual({ a: 0.2 });
    expect(out.classifications[1]).toEqual(schema.classifications[1]);
    expect(out.classifications[2]).toEqual(schema.classifications[2]);
    expect(out.structures[0]!.fields.map((f) => f.threshold)).toEqual([0.4, undefined]);
    expect(out.relations).toEqual([{ name: 'works_for', threshold: 0.25 }]);
  });

  it('the engine cuts each multi-label label at its own threshold', () => {
    const spec = { task: 'm', labels: ['a', 'b', 'c'], multiLabel: true, labelThresholds: { a: 0.9, c: 0.1 } };
    // sigmoid(0) = 0.5, sigmoid(-1.5) ≈ 0.18
    const chosen = decodeClassification(spec, new Float32Array([0, 0, -1.5]), 0.5);
    expect(chosen.map((x) => x.label)).toEqual(['b', 'c']);
  });
});

describe('the evaluation predictor with a threshold grid', () => {
  const span = (start: number, score: number) => ({ text: 'x', start, end: start + 1, score });
  /** An engine stand-in: text 0 is read in two windows; each call reports its threshold's spans. */
  const calls: number[] = [];
  const engine = {
    infer: async (texts: string[], _schema: unknown, opts: { threshold: number }) => {
      calls.push(opts.threshold);
      return {
        results: texts.map(() => ({
          // the re-run of the windowed text alone: its windows merge differently without the low candidates
          entities: {
            person: [span(0, 0.9), span(2, 0.3), ...(texts.length === 1 ? [span(4, 0.6)] : [])].filter(
              (s) => s.score >= opts.threshold,
            ),
          },
          classifications: {},
          structures: {},
          relations: {},
        })),
        inputTokens: 10 * texts.length,
        textTokens: texts.map(() => 10),
        chunks: texts.map((t) => (t === 'long' ? 2 : 1)),
        groups: texts.map(() => 1),
      };
    },
  };
  const svc = { encoder: { localDir: async () => '/m', model: async () => engine } } as unknown as Services;

  it('runs once at the grid minimum and cuts; a windowed text is run again at the threshold for its answer', async () => {
    const predictor = new InProcessPredictor(svc);
    const model = {
      type: 'encoder',
      requested: 'm',
      baseModel: 'm',
      prefix: 'p/',
      projectId: null,
      trainingJobId: null,
    } as const;
    const out = await predictor.predict(model, ['long', 'short'], { entities: ['person'] }, 0.5, THRESHOLD_GRID);
    expect(calls).toEqual([0.05, 0.5]);
    expect(out.inputTokens).toBe(30); // 2 texts at 0.05, the windowed one again
    expect(out.predictions.map((p) => p.entities!.length)).toEqual([2, 1]);
    expect(out.cuts![1]!.map((p) => p.entities!.length)).toEqual([...Array(6).fill(2), ...Array(12).fill(1), 0]);
  });
});

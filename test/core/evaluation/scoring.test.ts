import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { DatasetSummary, validateRow, type NormalizedRow } from '../../../src/core/datasets/rows';
import { toEncoderSchema, type SchemaInput } from '../../../src/core/extraction/api';
import {
  emptyCounts,
  evaluationSchemaFor,
  finalizeMetrics,
  mergeCounts,
  normalizeSpace,
  normalizeValue,
  scoreRow,
  type EncoderPrediction,
  type EvaluationCounts,
  type EvaluationMetrics,
} from '../../../src/core/evaluation/scoring';
import { scoreRows, type EvaluationPredictor } from '../../../src/core/evaluation/workflow';

interface ExpectedBreakdown {
  tp: number;
  fp: number;
  fn: number;
  support: number;
  precision: number;
  recall: number;
  f1: number;
}
interface Case {
  name: string;
  rows: unknown[];
  predictions: (EncoderPrediction | null)[];
  expected: {
    precision: number;
    recall: number;
    f1: number;
    per_entity?: Record<string, ExpectedBreakdown>;
    per_label?: Record<string, ExpectedBreakdown>;
    per_field?: Record<string, ExpectedBreakdown>;
    per_relation?: Record<string, ExpectedBreakdown>;
    confusion?: { labels: string[]; matrix: number[][] } | null;
    support: Record<string, number>;
  };
}

const fixture = JSON.parse(readFileSync(join(process.cwd(), 'test/fixtures/evaluation/cases.json'), 'utf8')) as {
  tolerance: number;
  cases: Case[];
};
const TOL = fixture.tolerance;

/** Validates the fixture rows as the dataset pipeline would, and derives the schema from them. */
function prepare(c: Case): { rows: NormalizedRow[]; schema: SchemaInput } {
  const summary = new DatasetSummary();
  const rows = c.rows.map((raw, i) => {
    const r = validateRow(raw, i + 1);
    expect(r.errors).toEqual([]);
    expect(summary.add(r.row!, r.tasks, i + 1)).toEqual([]);
    return r.row!;
  });
  expect(summary.finish()).toEqual([]);
  const schema = evaluationSchemaFor(summary.describe());
  toEncoderSchema(schema); // the engine accepts it
  return { rows, schema };
}

const scoreAll = (rows: NormalizedRow[], preds: (EncoderPrediction | null)[], schema?: SchemaInput) =>
  rows.map((row, i) => scoreRow(row, preds[i], { schema, row: i + 1 })).reduce(mergeCounts, emptyCounts());

function expectClose(actual: number, expected: number, what: string) {
  if (Math.abs(actual - expected) > TOL) throw new Error(`${what}: expected ${expected}, got ${actual}`);
}

function checkMetrics(m: EvaluationMetrics, e: Case['expected'], name: string) {
  expectClose(m.precision, e.precision, `${name} precision`);
  expectClose(m.recall, e.recall, `${name} recall`);
  expectClose(m.f1, e.f1, `${name} f1`);
  for (const head of ['per_entity', 'per_label', 'per_field', 'per_relation'] as const) {
    const want = e[head];
    const got = m[head];
    if (!want) {
      expect([name, head, got]).toEqual([name, head, undefined]);
      continue;
    }
    expect([name, head, Object.keys(got ?? {}).sort()]).toEqual([name, head, Object.keys(want).sort()]);
    for (const [k, w] of Object.entries(want)) {
      const g = got![k]!;
      expect([name, head, k, g.tp, g.fp, g.fn, g.support]).toEqual([name, head, k, w.tp, w.fp, w.fn, w.support]);
      expectClose(g.precision, w.precision, `${name} ${head}.${k} precision`);
      expectClose(g.recall, w.recall, `${name} ${head}.${k} recall`);
      expectClose(g.f1, w.f1, `${name} ${head}.${k} f1`);
    }
  }
  if (e.confusion === undefined || e.confusion === null) expect(m.confusion).toBeUndefined();
  else expect(m.confusion).toEqual(e.confusion);
  expect(m.support).toEqual(e.support);
}

describe('scoring: the shared hand-computed cases (cases.json)', () => {
  it('has a case for every head', () => {
    const names = fixture.cases.map((c) => c.name);
    expect(names.length).toBeGreaterThanOrEqual(8);
    const keys = new Set(fixture.cases.flatMap((c) => Object.keys(c.expected)));
    for (const k of ['per_entity', 'per_label', 'per_field', 'per_relation', 'confusion']) expect(keys).toContain(k);
  });

  it.each(fixture.cases.map((c) => [c.name, c] as const))('%s', (_name, c) => {
    const { rows, schema } = prepare(c);
    expect(rows).toHaveLength(c.predictions.length);
    checkMetrics(finalizeMetrics(scoreAll(rows, c.predictions, schema)), c.expected, c.name);
  });

  it.each(fixture.cases.map((c) => [c.name, c] as const))('%s: the same micro numbers without a schema', (_name, c) => {
    const { rows } = prepare(c);
    const m = finalizeMetrics(scoreAll(rows, c.predictions));
    expectClose(m.precision, c.expected.precision, 'precision');
    expectClose(m.recall, c.expected.recall, 'recall');
    expectClose(m.f1, c.expected.f1, 'f1');
  });

  it.each(fixture.cases.map((c) => [c.name, c] as const))('%s: counts survive JSON and any shard split', (_name, c) => {
    const { rows, schema } = prepare(c);
    const single = rows.map((row, i) => scoreRow(row, c.predictions[i], { schema, row: i + 1 }));
    const wire = single.map((x) => JSON.parse(JSON.stringify(x)) as EvaluationCounts);
    const left = wire.reduce(mergeCounts, emptyCounts());
    const right = wire.reduceRight((acc, x) => mergeCounts(x, acc), emptyCounts());
    const halves = mergeCounts(
      wire.slice(0, 1).reduce(mergeCounts, emptyCounts()),
      wire.slice(1).reduce(mergeCounts, emptyCounts()),
    );
    const want = finalizeMetrics(scoreAll(rows, c.predictions, schema));
    expect(finalizeMetrics(left)).toEqual(want);
    expect(finalizeMetrics(right)).toEqual(want);
    expect(finalizeMetrics(halves)).toEqual(want);
  });
});

describe('evaluationSchemaFor', () => {
  it('asks for every head of a dataset version', () => {
    const schema = evaluationSchemaFor({
      task_types: ['classification', 'ner', 'relations', 'structures'],
      label_vocabulary: ['neg', 'pos'],
      entity_types: ['company', 'person'],
      relation_types: ['works for'],
      structures: { order: { item: { dtype: 'list' }, customer: { dtype: 'str' } } },
    });
    expect(schema).toEqual({
      entities: ['company', 'person'],
      classifications: [{ task: 'classification', labels: ['neg', 'pos'], multi_label: false }],
      structures: {
        order: {
          fields: [
            { name: 'item', dtype: 'list' },
            { name: 'customer', dtype: 'str' },
          ],
        },
      },
      relations: ['works for'],
    });
    expect(toEncoderSchema(schema).structures[0]!.fields.map((f) => f.dtype)).toEqual(['list', 'str']);
  });

  it('marks multi-label datasets and leaves out heads the dataset lacks', () => {
    expect(
      evaluationSchemaFor({
        task_types: ['multi_label_classification'],
        label_vocabulary: ['a', 'b'],
        entity_types: [],
        relation_types: [],
        structures: {},
      }),
    ).toEqual({
      classifications: [{ task: 'classification', labels: ['a', 'b'], multi_label: true }],
    });
    expect(evaluationSchemaFor({ task_types: ['sft'], label_vocabulary: [] })).toEqual({});
  });

  it('a field is a list when any row gave an array', () => {
    const summary = new DatasetSummary();
    for (const raw of [
      { text: 'Ann: tea', json_structures: [{ o: { who: 'Ann', what: ['tea'] } }] },
      { text: 'Bo', json_structures: [{ o: { who: 'Bo' } }] },
    ]) {
      const r = validateRow(raw, 1);
      summary.add(r.row!, r.tasks, 1);
    }
    expect(evaluationSchemaFor(summary.describe()).structures).toEqual({
      o: {
        fields: [
          { name: 'who', dtype: 'str' },
          { name: 'what', dtype: 'list' },
        ],
      },
    });
  });
});

describe('scoreRow details', () => {
  const schema: SchemaInput = { classifications: [{ task: 'classification', labels: ['a', 'b'], multi_label: false }] };

  it('normalises whitespace the same way as Python str.split()', () => {
    expect(normalizeSpace('  a\u00a0\u2003b\t\nc\u3000 ')).toBe('a b c');
    expect(normalizeSpace('a\u200bb')).toBe('a\u200bb'); // zero-width space is not whitespace
    expect(normalizeValue(' Zürich  AG ')).toBe('zürich ag');
  });

  it('keeps at most max_examples misclassified rows, merged in order', () => {
    const rows = Array.from({ length: 5 }, (_, i) => ({ id: `r${i}`, text: `t${i}`, label: 'a' }));
    const counts = rows.map((r) =>
      scoreRow(r, { classifications: { classification: [{ label: 'b', score: 0.9 }] } }, { schema, maxExamples: 3 }),
    );
    const merged = counts.reduce(mergeCounts);
    expect(merged.examples.map((e) => e.id)).toEqual(['r0', 'r1', 'r2']);
    expect(merged.examples[0]).toEqual({ id: 'r0', text: 't0', gold: { labels: ['a'] }, predicted: { labels: ['b'] } });
    expect(finalizeMetrics(merged).examples).toHaveLength(3);
    // correct rows are not examples
    expect(
      scoreRow(rows[0]!, { classifications: { classification: [{ label: 'a', score: 0.9 }] } }, { schema }).examples,
    ).toEqual([]);
  });

  it('truncates example text to 300 code points (an emoji is one)', () => {
    const text = '😀'.repeat(400);
    const c = scoreRow({ text, label: 'a' }, {}, { schema, row: 7 });
    expect(c.examples[0]!.id).toBe(7);
    expect(Array.from(c.examples[0]!.text)).toHaveLength(300);
    expect(c.examples[0]!.text).toBe('😀'.repeat(300));
    expect(c.examples[0]!.predicted).toEqual({});
  });

  it('lists the entities missed and the spurious ones in an example', () => {
    const c = scoreRow(
      {
        text: 'Tim Cook at Apple',
        entities: [
          { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
          { text: 'Apple', label: 'org' },
        ],
      },
      {
        entities: [
          { text: 'Tim', label: 'person', score: 0.5, start: 0, end: 3 },
          { text: 'Apple', label: 'org', score: 0.9, start: 12, end: 17 },
        ],
      },
    );
    expect(c.examples[0]).toEqual({
      text: 'Tim Cook at Apple',
      gold: { entities: [{ text: 'Tim Cook', label: 'person', start: 0, end: 8 }] },
      predicted: { entities: [{ text: 'Tim', label: 'person', start: 0, end: 3 }] },
    });
  });

  it('labels named like Object.prototype members are ordinary keys', () => {
    const s: SchemaInput = { entities: ['__proto__', 'constructor'] };
    const c = scoreRow(
      { text: 'x y', entities: [{ text: 'x', label: '__proto__', start: 0, end: 1 }] },
      {
        entities: [
          { text: 'x', label: '__proto__', score: 1, start: 0, end: 1 },
          { text: 'y', label: 'constructor', score: 1, start: 2, end: 3 },
        ],
      },
      { schema: s },
    );
    const wire = JSON.parse(JSON.stringify(mergeCounts(c, c))) as EvaluationCounts;
    const m = finalizeMetrics(mergeCounts(wire, emptyCounts()));
    expect(Object.keys(m.per_entity!).sort()).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(m.per_entity!, '__proto__')?.value).toMatchObject({ tp: 2, fp: 0, fn: 0 });
    expect(m.per_entity!.constructor).toMatchObject({ tp: 0, fp: 2, fn: 0 });
    expect(Object.getPrototypeOf(m.per_entity)).toBe(Object.prototype);
  });

  it('ignores types outside the schema on both sides', () => {
    const c = scoreRow(
      { text: 'Tim in Paris', entities: [{ text: 'Paris', label: 'city', start: 7, end: 12 }] },
      { entities: [{ text: 'Tim', label: 'person', score: 1, start: 0, end: 3 }] },
      { schema: { entities: ['person'] } },
    );
    expect(finalizeMetrics(c).per_entity).toEqual({
      person: { f1: 0, precision: 0, recall: 0, support: 0, tp: 0, fp: 1, fn: 0 },
    });
  });

  it('single-label: top-1 is the highest score, the first on ties; labels outside the schema still count', () => {
    const tie = scoreRow(
      { text: 't', label: 'b' },
      {
        classifications: {
          classification: [
            { label: 'a', score: 0.5 },
            { label: 'b', score: 0.5 },
          ],
        },
      },
      { schema },
    );
    expect(tie.confusion).toEqual({ b: { a: 1 } });
    const outside = finalizeMetrics(
      scoreRow(
        { text: 't', label: 'a' },
        { classifications: { classification: [{ label: 'zzz', score: 0.9 }] } },
        { schema },
      ),
    );
    expect(outside.per_label).toMatchObject({
      a: { tp: 0, fp: 0, fn: 1 },
      b: { tp: 0, fp: 0, fn: 0 },
      zzz: { tp: 0, fp: 1, fn: 0 },
    });
    expect(outside.confusion).toEqual({
      labels: ['a', 'zzz'],
      matrix: [
        [0, 1],
        [0, 0],
      ],
    });
  });

  it('an empty counts object finalizes to zeros with no breakdowns', () => {
    expect(finalizeMetrics(emptyCounts())).toEqual({ f1: 0, precision: 0, recall: 0, support: { rows: 0 } });
  });
});

describe('which head answered (routes)', () => {
  const rows = Array.from({ length: 20 }, (_, i) => ({ text: `row ${i}`, label: i % 2 ? 'a' : 'b' }) as NormalizedRow);
  const schema: SchemaInput = { classifications: [{ task: 'classification', labels: ['a', 'b'] }] };
  const model = {
    type: 'encoder',
    requested: 'm',
    baseModel: 'm',
    prefix: 'p/',
    projectId: null,
    trainingJobId: null,
  } as const;
  const predictor = (route: 'pooled' | 'gliner2'): EvaluationPredictor => ({
    predict: async (_m, texts) => ({
      predictions: texts.map(() => ({ classifications: { classification: [{ label: 'a', score: 1 }] } })),
      inputTokens: texts.length,
      routes: { classification: route },
    }),
  });

  it('counts the rows each route answered per task, merges shards through JSON, and names the route in the metrics', async () => {
    const a = (await scoreRows(predictor('pooled'), model, rows, schema)).counts;
    expect(a.routes).toEqual({ classification: { pooled: 20 } });
    const b = (await scoreRows(predictor('pooled'), model, rows.slice(0, 3), schema)).counts;
    const merged = mergeCounts(JSON.parse(JSON.stringify(a)), JSON.parse(JSON.stringify(b)));
    expect(merged.routes).toEqual({ classification: { pooled: 23 } });
    expect(finalizeMetrics(merged).routes).toEqual({ classification: 'pooled' });
    const g = (await scoreRows(predictor('gliner2'), model, rows, schema)).counts;
    expect(finalizeMetrics(g).routes).toEqual({ classification: 'gliner2' });
  });

  it('counts without routes (shards written before them) merge and finalize without a routes key', () => {
    const old = scoreRow(rows[0]!, { classifications: { classification: [{ label: 'b' }] } }, { schema });
    expect(mergeCounts(old, emptyCounts()).routes).toBeUndefined();
    expect(finalizeMetrics(old)).not.toHaveProperty('routes');
  });
});

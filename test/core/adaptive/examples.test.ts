/** Traces → training examples: uncertainty, gold from feedback, the fixed held-out split, replay. */
import {
  classificationUncertainty,
  examplesFromTrace,
  isHeldOut,
  nerUncertainty,
  selectExamples,
} from '../../../src/core/adaptive/examples';
import type { InferenceRecord } from '../../../src/core/inferences';

let n = 0;
function trace(over: Partial<InferenceRecord> & Pick<InferenceRecord, 'input' | 'output'>): InferenceRecord {
  n += 1;
  return {
    inference_id: `inf_${String(n).padStart(26, '0')}`,
    model_id: 'support',
    type: 'encoder',
    tasks: ['ner'],
    project_id: 'p',
    training_job_id: 'j',
    endpoint: '/inference',
    usage: {},
    latency_ms: 1,
    created_at: `2026-11-22T10:00:${String(n % 60).padStart(2, '0')}.000Z`,
    feedback: null,
    ...over,
  };
}
const text = 'Tim Cook visited Paris.';
const tim = { text: 'Tim Cook', label: 'person', start: 0, end: 8 };
const paris = { text: 'Paris', label: 'city', start: 17, end: 22 };

describe('uncertainty', () => {
  it('NER: 1 at the threshold, 0 at certainty, 1 when one span gets two labels', () => {
    expect(nerUncertainty([{ ...tim, score: 0.5 }], 0.5)).toBe(1);
    expect(nerUncertainty([{ ...tim, score: 1 }], 0.5)).toBe(0);
    expect(nerUncertainty([{ ...tim, score: 0.75 }], 0.5)).toBeCloseTo(0.5);
    expect(
      nerUncertainty(
        [
          { ...tim, score: 0.99 },
          { ...tim, label: 'company', score: 0.99 },
        ],
        0.5,
      ),
    ).toBe(1);
    expect(nerUncertainty([], 0.5)).toBe(0);
  });

  it('classification: a softmax top class at 0.5 is a toss-up; no answer counts as unsure', () => {
    expect(classificationUncertainty([{ label: 'a', score: 0.5 }], false, 0.5)).toBe(1);
    expect(classificationUncertainty([{ label: 'a', score: 0.95 }], false, 0.5)).toBeCloseTo(0.1);
    expect(classificationUncertainty([], false, 0.5)).toBe(1);
    expect(
      classificationUncertainty(
        [
          { label: 'a', score: 0.55 },
          { label: 'b', score: 0.99 },
        ],
        true,
        0.5,
      ),
    ).toBeCloseTo(0.9);
  });
});

describe('examplesFromTrace', () => {
  it('feedback `correct` confirms the output; `incorrect` replaces the corrected heads; scores are dropped', () => {
    const output = { entities: [{ ...tim, score: 0.6 }] };
    const ok = examplesFromTrace(
      trace({ input: { text }, output, feedback: { verdict: 'correct', corrected_output: null, created_at: 'f1' } }),
    );
    expect(ok).toEqual([expect.objectContaining({ kind: 'gold', row: { text, entities: [tim] }, feedback_at: 'f1' })]);
    const fixed = examplesFromTrace(
      trace({
        input: { text },
        output,
        feedback: { verdict: 'incorrect', corrected_output: { entities: [tim, paris] }, created_at: 'f2' },
      }),
    );
    expect(fixed[0]).toMatchObject({ kind: 'gold', row: { text, entities: [tim, paris] } });
  });

  it('without feedback: informative near the threshold, confident far above it', () => {
    const unsure = examplesFromTrace(
      trace({ input: { text, threshold: 0.4 }, output: { entities: [{ ...tim, score: 0.45 }] } }),
    );
    expect(unsure[0]).toMatchObject({ kind: 'informative' });
    expect(unsure[0]!.uncertainty).toBeGreaterThan(0.9);
    const sure = examplesFromTrace(trace({ input: { text }, output: { entities: [{ ...tim, score: 0.98 }] } }));
    expect(sure[0]).toMatchObject({ kind: 'confident', row: { text, entities: [tim] } });
  });

  it('a batch gives one example per text and ignores its feedback (it cannot be split per text)', () => {
    const batch = trace({
      input: { text: [text, 'Paris.'] },
      output: [{ entities: [{ ...tim, score: 0.99 }] }, { entities: [{ ...paris, start: 0, end: 5, score: 0.51 }] }],
      feedback: { verdict: 'correct', corrected_output: null, created_at: 'f' },
    });
    expect(examplesFromTrace(batch).map((e) => e.kind)).toEqual(['confident', 'informative']);
  });

  it('classification rows need exactly one classification task; corrections give the label itself', () => {
    const schema = { classifications: [{ task: 'intent', labels: ['refund', 'billing'] }] };
    const record = trace({
      tasks: ['classification'],
      input: { text, schema },
      output: { classifications: { intent: [{ label: 'billing', score: 0.52 }] } },
      feedback: { verdict: 'incorrect', corrected_output: { classifications: { intent: 'refund' } }, created_at: 'f' },
    });
    expect(examplesFromTrace(record)[0]).toMatchObject({ kind: 'gold', row: { text, label: 'refund' } });
    const two = trace({
      tasks: ['classification'],
      input: {
        text,
        schema: { classifications: [...schema.classifications, { task: 'tone', labels: ['calm', 'angry'] }] },
      },
      output: { classifications: { intent: [{ label: 'refund', score: 0.9 }], tone: [{ label: 'calm', score: 0.9 }] } },
    });
    expect(examplesFromTrace(two)).toEqual([]);
  });

  it('decoder traces and structure-only traces give nothing', () => {
    expect(
      examplesFromTrace(trace({ type: 'decoder', tasks: ['generate'], input: { messages: [] }, output: {} })),
    ).toEqual([]);
    expect(examplesFromTrace(trace({ tasks: ['structures'], input: { text }, output: { structures: {} } }))).toEqual(
      [],
    );
  });
});

describe('selectExamples', () => {
  const gold = (i: number, at = `2026-11-22T11:00:${String(i).padStart(2, '0')}.000Z`) =>
    trace({
      input: { text: `ticket ${i} from Tim Cook` },
      output: { entities: [{ ...tim, score: 0.7 }] },
      feedback: { verdict: 'correct', corrected_output: null, created_at: at },
    });

  it('splits gold rows by a fixed hash (never the same trace on both sides), replays at most as many confident rows', () => {
    const traces = [
      ...Array.from({ length: 20 }, (_, i) => gold(i)),
      ...Array.from({ length: 40 }, (_, i) =>
        trace({ input: { text: `sure ${i}` }, output: { entities: [{ ...tim, score: 0.99 }] } }),
      ),
      trace({ input: { text: 'unsure' }, output: { entities: [{ ...tim, score: 0.51 }] } }),
    ];
    const s = selectExamples(
      traces.length,
      traces.flatMap((t) => examplesFromTrace(t)),
      null,
    );
    expect(s.counts.gold).toBe(20);
    expect(s.counts.holdout).toBeGreaterThanOrEqual(2);
    expect(s.counts.holdout + (s.counts.train - s.counts.replay)).toBe(20);
    expect(s.counts.replay).toBe(20 - s.counts.holdout);
    const held = new Set(s.holdout.map((r) => r.text));
    expect(s.train.some((r) => held.has(r.text))).toBe(false);
    expect(s.review).toEqual([{ inference_id: traces.at(-1)!.inference_id, uncertainty: expect.any(Number) }]);
    // the split is a property of each trace, not of the run: another order, another run, same split
    const again = selectExamples(
      traces.length,
      [...traces].reverse().flatMap((t) => examplesFromTrace(t)),
      null,
    );
    expect(new Set(again.holdout.map((r) => r.text))).toEqual(held);
    const hashed = traces.slice(0, 20).filter((t) => isHeldOut(t.inference_id, t.input.text as string));
    for (const t of hashed) expect(held.has(t.input.text as string)).toBe(true);
  });

  it('counts only feedback newer than the last trained cycle as new; the newest label of a text wins', () => {
    const old = gold(1, '2026-11-01T00:00:00.000Z');
    const fresh = trace({
      input: { text: old.input.text },
      output: { entities: [] },
      feedback: { verdict: 'incorrect', corrected_output: { entities: [] }, created_at: '2026-11-22T12:00:00.000Z' },
    });
    fresh.created_at = '2026-11-22T12:00:00.000Z';
    const s = selectExamples(
      2,
      [old, fresh].flatMap((t) => examplesFromTrace(t)),
      '2026-11-10T00:00:00.000Z',
    );
    expect(s.counts.gold).toBe(1);
    expect(s.counts.new_gold).toBe(1);
    expect([...s.train, ...s.holdout]).toEqual([{ text: old.input.text, entities: [] }]);
  });
});

/** Label-existing endpoints (docs/reference/decisions.md#generation) on the mini model: real annotations, order kept, bounds enforced. */
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
}, 120_000);
afterAll(async () => stack?.stop());

const cp = (s: string, start: number, end: number) => Array.from(s).slice(start, end).join('');

it('labels entities in existing texts, with code-point offsets, one result per input in order', async () => {
  const inputs = ['😀 Tim Cook visited Paris.', 'Satya Nadella spoke in Berlin.', 'Nothing to see here.'];
  const res = await stack.call('POST', '/generate/ner/label-existing', {
    body: { labels: ['person', 'city'], inputs, threshold: 0.4 },
  });
  expect(res.status).toBe(200);
  expect(res.body.model_id).toBe('sift/gliner2-mini-v1');
  expect(res.body.results.map((r: any) => r.text)).toEqual(inputs);
  expect(res.body.results.map((r: any) => r.windows)).toEqual([1, 1, 1]); // short inputs: one encoder pass each
  const first = res.body.results[0].entities;
  expect(first).toContainEqual(expect.objectContaining({ text: 'Tim Cook', label: 'person', start: 2, end: 10 }));
  for (const r of res.body.results) for (const e of r.entities) expect(cp(r.text, e.start, e.end)).toBe(e.text);
  expect(res.body.usage.input_tokens).toBeGreaterThan(0);
  // annotations are dataset material, not inference history
  expect((await stack.call('GET', '/inferences')).body.data).toHaveLength(0);
});

it('classifies existing texts into one label each, across more inputs than one engine batch', async () => {
  const inputs = Array.from({ length: 70 }, (_, i) =>
    i % 2 ? `Terrible, it broke after a day (${i}).` : `I love it, works great (${i}).`,
  );
  const res = await stack.call('POST', '/generate/classification/label-existing', {
    body: { labels: ['positive', 'negative'], inputs },
  });
  expect(res.status).toBe(200);
  expect(res.body.results).toHaveLength(70);
  for (const r of res.body.results) {
    expect(['positive', 'negative']).toContain(r.label);
    expect(r.score).toBeGreaterThan(0);
  }
  expect(res.body.results[0].text).toBe(inputs[0]);
  expect(res.body.results[69].text).toBe(inputs[69]);
});

it.each([
  ['no inputs', { labels: ['a'], inputs: [] }, ['body', 'inputs']],
  ['1,001 inputs', { labels: ['a'], inputs: Array.from({ length: 1001 }, () => 'x') }, ['body', 'inputs']],
  ['no labels', { labels: [], inputs: ['x'] }, ['body', 'labels']],
  ['an empty input', { labels: ['a'], inputs: ['ok', '  '] }, ['body', 'inputs', 1]],
  ['duplicate labels', { labels: ['a', 'a'], inputs: ['x'] }, ['body', 'labels']],
])('422 for %s, naming the field', async (_name, body, loc) => {
  const res = await stack.call('POST', '/generate/ner/label-existing', { body });
  expect(res.status).toBe(422);
  expect(res.body.errors[0].loc).toEqual(loc);
});

it('a decoder model is refused', async () => {
  const res = await stack.call('POST', '/generate/classification/label-existing', {
    body: { labels: ['a'], inputs: ['x'], model_id: 'HuggingFaceTB/SmolLM2-135M-Instruct' },
  });
  expect(res.status).toBe(422);
});

/**
 * Issue #30's classification test, for real through the HTTP API: a fine-tuning job on a small
 * many-label single-label set (12 banking intents × 7 rows, test/fixtures/pooled/intents.json) carries a
 * pooled classifier; on 36 held-out rows it answers (the evaluation and the stored inference record say
 * `pooled`) and beats the same model's GLiNER2 route, which a label outside the trained vocabulary forces.
 */
import { readFileSync } from 'node:fs';
import { jest } from '@jest/globals';
import { jsonl, TestStack } from '../helpers/localStack';

jest.setTimeout(10 * 60_000);

const intents = JSON.parse(readFileSync(new URL('../fixtures/pooled/intents.json', import.meta.url), 'utf8')) as Record<
  string,
  string[]
>;
const labels = Object.keys(intents);
const rows = (from: number, to: number) =>
  labels.flatMap((label) => intents[label]!.slice(from, to).map((text) => ({ text, label })));
const train = rows(0, 7);
const heldOut = rows(7, 10);

let stack: TestStack;

beforeAll(async () => {
  stack = await TestStack.start({ maxTrainingJobs: 1, withModels: true });
});
afterAll(async () => stack?.stop());

it('a fine-tuned model answers its trained labels through the pooled classifier, beating its GLiNER2 route', async () => {
  expect(labels).toHaveLength(12);
  expect((await stack.uploadDataset('intents', jsonl(train))).status).toBe('ready');
  expect((await stack.uploadDataset('intents-test', jsonl(heldOut))).status).toBe('ready');
  const created = await stack.call('POST', '/core/training-jobs', {
    body: {
      model_name: 'intents',
      base_model: 'sift/gliner2-mini-v1',
      datasets: [{ name: 'intents' }],
      training_type: 'full',
      // one epoch keeps the test within its budget on 2 cores; the pooled head is fitted after it either way
      nr_epochs: 1,
    },
  });
  expect(created.status).toBe(201);
  const job = await stack.settled(`/core/training-jobs/${created.body.id}`);
  expect(job.error).toBeNull();
  expect(job.status).toBe('complete');

  // the evaluation on the held-out rows: the pooled route answered every row
  const ev = await stack.call('POST', '/core/evaluations', {
    body: { base_model: job.id, dataset_name: 'intents-test' },
  });
  const pooled = await stack.settled(`/core/evaluations/${ev.body.id}`);
  expect(pooled.status).toBe('complete');
  expect(pooled.metrics.routes).toEqual({ classification: 'pooled' });
  expect(pooled.metrics.support.rows).toBe(heldOut.length);

  // the same model and texts through the GLiNER2 route: one label outside the vocabulary sends the task there
  expect((await stack.call('POST', `/core/training-jobs/${job.id}/deploy`)).status).toBe(200);
  const ask = (asked: string[]) =>
    stack.call('POST', '/inference', {
      body: {
        model_id: job.id,
        text: heldOut.map((r) => r.text),
        schema: { classifications: [{ task: 'intent', labels: asked }] },
      },
    });
  const accuracy = (res: any) =>
    res.body.result.filter((r: any, i: number) => r.classifications.intent[0].label === heldOut[i]!.label).length /
    heldOut.length;
  const [viaPooled, viaGliner2] = await Promise.all([ask(labels), ask([...labels, 'other'])]);
  expect([viaPooled.status, viaGliner2.status]).toEqual([200, 200]);
  const routeOf = async (res: any) => (await stack.call('GET', `/inferences/${res.body.inference_id}`)).body.routes;
  expect(await routeOf(viaPooled)).toEqual({ intent: 'pooled' });
  expect(await routeOf(viaGliner2)).toEqual({ intent: 'gliner2' });
  // single-label micro F1 is accuracy; the inference and the evaluation agree on the pooled route
  expect(accuracy(viaPooled)).toBeCloseTo(pooled.metrics.f1, 6);
  console.log(
    `pooled route accuracy ${pooled.metrics.f1.toFixed(3)}, GLiNER2 route ${accuracy(viaGliner2).toFixed(3)} (${heldOut.length} held-out rows)`,
  );
  expect(pooled.metrics.f1).toBeGreaterThanOrEqual(accuracy(viaGliner2) + 0.2);
});

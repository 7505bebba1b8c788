/**
 * Evaluations through HTTP: the evaluation state machine (the deployed ASL, run in-process) scores
 * the real engine's predictions on the mini model against a labelled dataset, for a base model and
 * for a complete training job; failures land on the record; bad requests get 4xx.
 */
import { jsonl, TestStack } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';

let stack: TestStack;
let teamId: string;
let jobId: string;

const nerRows = [
  {
    text: 'Tim Cook visited the Apple office in Paris.',
    entities: [
      { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
      { text: 'Paris', label: 'city', start: 37, end: 42 },
    ],
  },
  {
    text: 'Satya Nadella met reporters in Berlin on Monday.',
    entities: [
      { text: 'Satya Nadella', label: 'person', start: 0, end: 13 },
      { text: 'Berlin', label: 'city', start: 31, end: 37 },
    ],
  },
  {
    text: 'Lisa Su spoke in Tokyo.',
    entities: [
      ['Lisa Su', 'person'],
      ['Tokyo', 'city'],
    ],
  },
];
const clsRows = [
  { text: 'I love this product, it works great.', label: 'positive' },
  { text: 'Terrible, it broke after a day.', label: 'negative' },
  { text: 'Absolutely wonderful experience, would buy again.', label: 'positive' },
  { text: 'Awful support and a broken screen.', label: 'negative' },
];

async function waitFor(id: string): Promise<any> {
  await stack.service.idle();
  for (let i = 0; i < 600; i++) {
    const ev = (await stack.call('GET', `/core/evaluations/${id}`)).body;
    if (ev.status !== 'running') return ev;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('evaluation did not finish');
}

beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
  teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
  expect((await stack.uploadDataset('people-eval', jsonl(nerRows))).status).toBe('ready');
  expect((await stack.uploadDataset('sentiment-eval', jsonl(clsRows))).status).toBe('ready');
  expect(
    (
      await stack.uploadDataset(
        'chat-only',
        jsonl([
          {
            messages: [
              { role: 'user', content: 'hi' },
              { role: 'assistant', content: 'hello' },
            ],
          },
        ]),
      )
    ).status,
  ).toBe('ready');
  jobId = (await seedCompleteEncoderJob(stack, teamId, 'people-eval')).id;
}, 180_000);
afterAll(async () => stack?.stop());

describe('POST /core/evaluations', () => {
  it('scores a base model on NER: running, then complete with micro and per-entity metrics', async () => {
    const created = await stack.call('POST', '/core/evaluations', {
      body: { base_model: 'sift/gliner2-mini-v1', dataset_name: 'people-eval' },
    });
    expect(created.status).toBe(202);
    expect(created.body).toMatchObject({ id: expect.any(String), status: 'running' });
    const ev = await waitFor(created.body.id);
    expect(ev.status).toBe('complete');
    expect(ev.error).toBeNull();
    const m = ev.metrics;
    for (const k of ['f1', 'precision', 'recall']) {
      expect(m[k]).toBeGreaterThanOrEqual(0);
      expect(m[k]).toBeLessThanOrEqual(1);
    }
    expect(Object.keys(m.per_entity).sort()).toEqual(['city', 'person']);
    // the mini model finds these plain names: anything near zero means scoring or offsets broke
    expect(m.per_entity.person.recall).toBeGreaterThan(0.5);
    // micro F1 is consistent with micro P/R
    if (m.precision + m.recall > 0)
      expect(m.f1).toBeCloseTo((2 * m.precision * m.recall) / (m.precision + m.recall), 6);
  });

  it('scores a complete training job (not deployed) on classification with a confusion matrix', async () => {
    const created = await stack.call('POST', '/core/evaluations', {
      body: { base_model: jobId, dataset_name: 'sentiment-eval' },
    });
    expect(created.status).toBe(202);
    const ev = await waitFor(created.body.id);
    expect(ev.status).toBe('complete');
    expect(ev.training_job_id).toBe(jobId);
    expect(Object.keys(ev.metrics.per_label).sort()).toEqual(['negative', 'positive']);
    const { labels, matrix } = ev.metrics.confusion;
    expect(labels).toEqual(expect.arrayContaining(['negative', 'positive']));
    // every gold row lands in exactly one cell
    expect(matrix.flat().reduce((a: number, b: number) => a + b, 0)).toBe(clsRows.length);
    const list = await stack.call('GET', '/core/evaluations');
    expect(list.body.data.map((e: any) => e.id)).toContain(created.body.id);
  });

  it('refuses what cannot be evaluated', async () => {
    const decoder = await stack.call('POST', '/core/evaluations', {
      body: { base_model: 'HuggingFaceTB/SmolLM2-135M-Instruct', dataset_name: 'people-eval' },
    });
    expect(decoder.status).toBe(422);
    expect(decoder.body.errors[0].loc).toEqual(['body', 'base_model']);
    const unknown = await stack.call('POST', '/core/evaluations', {
      body: { base_model: 'acme/nothing', dataset_name: 'people-eval' },
    });
    expect(unknown.status).toBe(422);
    const noLabels = await stack.call('POST', '/core/evaluations', {
      body: { base_model: 'sift/gliner2-mini-v1', dataset_name: 'chat-only' },
    });
    expect(noLabels.status).toBe(422);
    expect(noLabels.body.errors[0].loc).toEqual(['body', 'dataset_name']);
    expect(
      (
        await stack.call('POST', '/core/evaluations', {
          body: { base_model: 'sift/gliner2-mini-v1', dataset_name: 'missing' },
        })
      ).status,
    ).toBe(404);
    const badProject = await stack.call('POST', '/core/evaluations', {
      body: { base_model: 'sift/gliner2-mini-v1', dataset_name: 'people-eval', project_id: 'nope' },
    });
    expect(badProject.status).toBe(422);
    expect(badProject.body.errors[0].loc).toEqual(['body', 'project_id']);
  });

  it('a failure inside the workflow ends the evaluation failed with the reason', async () => {
    // the job's weights disappear after the evaluation was accepted: the shard task fails
    const doomed = await seedCompleteEncoderJob(stack, teamId, 'people-eval', 'doomed');
    await stack.svc.blobs.deletePrefix(`jobs/${teamId}/${doomed.id}/model/onnx/`);
    const created = await stack.call('POST', '/core/evaluations', {
      body: { base_model: doomed.id, dataset_name: 'people-eval' },
    });
    expect(created.status).toBe(202);
    const ev = await waitFor(created.body.id);
    expect(ev.status).toBe('failed');
    expect(ev.error).toMatch(/no servable ONNX export/);
    expect(ev.finished_at).toEqual(expect.any(String));
  });

  it('filters by project and deletes', async () => {
    const project = (await stack.call('POST', '/projects', { body: { name: 'eval-project' } })).body;
    const created = await stack.call('POST', '/core/evaluations', {
      body: { base_model: 'sift/gliner2-mini-v1', dataset_name: 'sentiment-eval', project_id: 'eval-project' },
    });
    expect(created.status).toBe(202);
    await waitFor(created.body.id);
    const filtered = await stack.call('GET', `/core/evaluations?project_id=${project.id}`);
    expect(filtered.body.data.map((e: any) => e.id)).toEqual([created.body.id]);
    expect((await stack.call('DELETE', `/core/evaluations/${created.body.id}`)).status).toBe(200);
    expect((await stack.call('GET', `/core/evaluations/${created.body.id}`)).status).toBe(404);
  });
});

describe('calibrated thresholds: an evaluation reports them, a deployment opts in', () => {
  // the mini model scores "Apple office" as a person at ~0.075 and the rest at ~1: with it labelled
  // a person, F1 is 1 only at 0.05, so that is the person type's best threshold (city's: 0.5)
  const text = 'Tim Cook visited the Apple office in Paris.';
  const row = {
    text,
    entities: [
      { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
      { text: 'Apple office', label: 'person', start: 21, end: 33 },
      { text: 'Paris', label: 'city', start: 37, end: 42 },
    ],
  };
  const schema = {
    entities: ['person', 'city'],
    classifications: [{ task: 'tone', labels: ['positive', 'negative'] }],
  };
  const ask = (model_id: string, threshold?: number) =>
    stack.call('POST', '/inference', {
      body: { model_id, text, schema, ...(threshold !== undefined ? { threshold } : {}) },
    });
  const people = (res: any) =>
    (res.body.result.entities as any[]).filter((e) => e.label === 'person').map((e) => e.text);
  const deploy = (job: string, body: Record<string, unknown>) =>
    stack.call('POST', `/core/training-jobs/${job}/deploy`, { body });

  it('per-type curves and best thresholds; calibrated deployments apply them unless the request sends a threshold', async () => {
    expect((await stack.uploadDataset('calib-people', jsonl([row]))).status).toBe('ready');
    const job = (await seedCompleteEncoderJob(stack, teamId, 'calib-people', 'calib')).id;

    // opting in before any evaluation of the job exists
    const none = await deploy(job, { thresholds: 'calibrated' });
    expect(none.status).toBe(422);
    expect(none.body.errors[0].loc).toEqual(['body', 'thresholds']);

    const ev = await waitFor(
      (await stack.call('POST', '/core/evaluations', { body: { base_model: job, dataset_name: 'calib-people' } })).body
        .id,
    );
    expect(ev.status).toBe('complete');
    // the F1 at 0.5 is as it always was: Apple office missed
    expect(ev.metrics.per_entity.person).toMatchObject({ tp: 1, fn: 1, fp: 0 });
    const person = ev.metrics.calibration.per_entity.person;
    expect(person).toMatchObject({ best_threshold: 0.05, f1: 1, support: 2 });
    expect(person.curve).toHaveLength(19);
    expect(ev.metrics.calibration.per_entity.city.best_threshold).toBe(0.5);
    expect(ev.metrics.calibration.per_label).toBeUndefined();

    // validation: each error names its field
    const errs = [
      [{ evaluation_id: ev.id }, 'evaluation_id'],
      [{ thresholds: 'calibrated', evaluation_id: 'nope' }, 'evaluation_id'],
      [{ thresholds: 'calibrated', evaluation_id: '00000000-0000-4000-8000-000000000000' }, 'evaluation_id'],
      [{ thresholds: 'calibrated', evaluation_id: ev.id, checkpoint_id: 'x' }, 'checkpoint_id'],
      [{ thresholds: 'sometimes' }, 'thresholds'],
    ] as const;
    for (const [body, field] of errs) {
      const res = await deploy(job, body);
      expect([res.status, res.body.errors?.[0]?.loc?.at(-1)]).toEqual([422, field]);
    }
    const other = await deploy(jobId, { thresholds: 'calibrated', evaluation_id: ev.id });
    expect(other.status).toBe(422);
    expect(other.body.detail).toMatch(/not training job/);

    // without the opt-in: 0.5 for every type
    expect((await deploy(job, {})).body.deployment.thresholds).toBeNull();
    const plain = await ask(job);
    expect(people(plain)).toEqual(['Tim Cook']);

    const on = await deploy(job, { thresholds: 'calibrated' });
    expect(on.status).toBe(200);
    expect(on.body.deployment.thresholds).toEqual({
      evaluation_id: ev.id,
      entities: { person: 0.05, city: 0.5 },
      labels: {},
      fields: {},
      relations: {},
    });
    const calibrated = await ask(job);
    expect(people(calibrated)).toEqual(['Tim Cook', 'Apple office']);
    // single-label heads have no threshold: unchanged
    expect(calibrated.body.result.classifications).toEqual(plain.body.result.classifications);
    // a request's threshold wins
    expect(people(await ask(job, 0.5))).toEqual(['Tim Cook']);
    // the same weights as a catalog model: no calibration
    expect(people(await ask('sift/gliner2-mini-v1'))).toEqual(['Tim Cook']);

    // a project follows its job's deployment; a promotion may set or reset the thresholds
    await stack.call('POST', '/projects', { body: { name: 'calib-project' } });
    const promote = (body: Record<string, unknown>) =>
      stack.call('POST', '/projects/calib-project/deployments', { body: { training_job_id: job, ...body } });
    expect((await promote({})).status).toBe(201);
    expect(people(await ask('calib-project'))).toEqual(['Tim Cook', 'Apple office']); // re-pin keeps them
    expect((await promote({ thresholds: 'default' })).status).toBe(201);
    expect(people(await ask('calib-project'))).toEqual(['Tim Cook']);
    expect((await promote({ thresholds: 'calibrated', evaluation_id: ev.id })).status).toBe(201);
    expect(people(await ask('calib-project'))).toEqual(['Tim Cook', 'Apple office']);
  }, 180_000);
});

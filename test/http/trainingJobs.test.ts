import { checkpointItem } from '../../src/core/recordKeys';
import { transitionJob } from '../../src/core/trainingJobs';
import { TestStack, jsonl } from '../helpers/localStack';

let stack: TestStack;
const ner = jsonl([
  {
    text: 'Tim Cook leads Apple.',
    entities: [
      ['Tim Cook', 'person'],
      ['Apple', 'company'],
    ],
  },
  {
    text: 'Satya Nadella runs Microsoft.',
    entities: [
      ['Satya Nadella', 'person'],
      ['Microsoft', 'company'],
    ],
  },
]);
const sft = jsonl([
  {
    messages: [
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: 'hello' },
    ],
  },
]);
const dpo = jsonl([{ prompt: 'Say hi', chosen: 'Hi!', rejected: 'No.' }]);

beforeAll(async () => {
  stack = await TestStack.start();
  expect((await stack.uploadDataset('ner-set', ner)).status).toBe('ready');
  expect((await stack.uploadDataset('chat-set', sft)).status).toBe('ready');
  expect((await stack.uploadDataset('pref-set', dpo)).status).toBe('ready');
});
afterAll(async () => stack.stop());

const create = (body: Record<string, unknown>, key?: string) =>
  stack.call('POST', '/core/training-jobs', { body, ...(key ? { key } : {}) });

describe('POST /core/training-jobs', () => {
  it('creates a requested job with defaults from the base model, pinned to the dataset version', async () => {
    const res = await create({
      model_name: 'my-ner',
      base_model: 'fastino/gliner2-base-v1',
      datasets: [{ name: 'ner-set' }],
    });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), status: 'requested' });
    const job = (await stack.call('GET', `/core/training-jobs/${res.body.id}`)).body;
    expect(job).toMatchObject({
      model_name: 'my-ner',
      training_type: 'lora',
      training_algorithm: 'sft',
      nr_epochs: 10,
      // no nr_epochs in the request: the trainer sizes the epochs from the dataset (schedule.py)
      epochs_from_data: true,
      // LoRA on an encoder: the LoRA rate, not the base model's full fine-tuning rate
      learning_rate: 3e-4,
      datasets: [{ name: 'ner-set', version: 1 }],
      task_types: ['ner'],
      model_type: 'encoder',
      status: 'requested',
      metrics: null,
    });
  });

  it('rejects a missing or free-form base_model with 422 naming it', async () => {
    const missing = await create({ model_name: 'm', datasets: [{ name: 'ner-set' }] });
    expect(missing.status).toBe(422);
    expect(missing.body.errors[0].loc).toEqual(['body', 'base_model']);
    const free = await create({ model_name: 'm', base_model: 'my favourite model', datasets: [{ name: 'ner-set' }] });
    expect(free.status).toBe(422);
    expect(free.body.errors[0].loc).toEqual(['body', 'base_model']);
    const unknownCkpt = await create({
      model_name: 'm',
      base_model: '11111111-2222-4333-8444-555555555555',
      datasets: [{ name: 'ner-set' }],
    });
    expect(unknownCkpt.status).toBe(422);
    expect(unknownCkpt.body.detail).toMatch(/checkpoint/);
  });

  it('accepts a checkpoint UUID of an earlier job as base_model (continue training)', async () => {
    const ckpt = 'aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee';
    const team = (await stack.call('GET', '/billing/usage/requests')).body.team_id as string;
    await stack.svc.records.put(checkpointItem(team, ckpt), {
      id: ckpt,
      job_id: 'x',
      root_model: 'sift/gliner2-mini-v1',
    });
    const res = await create({
      model_name: 'more',
      base_model: ckpt,
      datasets: [{ name: 'ner-set' }],
      training_type: 'full',
    });
    expect(res.status).toBe(201);
    expect((await stack.call('GET', `/core/training-jobs/${res.body.id}`)).body).toMatchObject({
      base_model: ckpt,
      root_model: 'sift/gliner2-mini-v1',
    });
  });

  it('requires rl_config (with its keys) for grpo and dpo, and forbids it for sft', async () => {
    const decoder = 'HuggingFaceTB/SmolLM2-135M-Instruct';
    const noRl = await create({
      model_name: 'm',
      base_model: decoder,
      datasets: [{ name: 'pref-set' }],
      training_algorithm: 'dpo',
    });
    expect(noRl.status).toBe(422);
    expect(noRl.body.errors[0].loc).toEqual(['body', 'rl_config']);
    const grpoMissing = await create({
      model_name: 'm',
      base_model: decoder,
      datasets: [{ name: 'pref-set' }],
      training_algorithm: 'grpo',
      rl_config: { num_generations: 4 },
    });
    expect(grpoMissing.status).toBe(422);
    expect(grpoMissing.body.errors.map((e: any) => e.loc.join('.'))).toContain('body.rl_config.reward');
    const ok = await create({
      model_name: 'm',
      base_model: decoder,
      datasets: [{ name: 'pref-set' }],
      training_algorithm: 'dpo',
      rl_config: { beta: 0.1 },
    });
    expect(ok.status).toBe(201);
    const sftWithRl = await create({
      model_name: 'm',
      base_model: decoder,
      datasets: [{ name: 'chat-set' }],
      rl_config: { beta: 0.1 },
    });
    expect(sftWithRl.status).toBe(422);
    const unknownRlKey = await create({
      model_name: 'm',
      base_model: decoder,
      datasets: [{ name: 'pref-set' }],
      training_algorithm: 'dpo',
      rl_config: { beta: 0.1, gamma: 1 },
    });
    expect(unknownRlKey.status).toBe(422);
  });

  it('rejects full training of a decoder and dpo on an encoder', async () => {
    const full = await create({
      model_name: 'm',
      base_model: 'HuggingFaceTB/SmolLM2-135M-Instruct',
      datasets: [{ name: 'chat-set' }],
      training_type: 'full',
    });
    expect(full.status).toBe(422);
    expect(full.body.errors[0].loc).toEqual(['body', 'training_type']);
    const encDpo = await create({
      model_name: 'm',
      base_model: 'fastino/gliner2-base-v1',
      datasets: [{ name: 'ner-set' }],
      training_algorithm: 'dpo',
      rl_config: { beta: 1 },
    });
    expect(encDpo.status).toBe(422);
    expect(encDpo.body.errors[0].loc).toEqual(['body', 'training_algorithm']);
  });

  it('rejects datasets that fit no head of the model, are missing, or not ready', async () => {
    const mismatch = await create({
      model_name: 'm',
      base_model: 'fastino/gliner2-base-v1',
      datasets: [{ name: 'chat-set' }],
    });
    expect(mismatch.status).toBe(422);
    expect(mismatch.body.errors[0].loc).toEqual(['body', 'datasets', 0, 'name']);
    expect(
      (await create({ model_name: 'm', base_model: 'fastino/gliner2-base-v1', datasets: [{ name: 'no-such-set' }] }))
        .status,
    ).toBe(404);
    await stack.call('POST', '/core/datasets/upload/url', { body: { dataset_name: 'not-yet', file_name: 'a.jsonl' } });
    const pending = await create({
      model_name: 'm',
      base_model: 'fastino/gliner2-base-v1',
      datasets: [{ name: 'not-yet' }],
    });
    expect(pending.status).toBe(409);
    expect(pending.body.detail).toMatch(/no ready version/);
  });

  it('large label sets are accepted; a label that can never fit the encoder is a 422 naming the dataset', async () => {
    const intents = Array.from({ length: 120 }, (_, i) => `customer intent number ${i}`);
    const many = jsonl(intents.map((label, i) => ({ text: `Question ${i} about my account.`, label })));
    expect((await stack.uploadDataset('intents-120', many)).status).toBe('ready');
    expect(
      (await create({ model_name: 'big', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'intents-120' }] }))
        .status,
    ).toBe(201);
    const huge = Array.from({ length: 600 }, (_, i) => `w${i}`).join(' ');
    const bad = jsonl([
      { text: 'Tim Cook leads Apple.', entities: [['Tim Cook', 'person']], label: 'short' },
      { text: 'Rain.', label: huge },
    ]);
    expect((await stack.uploadDataset('huge-label', bad)).status).toBe('ready');
    const res = await create({
      model_name: 'm',
      base_model: 'sift/gliner2-mini-v1',
      datasets: [{ name: 'ner-set' }, { name: 'huge-label' }],
    });
    expect(res.status).toBe(422);
    expect(res.body.errors).toHaveLength(1);
    expect(res.body.errors[0]).toMatchObject({ loc: ['body', 'datasets', 1], type: 'prompt_too_long' });
    expect(res.body.detail).toMatch(
      /body\.datasets\.1: dataset 'huge-label': the classification label 'w0 w1 [^']*\.\.\.' alone serializes to at least 6\d\d prompt tokens; sift\/gliner2-mini-v1 takes 512 tokens per pass/,
    );
    // DeBERTa-based encoders (relative positions) have no hard limit
    expect(
      (await create({ model_name: 'm', base_model: 'fastino/gliner2-base-v1', datasets: [{ name: 'huge-label' }] }))
        .status,
    ).toBe(201);
  });

  it('rejects hyperparameters out of range', async () => {
    const res = await create({
      model_name: 'm',
      base_model: 'fastino/gliner2-base-v1',
      datasets: [{ name: 'ner-set' }],
      nr_epochs: 0,
      learning_rate: 5,
    });
    expect(res.status).toBe(422);
    expect(res.body.errors.map((e: any) => e.loc.join('.')).sort()).toEqual(['body.learning_rate', 'body.nr_epochs']);
  });
});

describe('job lifecycle', () => {
  // Its own team: POST /core/training-jobs allows 20 per minute per team, and the block above uses most.
  let key: string;
  let team: string;
  beforeAll(async () => {
    ({ key, teamId: team } = await stack.newTeam('lifecycle'));
    expect((await stack.uploadDataset('ner-set', ner, { key })).status).toBe('ready');
  });
  const call = (method: string, path: string) => stack.call(method, path, { key });
  it('lists newest first, filters by status, stops, and deletes only finished jobs', async () => {
    const a = (
      await create({ model_name: 'a', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'ner-set' }] }, key)
    ).body.id;
    const b = (
      await create({ model_name: 'b', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'ner-set' }] }, key)
    ).body.id;
    const list = (await call('GET', '/core/training-jobs')).body.data.map((j: any) => j.id);
    expect(list.indexOf(b)).toBeLessThan(list.indexOf(a));

    expect((await call('DELETE', `/core/training-jobs/${a}`)).status).toBe(409);
    const stopped = await call('POST', `/core/training-jobs/${a}/stop`);
    expect(stopped.status).toBe(200);
    expect(stopped.body).toMatchObject({ status: 'stopped', finished_at: expect.any(String) });
    expect((await call('POST', `/core/training-jobs/${a}/stop`)).status).toBe(409);
    expect((await call('GET', '/core/training-jobs?status=stopped')).body.data.map((j: any) => j.id)).toContain(a);
    expect((await call('GET', '/core/training-jobs?status=stopped')).body.data.map((j: any) => j.id)).not.toContain(b);
    expect((await call('DELETE', `/core/training-jobs/${a}`)).status).toBe(200);
    expect((await call('GET', `/core/training-jobs/${a}`)).status).toBe(404);
    expect((await call('GET', '/core/training-jobs?status=bogus')).status).toBe(422);
  });

  it('enforces the state machine with conditional writes', async () => {
    const id = (
      await create({ model_name: 'c', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'ner-set' }] }, key)
    ).body.id;
    const running = await transitionJob(stack.svc, team, id, 'running');
    expect(running).toMatchObject({ status: 'running', started_at: expect.any(String) });
    await expect(transitionJob(stack.svc, team, id, 'requested')).rejects.toMatchObject({ status: 409 });
    await transitionJob(stack.svc, team, id, 'complete', { metrics: { f1: 0.9, precision: 0.9, recall: 0.9 } });
    expect((await call('POST', `/core/training-jobs/${id}/stop`)).status).toBe(409);
    expect((await call('GET', `/core/training-jobs/${id}`)).body.metrics).toEqual({
      f1: 0.9,
      precision: 0.9,
      recall: 0.9,
    });
  });

  it('answers unknown ids with 404 and hides other teams’ jobs', async () => {
    expect((await call('GET', '/core/training-jobs/11111111-2222-4333-8444-555555555555')).status).toBe(404);
    expect((await call('GET', '/core/training-jobs/not-a-uuid')).status).toBe(404);
    const id = (
      await create({ model_name: 'd', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'ner-set' }] }, key)
    ).body.id;
    const other = await stack.newTeam('jobs-other');
    expect((await stack.call('GET', `/core/training-jobs/${id}`, { key: other.key })).status).toBe(404);
    expect((await stack.call('POST', `/core/training-jobs/${id}/stop`, { key: other.key })).status).toBe(404);
    expect((await stack.call('GET', '/core/training-jobs', { key: other.key })).body.data).toEqual([]);
  });
});

import { baseModelManifestKey } from '../../src/core/modelLayout';
import { newInferenceId, storeInference } from '../../src/core/inferences';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
let teamId: string;
beforeAll(async () => {
  stack = await TestStack.start();
  teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
});
afterAll(async () => stack.stop());

describe('GET /base-models', () => {
  it('lists the SPEC catalog, filters, and reports availability from the model store', async () => {
    const all = await stack.call('GET', '/base-models');
    expect(all.status).toBe(200);
    const ids = all.body.data.map((m: any) => m.id);
    expect(ids).toEqual(expect.arrayContaining(['fastino/gliner2-base-v1', 'fastino/gliner2-large-v1', 'fastino/gliner2-multi-v1', 'fastino/gliner2-multi-large-v1']));
    expect(all.body.data.every((m: any) => m.available === false)).toBe(true);

    await stack.svc.blobs.put(baseModelManifestKey('sift/gliner2-mini-v1'), '{}', 'application/json');
    const encoders = await stack.call('GET', '/base-models?task_type=encoder&supports_training=true');
    expect(encoders.body.data.every((m: any) => m.task_type === 'encoder')).toBe(true);
    expect(encoders.body.data.find((m: any) => m.id === 'sift/gliner2-mini-v1').available).toBe(true);
    const decoders = await stack.call('GET', '/base-models?task_type=decoder');
    expect(decoders.body.data.map((m: any) => m.id)).toEqual(['HuggingFaceTB/SmolLM2-135M-Instruct']);

    expect((await stack.call('GET', '/base-models?supports_training=yes')).body.errors[0].loc).toEqual(['query', 'supports_training']);
    expect((await stack.call('GET', '/base-models?task_type=audio')).status).toBe(422);
    expect((await stack.call('GET', '/base-models?colour=red')).status).toBe(422);
  });
});

describe('projects', () => {
  it('creates, lists, reads by id and by name, rejects duplicates, deletes', async () => {
    const created = await stack.call('POST', '/projects', { body: { name: 'support-bot', description: 'tickets' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'support-bot', active_training_job_id: null });
    expect((await stack.call('POST', '/projects', { body: { name: 'support-bot' } })).status).toBe(409);
    expect((await stack.call('GET', `/projects/${created.body.id}`)).body.name).toBe('support-bot');
    expect((await stack.call('GET', '/projects/support-bot')).body.id).toBe(created.body.id);
    expect((await stack.call('GET', '/projects')).body.data.map((p: any) => p.name)).toContain('support-bot');
    expect((await stack.call('DELETE', '/projects/support-bot')).status).toBe(200);
    expect((await stack.call('GET', `/projects/${created.body.id}`)).status).toBe(404);
    // The name is free again.
    expect((await stack.call('POST', '/projects', { body: { name: 'support-bot' } })).status).toBe(201);
  });

  it('rejects unsafe names', async () => {
    for (const name of ['../etc', 'a/b', '..', '', 'x'.repeat(200)]) {
      const res = await stack.call('POST', '/projects', { body: { name } });
      expect(res.status).toBe(422);
      expect(res.body.errors[0].loc).toEqual(['body', 'name']);
    }
  });
});

// evaluations: test/http/evaluations.test.ts (they now run for real, on the mini model)

describe('inference history and feedback', () => {
  const text = 'Tim Cook 🍎 runs Apple';
  const base = {
    type: 'encoder' as const,
    endpoint: '/inference',
    output: {},
    usage: { input_tokens: 7 },
    latency_ms: 3,
  };
  let nerId: string;
  let clsId: string;
  beforeAll(async () => {
    nerId = newInferenceId();
    await storeInference(
      stack.svc,
      teamId,
      { ...base, inference_id: nerId, model_id: 'fastino/gliner2-base-v1', tasks: ['ner'], project_id: null, training_job_id: null, input: { text, schema: { entities: ['person', 'company'] } } },
      true,
    );
    clsId = newInferenceId();
    await storeInference(
      stack.svc,
      teamId,
      {
        ...base,
        inference_id: clsId,
        model_id: 'my-project',
        tasks: ['classification'],
        project_id: 'p-1',
        training_job_id: '11111111-2222-4333-8444-555555555555',
        input: { text: 'great', schema: { classifications: [{ task: 'sentiment', labels: ['positive', 'negative'] }] } },
      },
      true,
    );
    await storeInference(
      stack.svc,
      teamId,
      { ...base, inference_id: newInferenceId(), model_id: 'x', tasks: ['ner'], project_id: null, training_job_id: null, input: { text: 'secret' } },
      false,
    );
  });

  it('lists newest first with every filter and bounded pagination', async () => {
    const all = await stack.call('GET', '/inferences');
    expect(all.body.data.map((i: any) => i.inference_id)).toEqual([clsId, nerId]);
    expect(JSON.stringify(all.body)).not.toContain('secret');
    expect((await stack.call('GET', '/inferences?task=ner')).body.data.map((i: any) => i.inference_id)).toEqual([nerId]);
    expect((await stack.call('GET', '/inferences?model_id=my-project')).body.data.map((i: any) => i.inference_id)).toEqual([clsId]);
    expect((await stack.call('GET', '/inferences?project_id=p-1')).body.data).toHaveLength(1);
    expect((await stack.call('GET', '/inferences?training_job_id=11111111-2222-4333-8444-555555555555')).body.data).toHaveLength(1);
    const page = await stack.call('GET', '/inferences?limit=1&offset=1');
    expect(page.body).toMatchObject({ limit: 1, offset: 1, has_more: false });
    expect(page.body.data.map((i: any) => i.inference_id)).toEqual([nerId]);
    expect((await stack.call('GET', '/inferences?limit=1')).body.has_more).toBe(true);
    expect((await stack.call('GET', '/inferences?limit=0')).body.errors[0].loc).toEqual(['query', 'limit']);
    expect((await stack.call('GET', '/inferences?limit=201')).status).toBe(422);
    expect((await stack.call('GET', '/inferences?offset=-1')).status).toBe(422);
  });

  it('reads one inference; unknown ids are 404', async () => {
    expect((await stack.call('GET', `/inferences/${nerId}`)).body).toMatchObject({ inference_id: nerId, tasks: ['ner'], feedback: null });
    expect((await stack.call('GET', '/inferences/inf_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status).toBe(404);
    const other = await stack.newTeam('history-other');
    expect((await stack.call('GET', `/inferences/${nerId}`, { key: other.key })).status).toBe(404);
  });

  it('validates feedback against the inference task, with code-point offsets', async () => {
    const path = `/inferences/${nerId}/feedback`;
    expect((await stack.call('POST', path, { body: { verdict: 'maybe' } })).body.errors[0].loc).toEqual(['body', 'verdict']);
    expect((await stack.call('POST', path, { body: { verdict: 'incorrect' } })).body.errors[0].loc).toEqual(['body', 'corrected_output']);
    expect((await stack.call('POST', path, { body: { verdict: 'correct', corrected_output: { entities: [] } } })).status).toBe(422);
    const wrongHead = await stack.call('POST', path, { body: { verdict: 'incorrect', corrected_output: { classifications: { x: 'y' } } } });
    expect(wrongHead.body.errors[0].loc).toEqual(['body', 'corrected_output', 'classifications']);
    // "Apple" starts at code point 16 (the emoji is one code point, two UTF-16 units).
    const badOffsets = await stack.call('POST', path, { body: { verdict: 'incorrect', corrected_output: { entities: [{ text: 'Apple', label: 'company', start: 17, end: 22 }] } } });
    expect(badOffsets.status).toBe(422);
    expect(badOffsets.body.errors[0].loc).toEqual(['body', 'corrected_output', 'entities', 0]);
    const good = await stack.call('POST', path, {
      body: { verdict: 'incorrect', corrected_output: { entities: [{ text: 'Tim Cook', label: 'person', start: 0, end: 8 }, { text: 'Apple', label: 'company', start: 16, end: 21 }] } },
    });
    expect(good.status).toBe(200);
    expect(good.body.feedback).toMatchObject({ verdict: 'incorrect' });
    expect((await stack.call('GET', `/inferences/${nerId}`)).body.feedback.corrected_output.entities).toHaveLength(2);

    const clsPath = `/inferences/${clsId}/feedback`;
    expect((await stack.call('POST', clsPath, { body: { verdict: 'incorrect', corrected_output: { classifications: { sentiment: 'neutral' } } } })).status).toBe(422);
    expect((await stack.call('POST', clsPath, { body: { verdict: 'incorrect', corrected_output: { classifications: { sentiment: 'negative' } } } })).status).toBe(200);
    expect((await stack.call('POST', clsPath, { body: { verdict: 'correct' } })).status).toBe(200);
    expect((await stack.call('POST', '/inferences/inf_01ARZ3NDEKTSV4RRFFQ69G5FAV/feedback', { body: { verdict: 'correct' } })).status).toBe(404);
  });
});

describe('GET /billing/usage/requests', () => {
  it('counts real requests per team and endpoint class', async () => {
    const team = await stack.newTeam('billing');
    const before = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    await stack.call('GET', '/projects', { key: team.key });
    await stack.call('POST', '/core/training-jobs', { key: team.key, body: { model_name: 'm', base_model: 'nope', datasets: [{ name: 'x' }] } });
    const after = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    // The first usage read itself counts too.
    expect(after.today.requests - before.today.requests).toBe(3);
    expect(after.today.requests_by_endpoint.training_create).toBe(1);
    expect(after.this_month.requests).toBeGreaterThanOrEqual(after.today.requests);
    expect(after).toMatchObject({ plan: 'pro', daily_spend_cap_usd: null, remaining_daily_allowance_usd: null });
    expect(after.rate_limits.inference).toEqual([{ limit: 5000, window_seconds: 60 }]);
  });
  // Credit, 402 and the spend cap's 429 are tested over HTTP with billed requests: test/http/billing.test.ts
});

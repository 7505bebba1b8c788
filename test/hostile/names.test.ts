/**
 * Hostile names and ids against the real HTTP server (issue #25 item 4, security review F6).
 *
 * Many projects with names of the longest length allowed, each served and called: before, every
 * name became attributes on the team's day and month usage items, and ~900 of them pushed those
 * past DynamoDB's 400 KB item limit, after which no usage of the team could be written. Now each
 * project's usage is an item of its own keyed by the project's id. Inference is billed without any
 * model weights through the decoder path: the projects serve a fine-tuned decoder job (its adapter
 * recorded, not trained) and a stand-in vLLM upstream answers (test/helpers/fakeVllm.ts).
 *
 * Then ids abused in paths and bodies (`..`, `%2F`, 10,000-character ids, `__proto__`): each a
 * clear 4xx with a `detail`. After every hostile request the server still answers `/health`.
 */
import { newUuid } from '../../src/core/ids';
import { registerCheckpoint, modelPrefix } from '../../src/core/training/artifacts';
import { createTrainingJob, transitionJob } from '../../src/core/trainingJobs';
import { USAGE_READ_LIMITS } from '../../src/core/usage';
import { FAKE_MODEL, startFakeVllm, useFakeVllm, type FakeVllm } from '../helpers/fakeVllm';
import { jsonl, TestStack } from '../helpers/localStack';

let stack: TestStack;
let vllm: FakeVllm;
let team: { id: string; key: string };
let jobId: string;

/** A complete decoder job (LoRA on the fake upstream's model) whose adapter is recorded, not trained. */
async function seedDecoderJob(teamId: string): Promise<string> {
  const { training: _unused, ...recordOnly } = stack.svc;
  const job = await createTrainingJob(recordOnly, teamId, {
    model_name: 'chat',
    base_model: FAKE_MODEL,
    datasets: [{ name: 'chat-set' }],
  });
  await transitionJob(stack.svc, teamId, job.id, 'running');
  const prefix = modelPrefix(teamId, job.id);
  await stack.svc.blobs.put(`${prefix}adapter/adapter_config.json`, '{"r":16}', 'application/json');
  await stack.svc.blobs.put(
    `${prefix}manifest.json`,
    JSON.stringify({
      format: 'sift-model/1',
      family: 'decoder',
      training_type: 'lora',
      files: { adapter: 'adapter/' },
    }),
    'application/json',
  );
  const finalId = newUuid();
  await registerCheckpoint(stack.svc, teamId, {
    id: finalId,
    job_id: job.id,
    root_model: job.root_model,
    blob_prefix: prefix,
    step: 1,
    epoch: 1,
    metrics: null,
    is_best: false,
    is_final: true,
    created_at: stack.svc.now().toISOString(),
  });
  await transitionJob(stack.svc, teamId, job.id, 'complete', { final_checkpoint_id: finalId });
  return job.id;
}

beforeAll(async () => {
  vllm = await startFakeVllm({ promptTokens: 20, completionTokens: 5 });
  stack = await TestStack.start();
  useFakeVllm(stack, vllm);
  const made = (await stack.call('POST', '/teams', { body: { name: 'names', credit_balance_usd: 10 } })).body;
  team = { id: made.team.id, key: made.api_key.key };
  const chat = jsonl([
    {
      messages: [
        { role: 'user', content: 'hi' },
        { role: 'assistant', content: 'hello' },
      ],
    },
  ]);
  expect((await stack.uploadDataset('chat-set', chat, { key: team.key })).status).toBe('ready');
  jobId = await seedDecoderJob(team.id);
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await vllm?.close();
});

async function expectHealthy(): Promise<void> {
  const res = await stack.call('GET', '/health', { key: null });
  expect(res.status).toBe(200);
}

async function expectClear4xx(res: { status: number; body: any }, what: string): Promise<void> {
  expect([what, res.status >= 400 && res.status < 500]).toEqual([what, true]);
  expect([what, typeof res.body?.detail]).toEqual([what, 'string']);
  await expectHealthy();
}

/** A project name of the longest length the API allows, distinct per i. */
const longName = (i: number) => `p${String(i).padStart(4, '0')}-`.padEnd(128, 'n');

describe('many projects with the longest names, each called', () => {
  it('bills each under its project id (one usage item each), names it, lists every request; the day item stays small', async () => {
    const n = 30;
    const ids = new Map<string, string>();
    for (let i = 0; i < n; i++) {
      const created = await stack.call('POST', '/projects', { key: team.key, body: { name: longName(i) } });
      expect(created.status).toBe(201);
      ids.set(created.body.id, longName(i));
      const promoted = await stack.call('POST', `/projects/${longName(i)}/deployments`, {
        key: team.key,
        body: { training_job_id: jobId },
      });
      expect([promoted.status, promoted.body.detail]).toEqual([201, undefined]);
      const res = await stack.call('POST', '/v1/chat/completions', {
        key: team.key,
        body: { model: longName(i), messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 },
      });
      expect(res.status).toBe(200);
      expect(res.body.model).toBe(longName(i));
      await expectHealthy();
    }
    const usage = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    const rows = usage.today.by_model as Array<{ model: string; name?: string; other?: boolean; requests: number }>;
    // (the team's other billed usage, e.g. its seeded job's compute where that is billed, shares the listing)
    expect(rows.length).toBeLessThanOrEqual(USAGE_READ_LIMITS.periodRows + 1);
    const projectRows = rows.filter((r) => ids.has(r.model));
    expect(projectRows).toHaveLength(n);
    for (const r of projectRows) expect(r).toMatchObject({ name: ids.get(r.model), requests: 1 });
    expect(usage.today.by_endpoint).toContainEqual(
      expect.objectContaining({ endpoint: '/v1/chat/completions', requests: n }),
    );

    const listed = (await stack.call('GET', '/billing/usage/requests/list?limit=500', { key: team.key })).body
      .data as Array<{ model: string; endpoint: string }>;
    expect(rows.reduce((sum, r) => sum + r.requests, 0)).toBe(listed.length); // the rows add up to every billed request
    const chats = listed.filter((r) => r.endpoint === '/v1/chat/completions');
    expect(chats.map((r) => r.model).sort()).toEqual([...ids.values()].sort()); // rows keep the name sent
    // no name reached an attribute name of the totals item
    const day = (await stack.svc.records.get<Record<string, unknown>>(`TEAM#${team.id}`, `USAGE#DAY#${usage.day}`))!;
    expect(Object.keys(day).filter((k) => k.includes('nnnn'))).toEqual([]);
    expect(Object.keys(day).length).toBeLessThan(30);
  }, 120_000);
});

describe('ids abused in paths and bodies', () => {
  const paths = [
    '/projects/..',
    '/projects/..%2F..%2Fteams',
    '/projects/%2F',
    '/projects/%2e%2e%2f',
    `/projects/${'a'.repeat(10_000)}`,
    '/projects/__proto__',
    '/projects/constructor',
    '/projects/__proto__/deployments',
    '/core/training-jobs/..%2F..',
    `/core/training-jobs/${'j'.repeat(10_000)}`,
    '/core/training-jobs/__proto__',
    '/core/datasets/__proto__/1',
    '/core/datasets/..%2F..%2Fother/1',
    '/inferences/__proto__',
    `/inferences/${'i'.repeat(10_000)}`,
  ];
  it.each(paths.map((p) => [p.length > 100 ? `${p.slice(0, 40)}… (${p.length} chars)` : p, p]))(
    'GET %s: a clear 4xx',
    async (_label, path) => {
      await expectClear4xx(await stack.call('GET', path, { key: team.key }), path);
    },
  );

  it('project names that are no names: 422 naming body.name; nothing created', async () => {
    const before = (await stack.call('GET', '/projects', { key: team.key })).body.data.length;
    for (const name of ['__proto__', '..', '../x', 'a/b', 'a'.repeat(129), 'x'.repeat(10_000), '%2F', '']) {
      const res = await stack.call('POST', '/projects', { key: team.key, body: { name } });
      expect([name.slice(0, 20), res.status]).toEqual([name.slice(0, 20), 422]);
      expect(res.body.errors[0].loc).toEqual(['body', 'name']);
      await expectHealthy();
    }
    expect((await stack.call('GET', '/projects', { key: team.key })).body.data.length).toBe(before);
  });

  it('model ids that name nothing: a clear 4xx, nothing billed', async () => {
    const before = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body.today.cost_usd;
    // <org>/<name> shapes reach the imported-model registry (src/core/modelRegistry.ts): only safe ones are looked up
    const names = ['acme/never-imported', 'acme/..', 'models/../x', 'a/b/manifest.json'];
    for (const model of [
      '__proto__',
      'constructor',
      '../../models/x',
      '..%2F',
      'm'.repeat(10_000),
      newUuid(),
      ...names,
    ]) {
      const chat = await stack.call('POST', '/v1/chat/completions', {
        key: team.key,
        body: { model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 },
      });
      await expectClear4xx(chat, `chat ${model.slice(0, 20)}`);
      const native = await stack.call('POST', '/inference', {
        key: team.key,
        body: { model_id: model, text: 'Tim Cook', schema: { entities: ['person'] } },
      });
      await expectClear4xx(native, `inference ${model.slice(0, 20)}`);
    }
    expect((await stack.call('GET', '/billing/usage/requests', { key: team.key })).body.today.cost_usd).toBe(before);
  });
});

/**
 * Prepaid credit, the daily spending cap and the usage breakdown, over HTTP against the local
 * stack, with billed chat requests served by a stand-in vLLM upstream (test/helpers/fakeVllm.ts).
 */
import { expectedCostMicros, FAKE_MODEL, startFakeVllm, useFakeVllm, type FakeVllm } from '../helpers/fakeVllm';
import { jsonl, TestStack } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';
import { trainingCostMicros } from '../../src/core/billing/prices';
import { transitionJob } from '../../src/core/trainingJobs';

let stack: TestStack;
let vllm: FakeVllm;
let price: number;

beforeAll(async () => {
  vllm = await startFakeVllm({ promptTokens: 1000, completionTokens: 100 });
  stack = await TestStack.start();
  useFakeVllm(stack, vllm);
  price = expectedCostMicros(vllm); // 1000 × 0.05 + 100 × 0.1 = 60 micro-USD
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await vllm?.close();
});

const chat = (key: string, extra: Record<string, unknown> = {}) =>
  stack.call('POST', '/v1/chat/completions', {
    key,
    body: { model: FAKE_MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 100, ...extra },
  });

async function newTeam(body: Record<string, unknown>) {
  const res = await stack.call('POST', '/teams', { body: { name: 'billing', ...body } });
  expect(res.status).toBe(201);
  return { id: res.body.team.id as string, key: res.body.api_key.key as string };
}

const balanceMicros = async (key: string) =>
  Math.round((await stack.call('GET', '/billing/usage/requests', { key })).body.credit_balance_usd * 1e6);

describe('prepaid credit', () => {
  it('goes down by exactly each billed cost; the request after it is spent gets 402; a top-up lifts it', async () => {
    expect(price).toBe(60);
    const team = await newTeam({ credit_balance_usd: 0.0002 }); // 200 micro-USD: 4 requests, the 4th overdraws
    let expected = 200;
    for (let i = 0; i < 4; i++) {
      const res = await chat(
        team.key,
        i % 2 ? { stream: true, stream_options: { include_usage: true } } : { store: false },
      );
      expect(res.status).toBe(200);
      expected -= price;
      expect(await balanceMicros(team.key)).toBe(expected);
    }
    expect(expected).toBe(-40);
    const refused = await chat(team.key);
    expect(refused.status).toBe(402);
    expect(refused.headers.get('x-should-retry')).toBe('false');
    expect(refused.body.detail).toBe('Account out of credits: add credits or change plan');
    expect(refused.body.error.code).toBe('insufficient_quota');
    // native routes answer the same
    const native = await stack.call('POST', '/inference', {
      key: team.key,
      body: { model_id: FAKE_MODEL, task: 'generate', messages: [{ role: 'user', content: 'Hi' }] },
    });
    expect(native.status).toBe(402);
    expect(native.headers.get('x-should-retry')).toBe('false');
    expect(await balanceMicros(team.key)).toBe(-40); // refused requests cost nothing

    const topUp = await stack.call('POST', `/teams/${team.id}/credits`, { body: { amount_usd: 0.001 } });
    expect(topUp.status).toBe(200);
    expect(topUp.body.credit_balance_usd).toBeCloseTo(0.00096, 9);
    expect((await chat(team.key)).status).toBe(200);
    expect(await balanceMicros(team.key)).toBe(960 - price);
  });

  it('concurrent requests overdraw by at most the requests in flight; the next one gets 402', async () => {
    const team = await newTeam({ credit_balance_usd: 0.0003 }); // 300 micro-USD: 5 requests' worth
    const inFlight = 20;
    const burst = () => Promise.all(Array.from({ length: inFlight }, () => chat(team.key)));
    const results = await burst();
    const served = results.filter((r) => r.status === 200).length;
    expect(served + results.filter((r) => r.status === 402).length).toBe(inFlight);
    expect(served).toBeGreaterThanOrEqual(5);
    // the bound: only requests in flight when the balance ran out may overdraw it. Once they have
    // ended, nothing is in flight, so a second burst — sent at once, before anything else reads
    // the balance — is refused whole: this process's billed usage is seen by the next check
    const second = await burst();
    expect(second.map((r) => r.status)).toEqual(Array(inFlight).fill(402));
    const balance = await balanceMicros(team.key);
    expect(balance).toBe(300 - served * price); // every served request paid, exactly; the refused nothing
    expect(balance).toBeLessThanOrEqual(0);
    expect((await chat(team.key)).status).toBe(402);
  });

  it('a team stored before micro-USD (USD fields) keeps its balance and cap, and spends from it', async () => {
    const team = await newTeam({});
    // the team item as the previous release wrote it
    const { teamKey } = await import('../../src/core/recordKeys');
    const { pk, sk } = teamKey(team.id);
    await stack.svc.records.update(pk, sk, {
      set: { credit_balance_usd: 0.0001, daily_spend_cap_usd: 5 },
      remove: ['credit_balance_micros', 'daily_spend_cap_micros'],
    });
    stack.svc.hotPath?.teams.deleteWhere(() => true);
    const listed = (await stack.call('GET', '/teams')).body.data.find((t: any) => t.id === team.id);
    expect(listed).toMatchObject({ credit_balance_usd: 0.0001, daily_spend_cap_usd: 5 });
    expect((await chat(team.key)).status).toBe(200);
    expect((await chat(team.key)).status).toBe(200); // 100 - 60 - 60 = -20
    expect(await balanceMicros(team.key)).toBe(100 - 2 * price);
    expect((await chat(team.key)).status).toBe(402);
    expect((await stack.call('GET', '/billing/usage/requests', { key: team.key })).body.daily_spend_cap_usd).toBe(5);
  });

  it('a team billed in arrears is never refused and has no balance', async () => {
    const team = await newTeam({});
    expect((await chat(team.key)).status).toBe(200);
    expect((await stack.call('GET', '/billing/usage/requests', { key: team.key })).body.credit_balance_usd).toBeNull();
    // a well-formed request the team's state refuses: 409, saying how to give the team a balance
    const topUp = await stack.call('POST', `/teams/${team.id}/credits`, { body: { amount_usd: 1 } });
    expect(topUp.status).toBe(409);
    expect(topUp.body.detail).toBe(
      `team '${team.id}' is billed in arrears (credit_balance_usd is null), so it has no balance to add to: give it one with PATCH /teams/${team.id} {"credit_balance_usd": <amount>} to move it to prepaid credit`,
    );
    expect((await stack.call('GET', '/billing/usage/requests', { key: team.key })).body.credit_balance_usd).toBeNull();
  });

  it('operator endpoints validate every field and are the operator’s only', async () => {
    const team = await newTeam({ credit_balance_usd: 1 });
    const bad = await stack.call('POST', `/teams/${team.id}/credits`, { body: { amount_usd: -5 } });
    expect(bad.status).toBe(422);
    expect(bad.body.errors[0].loc).toEqual(['body', 'amount_usd']);
    const tooFine = await stack.call('POST', `/teams/${team.id}/credits`, { body: { amount_usd: 0.0000001 } });
    expect(tooFine.status).toBe(422);
    expect(tooFine.body.detail).toMatch(/amount_usd.*6 decimal/);
    const unknown = await stack.call('PATCH', `/teams/${team.id}`, { body: { plann: 'pro' } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors[0].loc).toEqual(['body', 'plann']);
    const badPlan = await stack.call('PATCH', `/teams/${team.id}`, { body: { plan: 'gold' } });
    expect(badPlan.status).toBe(422);
    expect(badPlan.body.errors[0].loc).toEqual(['body', 'plan']);
    expect((await stack.call('PATCH', `/teams/${team.id}`, { body: {} })).status).toBe(422);
    expect((await stack.call('PATCH', '/teams/not-a-uuid', { body: { plan: 'pro' } })).body.errors[0].loc).toEqual([
      'path',
      'id',
    ]);
    expect(
      (await stack.call('PATCH', '/teams/00000000-0000-4000-8000-000000000000', { body: { plan: 'pro' } })).status,
    ).toBe(404);
    expect(
      (await stack.call('POST', `/teams/${team.id}/credits`, { key: team.key, body: { amount_usd: 5 } })).status,
    ).toBe(403);
    expect((await stack.call('PATCH', `/teams/${team.id}`, { key: team.key, body: { plan: 'custom' } })).status).toBe(
      403,
    );

    const changed = await stack.call('PATCH', `/teams/${team.id}`, {
      body: { plan: 'research', daily_spend_cap_usd: 2.5 },
    });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({
      id: team.id,
      plan: 'research',
      daily_spend_cap_usd: 2.5,
      credit_balance_usd: 1,
    });
    const usage = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    expect(usage).toMatchObject({ plan: 'research', daily_spend_cap_usd: 2.5 });
    // to arrears and back
    expect(
      (await stack.call('PATCH', `/teams/${team.id}`, { body: { credit_balance_usd: null } })).body.credit_balance_usd,
    ).toBeNull();
    expect(
      (await stack.call('PATCH', `/teams/${team.id}`, { body: { credit_balance_usd: 0 } })).body.credit_balance_usd,
    ).toBe(0);
    expect((await chat(team.key)).status).toBe(402);
  });

  it('is in the OpenAPI document', async () => {
    const doc = (await stack.call('GET', '/openapi.json')).body;
    expect(doc.paths['/teams/{id}/credits'].post.requestBody.content['application/json'].schema).toBeDefined();
    // the arrears refusal is declared as the state conflict it is (409), not as a bad request
    expect(doc.paths['/teams/{id}/credits'].post.responses['409'].description).toMatch(/billed in arrears/);
    expect(doc.paths['/teams/{id}/credits'].post.responses['400']).toBeUndefined();
    expect(doc.paths['/teams/{id}'].patch).toBeDefined();
    expect(doc.paths['/billing/usage/requests/list'].get).toBeDefined();
  });
});

describe('cancelled streams', () => {
  it('a client that goes away mid-stream is billed for the tokens produced, once', async () => {
    const team = await newTeam({ credit_balance_usd: 1 });
    vllm.pieceDelayMs = 300;
    try {
      const ac = new AbortController();
      const res = await fetch(`${stack.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'x-api-key': team.key, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: FAKE_MODEL,
          stream: true,
          max_tokens: 100,
          messages: [{ role: 'user', content: 'Hi' }],
        }),
        signal: ac.signal,
      });
      const id = res.headers.get('x-inference-id');
      const reader = res.body!.getReader();
      await reader.read();
      ac.abort();
      let rows: any[] = [];
      for (let i = 0; i < 50 && rows.length === 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        rows = (await stack.call('GET', '/billing/usage/requests/list', { key: team.key })).body.data;
      }
      expect(rows).toHaveLength(1);
      expect(rows[0].inference_id).toBe(id);
      // the upstream was cut off before its usage chunk: billed for what was streamed, not max_tokens
      expect(rows[0].output_tokens).toBeGreaterThan(0);
      expect(rows[0].output_tokens).toBeLessThan(100);
      const cost = Math.round(rows[0].cost_usd * 1e6);
      expect(cost).toBe(Math.round(1000 * 0.05 + rows[0].output_tokens * 0.1));
      expect(await balanceMicros(team.key)).toBe(1_000_000 - cost);
    } finally {
      vllm.pieceDelayMs = 0;
    }
  });
});

describe('daily spending cap', () => {
  it('answers 429 with the cap reason and the time to 00:00 UTC once today’s spend reaches it', async () => {
    const team = await newTeam({ daily_spend_cap_usd: 0.0001 }); // 100 micro-USD: the 2nd request reaches it
    expect((await chat(team.key)).status).toBe(200);
    expect((await chat(team.key)).status).toBe(200);
    const capped = await chat(team.key);
    expect(capped.status).toBe(429);
    expect(capped.headers.get('x-ratelimit-reason')).toBe('daily_spend_cap_exceeded');
    expect(capped.headers.get('x-should-retry')).toBe('false');
    const now = Date.now();
    const midnight = Date.UTC(
      new Date(now).getUTCFullYear(),
      new Date(now).getUTCMonth(),
      new Date(now).getUTCDate() + 1,
    );
    const retryAfter = Number(capped.headers.get('retry-after'));
    expect(Math.abs(retryAfter - (midnight - now) / 1000)).toBeLessThan(5);
    const usage = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    expect(usage.resets_at).toBe(new Date(midnight).toISOString());
    expect(usage.remaining_daily_allowance_usd).toBe(0);
    expect(Math.round(usage.today.cost_usd * 1e6)).toBe(2 * price);
    // raising the cap lets the team go on the same day
    await stack.call('PATCH', `/teams/${team.id}`, { body: { daily_spend_cap_usd: 1 } });
    expect((await chat(team.key)).status).toBe(200);
  });
});

describe('usage by model, endpoint, day and request', () => {
  it('breaks billed usage down and lists each request with its inference id', async () => {
    const team = await newTeam({});
    const ids: string[] = [];
    for (const extra of [{}, { stream: true }, {}]) {
      const res = await chat(team.key, extra);
      expect(res.status).toBe(200);
      ids.push(extra.stream ? /"id":"chatcmpl-(inf_[^"]+)"/.exec(res.text)![1]! : res.body.inference_id);
    }
    const completion = await stack.call('POST', '/v1/completions', {
      key: team.key,
      body: { model: FAKE_MODEL, prompt: 'One', max_tokens: 100 },
    });
    expect(completion.status).toBe(200);
    const usage = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    const byModel = usage.today.by_model.find((m: any) => m.model === FAKE_MODEL);
    expect(byModel).toMatchObject({
      requests: 4,
      input_tokens: 4000,
      output_tokens: 400,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
    });
    expect(Math.round(byModel.cost_usd * 1e6)).toBe(4 * price);
    const byEndpoint = Object.fromEntries(usage.today.by_endpoint.map((e: any) => [e.endpoint, e.requests]));
    expect(byEndpoint).toEqual({ '/v1/chat/completions': 3, '/v1/completions': 1 });
    expect(usage.this_month.by_model.find((m: any) => m.model === FAKE_MODEL).requests).toBe(4);
    expect(usage.by_day[0]).toMatchObject({ day: usage.day, input_tokens: 4000 });
    expect(usage.today.input_tokens).toBe(4000);

    const first = await stack.call('GET', '/billing/usage/requests/list?limit=3', { key: team.key });
    expect(first.status).toBe(200);
    expect(first.body.data).toHaveLength(3);
    expect(first.body.next_cursor).toEqual(expect.any(String));
    const rest = await stack.call('GET', `/billing/usage/requests/list?limit=3&cursor=${first.body.next_cursor}`, {
      key: team.key,
    });
    const rows = [...first.body.data, ...rest.body.data];
    expect(rows).toHaveLength(4);
    expect(rows[0].endpoint).toBe('/v1/completions'); // newest first
    for (const id of ids) expect(rows.some((r: any) => r.inference_id === id)).toBe(true);
    for (const r of rows)
      expect(r).toMatchObject({
        model: FAKE_MODEL,
        input_tokens: 1000,
        output_tokens: 100,
        cost_usd: price / 1e6,
        at: expect.any(String),
      });
    // another team's cursor or garbage is a named 422
    const bad = await stack.call('GET', '/billing/usage/requests/list?cursor=xyz', { key: team.key });
    expect(bad.status).toBe(422);
    expect(bad.body.errors[0].loc).toEqual(['query', 'cursor']);
  });
});

describe('compute is money: training jobs, evaluations, generation and adaptive cycles (issue #25 item 2)', () => {
  const MINI = 'sift/gliner2-mini-v1';
  const rows = jsonl([
    {
      text: 'Tim Cook runs Apple.',
      entities: [
        ['Tim Cook', 'person'],
        ['Apple', 'company'],
      ],
    },
  ]);

  /** A team with a ready dataset and a project serving a complete job: everything each kind of compute needs to pass validation. */
  async function computeTeam(body: Record<string, unknown>) {
    const team = await newTeam(body);
    // the model store's manifest is all validation looks at (nothing here runs the engine)
    await stack.svc.blobs.put(
      `models/${MINI}/manifest.json`,
      JSON.stringify({ format: 'sift-model/1', family: 'encoder', files: { onnx_dir: 'onnx/' } }),
    );
    expect((await stack.uploadDataset('people', rows, { key: team.key })).status).toBe('ready');
    const job = await seedCompleteEncoderJob(stack, team.id, 'people');
    expect((await stack.call('POST', '/projects', { key: team.key, body: { name: 'support' } })).status).toBe(201);
    expect(
      (await stack.call('POST', '/projects/support/deployments', { key: team.key, body: { training_job_id: job.id } }))
        .status,
    ).toBe(201);
    return { ...team, jobId: job.id };
  }

  /** One request per kind of compute, as a client sends it. */
  const startEach = (key: string) => ({
    'POST /core/training-jobs': () =>
      stack.call('POST', '/core/training-jobs', {
        key,
        body: { model_name: 'm', base_model: MINI, datasets: [{ name: 'people' }] },
      }),
    'POST /core/evaluations': () =>
      stack.call('POST', '/core/evaluations', { key, body: { base_model: MINI, dataset_name: 'people' } }),
    'POST /generate': () =>
      stack.call('POST', '/generate', {
        key,
        body: { task_type: 'classification', dataset_name: 'gen', num_examples: 10, labels: ['a', 'b'] },
      }),
    'POST /projects/{id}/adaptive-cycles': () => stack.call('POST', '/projects/support/adaptive-cycles', { key }),
  });

  async function created(key: string) {
    const list = async (path: string) => (await stack.call('GET', path, { key })).body.data.length as number;
    return {
      jobs: await list('/core/training-jobs'),
      evaluations: await list('/core/evaluations'),
      generations: await list('/generate/jobs'),
      cycles: await list('/projects/support/adaptive-cycles'),
    };
  }

  it('a team out of credit gets 402 for each kind, and nothing is created', async () => {
    const team = await computeTeam({ credit_balance_usd: 1 });
    expect((await stack.call('PATCH', `/teams/${team.id}`, { body: { credit_balance_usd: 0 } })).status).toBe(200);
    const before = await created(team.key);
    for (const [route, start] of Object.entries(startEach(team.key))) {
      const res = await start();
      expect({ route, status: res.status, retry: res.headers.get('x-should-retry'), detail: res.body.detail }).toEqual({
        route,
        status: 402,
        retry: 'false',
        detail: 'Account out of credits: add credits or change plan',
      });
    }
    expect(await created(team.key)).toEqual(before);
  });

  it('a team past its daily spending cap gets 429 daily_spend_cap_exceeded for each kind, and nothing is created', async () => {
    const team = await computeTeam({ daily_spend_cap_usd: 0.0001 });
    expect((await chat(team.key)).status).toBe(200);
    expect((await chat(team.key)).status).toBe(200); // 120 micro-USD: past the 100 cap
    const before = await created(team.key);
    for (const [route, start] of Object.entries(startEach(team.key))) {
      const res = await start();
      expect({ route, status: res.status, reason: res.headers.get('x-ratelimit-reason') }).toEqual({
        route,
        status: 429,
        reason: 'daily_spend_cap_exceeded',
      });
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    }
    expect(await created(team.key)).toEqual(before);
  });

  it('a training job that ran is billed once — usage list, breakdowns, balance, daily total — however often its completion is delivered', async () => {
    const team = await computeTeam({ credit_balance_usd: 1 });
    const res = await startEach(team.key)['POST /core/training-jobs']();
    expect(res.status).toBe(201);
    const id = res.body.id as string;
    await transitionJob(stack.svc, team.id, id, 'running', { instance_type: 'local' });
    await transitionJob(stack.svc, team.id, id, 'complete', { compute_seconds: 120 });
    await expect(transitionJob(stack.svc, team.id, id, 'complete', { compute_seconds: 120 })).rejects.toThrow(
      /is complete/,
    );
    const cost = trainingCostMicros('local', 120);
    const list = (await stack.call('GET', '/billing/usage/requests/list', { key: team.key })).body.data;
    expect(list.filter((r: any) => r.inference_id === id)).toEqual([
      expect.objectContaining({ endpoint: '/core/training-jobs', model: id, cost_usd: cost / 1e6 }),
    ]);
    // the seeded (deployed) job ran for a few milliseconds: billed too, as its own row
    expect(list.map((r: any) => r.inference_id).sort()).toEqual([id, team.jobId].sort());
    const spent = list.reduce((n: number, r: any) => n + Math.round(r.cost_usd * 1e6), 0);
    const usage = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    expect(usage.today.by_endpoint).toEqual([
      expect.objectContaining({ endpoint: '/core/training-jobs', requests: 2 }),
    ]);
    expect(Math.round(usage.today.by_endpoint[0].cost_usd * 1e6)).toBe(spent);
    expect(usage.today.by_model.find((m: any) => m.model === id)).toMatchObject({ requests: 1, cost_usd: cost / 1e6 });
    expect(Math.round(usage.credit_balance_usd * 1e6)).toBe(1_000_000 - spent);
    // the job's record shows nothing of how it was priced
    const shown = (await stack.call('GET', `/core/training-jobs/${id}`, { key: team.key })).body;
    expect(shown).toMatchObject({ status: 'complete' });
    expect(shown.instance_type).toBeUndefined();
  });

  it("of cap + 3 training jobs created at once, exactly the plan's cap is accepted; the rest get 429 concurrent_jobs", async () => {
    const team = await computeTeam({ plan: 'free' }); // Free: one at a time
    const results = await Promise.all(
      Array.from({ length: 4 }, () => startEach(team.key)['POST /core/training-jobs']()),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 429, 429, 429]);
    for (const r of results.filter((x) => x.status === 429)) {
      expect(r.headers.get('x-ratelimit-reason')).toBe('concurrent_jobs');
      expect(Number(r.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(r.body.detail).toMatch(/at most 1 training jobs at once/);
    }
    const jobs = (await stack.call('GET', '/core/training-jobs?status=requested', { key: team.key })).body.data;
    expect(jobs).toHaveLength(1);
    // its end frees the slot
    expect((await stack.call('POST', `/core/training-jobs/${jobs[0].id}/stop`, { key: team.key })).status).toBe(200);
    expect((await startEach(team.key)['POST /core/training-jobs']()).status).toBe(201);
  });

  it('declares 402 and 429 on every compute-starting operation', async () => {
    const doc = (await stack.call('GET', '/openapi.json')).body;
    for (const [path, method] of [
      ['/core/training-jobs', 'post'],
      ['/core/evaluations', 'post'],
      ['/generate', 'post'],
      ['/projects/{id}/adaptive-cycles', 'post'],
    ] as const) {
      expect({ path, statuses: Object.keys(doc.paths[path][method].responses) }).toEqual({
        path,
        statuses: expect.arrayContaining(['402', '429']),
      });
      expect(doc.paths[path][method].responses['429'].description).toMatch(/concurrent_jobs/);
    }
  });
});

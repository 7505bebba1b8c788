import { requireRuntime } from '../../src/core/models';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';
import { longSystem, MODEL, startCompatStack } from './helpers';

let stack: TestStack;
beforeAll(async () => {
  stack = await startCompatStack();
});
afterAll(async () => stack.stop());

const usage = async () => (await stack.call('GET', '/billing/usage/requests')).body.today;

describe('native POST /inference (task: "generate")', () => {
  it('generates with the usage fields of decisions.md#token-usage and stores the inference', async () => {
    const res = await stack.call('POST', '/inference', {
      body: { model_id: MODEL, task: 'generate', messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 4 },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ model_id: MODEL, type: 'decoder' });
    expect(res.body.inference_id).toMatch(/^inf_/);
    const u = res.body.usage;
    expect(Object.keys(u).sort()).toEqual([
      'cache_read_tokens',
      'cache_write_tokens',
      'completion_tokens',
      'prompt_tokens',
      'total_tokens',
    ]);
    expect(u.total_tokens).toBe(u.prompt_tokens + u.cache_read_tokens + u.cache_write_tokens + u.completion_tokens);
    const stored = await stack.call('GET', `/inferences/${res.body.inference_id}`);
    expect(stored.status).toBe(200);
    expect(stored.body.output.completion).toBe(res.body.completion);
  });

  it('caches a marked prefix: write, then read with lower uncached input', async () => {
    const messages = (q: string) => [
      {
        role: 'system',
        content: [{ type: 'text', text: longSystem('native'), cache_control: { type: 'ephemeral', ttl: '10m' } }],
      },
      { role: 'user', content: q },
    ];
    const a = await stack.call('POST', '/inference', {
      body: { model_id: MODEL, task: 'generate', messages: messages('One?'), max_tokens: 2 },
    });
    const b = await stack.call('POST', '/inference', {
      body: { model_id: MODEL, task: 'generate', messages: messages('Two?'), max_tokens: 2 },
    });
    expect(a.body.usage.cache_write_tokens).toBeGreaterThan(16);
    expect(b.body.usage.cache_read_tokens).toBe(a.body.usage.cache_write_tokens);
    expect(b.body.usage.prompt_tokens).toBeLessThan(a.body.usage.prompt_tokens + a.body.usage.cache_write_tokens);
  });

  it('422 on bad bodies; 404 unknown model; 409 for a job id or an undeployed project', async () => {
    const bad = await stack.call('POST', '/inference', {
      body: { model_id: MODEL, task: 'generate', messages: [], max_tokens: 0 },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.errors.map((e: { loc: string[] }) => e.loc.join('.'))).toEqual(
      expect.arrayContaining(['body.messages', 'body.max_tokens']),
    );
    const badTtl = await stack.call('POST', '/inference', {
      body: {
        model_id: MODEL,
        task: 'generate',
        messages: [
          {
            role: 'user',
            content: [{ type: 'text', text: 'x', cache_control: { type: 'ephemeral', ttl: 'forever' } }],
          },
        ],
      },
    });
    expect(badTtl.status).toBe(422);
    const unknown = await stack.call('POST', '/inference', {
      body: { model_id: 'nope/x', task: 'generate', messages: [{ role: 'user', content: 'x' }] },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail).toMatch(/nope\/x/);

    await stack.uploadDataset(
      'chat-rows',
      `${JSON.stringify({
        messages: [
          { role: 'user', content: 'hi' },
          { role: 'assistant', content: 'hello' },
        ],
      })}\n`,
    );
    const job = await stack.call('POST', '/core/training-jobs', {
      body: { model_name: 'm', base_model: MODEL, datasets: [{ name: 'chat-rows' }] },
    });
    expect(job.status).toBe(201);
    const byJob = await stack.call('POST', '/inference', {
      body: { model_id: job.body.id, task: 'generate', messages: [{ role: 'user', content: 'x' }] },
    });
    expect(byJob.status).toBe(409);
    expect(byJob.body.detail).toMatch(/has no active inference deployment/);
    const byJobCompat = await stack.call('POST', '/v1/messages', {
      body: { model: job.body.id, max_tokens: 1, messages: [{ role: 'user', content: 'x' }] },
    });
    expect(byJobCompat.status).toBe(409);
    expect(byJobCompat.body.error.message).toMatch(/has no active inference deployment/);
    await stack.call('POST', '/projects', { body: { name: 'empty-project' } });
    const byProject = await stack.call('POST', '/v1/chat/completions', {
      body: { model: 'empty-project', messages: [{ role: 'user', content: 'x' }] },
    });
    expect(byProject.status).toBe(409);
    expect(byProject.body.error.message).toMatch(/no active inference deployment/);
  });
});

describe('local engine prefix reuse', () => {
  it('reuses the KV state of a cached prefix, also after other prompts took every slot', async () => {
    const system = longSystem('kv-reuse').repeat(3);
    const body = (q: string) => ({
      model: MODEL,
      max_tokens: 2,
      messages: [
        { role: 'system', content: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }] },
        { role: 'user', content: q },
      ],
    });
    const first = await stack.call('POST', '/v1/chat/completions', { body: body('Alpha?') });
    const written = first.body.usage.prompt_tokens_details.cache_write_tokens;
    expect(written).toBeGreaterThan(50);
    const second = await stack.call('POST', '/v1/chat/completions', { body: body('Beta?') });
    expect(Number(second.headers.get('x-sift-prefix-reused-tokens'))).toBeGreaterThanOrEqual(written);
    // Fill all slots with unrelated prompts, so only the saved snapshot still holds the prefix.
    await Promise.all(
      Array.from({ length: 4 }, (_, i) =>
        stack.call('POST', '/v1/completions', {
          body: { model: MODEL, prompt: `Unrelated prompt number ${i}: `.repeat(8), max_tokens: 1 },
        }),
      ),
    );
    const third = await stack.call('POST', '/v1/chat/completions', { body: body('Gamma?') });
    expect(third.body.usage.prompt_tokens_details.cached_tokens).toBe(written);
    expect(Number(third.headers.get('x-sift-prefix-reused-tokens'))).toBeGreaterThanOrEqual(written);
  });

  it('a cache entry expires after its ttl of inactivity', async () => {
    const rt = requireRuntime(stack.svc, 'decoder');
    const system = longSystem('ttl');
    const body = {
      model: MODEL,
      max_tokens: 1,
      messages: [
        {
          role: 'user',
          content: [
            { type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1s' } },
            { type: 'text', text: 'Hi' },
          ],
        },
      ],
    };
    const a = await stack.call('POST', '/v1/chat/completions', { body });
    expect(a.body.usage.prompt_tokens_details.cache_write_tokens).toBeGreaterThan(0);
    const before = rt.cache.size;
    await new Promise((r) => setTimeout(r, 1100));
    const b = await stack.call('POST', '/v1/chat/completions', { body });
    expect(b.body.usage.prompt_tokens_details.cached_tokens).toBe(0);
    expect(b.body.usage.prompt_tokens_details.cache_write_tokens).toBe(
      a.body.usage.prompt_tokens_details.cache_write_tokens,
    );
    expect(rt.cache.size).toBeLessThanOrEqual(before);
  });

  it('prefixes under the minimum are silently not cached', async () => {
    const res = await stack.call('POST', '/v1/messages', {
      body: {
        model: MODEL,
        max_tokens: 1,
        system: [{ type: 'text', text: 'Short.', cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: 'Hi' }],
      },
    });
    expect(res.status).toBe(200);
    expect(res.body.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  });
});

describe('store, streaming and disconnects', () => {
  it('store:false behaves the same with and without streaming: id returned, nothing stored, tokens billed', async () => {
    const before = await usage();
    const plain = await stack.call('POST', '/v1/chat/completions', {
      body: { model: MODEL, store: false, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] },
    });
    const streamed = await stack.call('POST', '/v1/chat/completions', {
      body: { model: MODEL, store: false, stream: true, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] },
    });
    const ids = [plain.body.inference_id, streamed.headers.get('x-inference-id')];
    for (const id of ids) {
      expect(id).toMatch(/^inf_/);
      expect((await stack.call('GET', `/inferences/${id}`)).status).toBe(404);
    }
    const stored = await stack.call('POST', '/v1/messages', {
      body: { model: MODEL, stream: true, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] },
    });
    const storedId = stored.headers.get('x-inference-id');
    expect((await stack.call('GET', `/inferences/${storedId}`)).status).toBe(200);
    const after = await usage();
    expect(after.output_tokens - before.output_tokens).toBeGreaterThanOrEqual(4);
    // each of the three is billed once, stored or not: its own row, and today's spend grew by exactly their cost
    const rows = (await stack.call('GET', '/billing/usage/requests/list?limit=500')).body.data as any[];
    const billed = [...ids, storedId].map((id) => rows.filter((r) => r.inference_id === id));
    for (const r of billed) {
      expect(r).toHaveLength(1);
      expect(r[0].output_tokens).toBeGreaterThan(0);
      expect(r[0].cost_usd).toBeGreaterThan(0);
    }
    const micros = (usd: number) => Math.round(usd * 1e6);
    expect(micros(after.cost_usd) - micros(before.cost_usd)).toBe(
      billed.reduce((sum, r) => sum + micros(r[0].cost_usd), 0),
    );
  });

  it('a client that disconnects mid-stream cancels the generation; usage is still recorded and nothing hangs', async () => {
    const before = await usage();
    const ac = new AbortController();
    const res = await fetch(`${stack.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${OPERATOR_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: MODEL,
        stream: true,
        max_tokens: 400,
        temperature: 0,
        messages: [{ role: 'user', content: 'Write a long story about a dragon.' }],
      }),
      signal: ac.signal,
    });
    const id = res.headers.get('x-inference-id');
    const reader = res.body!.getReader();
    let received = 0;
    while (received < 3) {
      const { done } = await reader.read();
      if (done) break;
      received++;
    }
    ac.abort();
    // The generation stops, the slot is freed and the stored record says it was cancelled.
    let record: any;
    for (let i = 0; i < 50 && !record; i++) {
      await new Promise((r) => setTimeout(r, 100));
      const r = await stack.call('GET', `/inferences/${id}`);
      if (r.status === 200) record = r.body;
    }
    expect(record.output.finish_reason).toBe('cancelled');
    const after = await usage();
    const out = after.output_tokens - before.output_tokens;
    expect(out).toBeGreaterThan(0);
    expect(out).toBeLessThan(400);
    const next = await stack.call('POST', '/v1/chat/completions', {
      body: { model: MODEL, max_tokens: 1, messages: [{ role: 'user', content: 'Hi' }] },
    });
    expect(next.status).toBe(200);
  });

  it('unmatched /v1 paths answer in the vendor envelope with both request id headers', async () => {
    const res = await stack.call('POST', '/v1/nope', { body: {} });
    expect(res.status).toBe(404);
    expect(res.body.error).toMatchObject({ type: 'invalid_request_error' });
    expect(res.body.detail).toBeDefined();
    expect(res.headers.get('request-id')).toBe(res.headers.get('x-request-id'));
    const anth = await stack.call('POST', '/v1/messages/nope', { body: {} });
    expect(anth.body).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });
});

describe('schema extraction through the compatible routes', () => {
  // a stack with the built models published, so the mini encoder's weights are in the store
  let withModels: TestStack;
  beforeAll(async () => {
    withModels = await TestStack.start({ withModels: true });
  }, 180_000);
  afterAll(async () => withModels?.stop());

  it('runs the encoder on the last user message and returns its result as JSON content on chat and messages; decoders reject schema', async () => {
    // the built mini encoder, through the same EncoderRuntime (svc.encoder) as POST /inference
    const ENCODER = 'sift/gliner2-mini-v1';
    const schema = { entities: ['person'] };
    const text = 'Ada Lovelace wrote the first program.';
    const native = await withModels.call('POST', '/inference', { body: { model_id: ENCODER, text, schema } });
    expect(native.status).toBe(200);
    const chat = await withModels.call('POST', '/v1/chat/completions', {
      body: { model: ENCODER, schema, messages: [{ role: 'user', content: text }] },
    });
    expect(chat.status).toBe(200);
    expect(chat.body.model).toBe(ENCODER);
    expect(JSON.parse(chat.body.choices[0].message.content)).toEqual(native.body.result);
    const msg = await withModels.call('POST', '/v1/messages', {
      body: { model: ENCODER, max_tokens: 1, schema, messages: [{ role: 'user', content: text }] },
    });
    expect(msg.status).toBe(200);
    expect(JSON.parse(msg.body.content[0].text)).toEqual(native.body.result);
    // each is an inference of its own, stored with the text the encoder saw
    for (const [id, endpoint] of [
      [chat.body.inference_id, '/v1/chat/completions'],
      [msg.body.inference_id, '/v1/messages'],
    ]) {
      const stored = await withModels.call('GET', `/inferences/${id}`);
      expect(stored.body).toMatchObject({ model_id: ENCODER, type: 'encoder', endpoint, input: { text, schema } });
    }
    const decoderWithSchema = await withModels.call('POST', '/v1/chat/completions', {
      body: { model: MODEL, schema, messages: [{ role: 'user', content: 'x' }] },
    });
    expect(decoderWithSchema.status).toBe(400);
    expect(decoderWithSchema.body.error.param).toBe('schema');
  });
});

import OpenAI6 from 'openai6';
import OpenAI7 from 'openai7';
import { OPERATOR_KEY, type TestStack } from '../helpers/localStack';
import { inject429, longSystem, MODEL, startCompatStack } from './helpers';

let stack: TestStack;
beforeAll(async () => {
  stack = await startCompatStack();
});
afterAll(async () => stack.stop());

// Both majors share the surface used here; typed as 7.x so the union stays callable.
const SDKS: [string, typeof OpenAI7][] = [
  ['openai 6.x', OpenAI6 as unknown as typeof OpenAI7],
  ['openai 7.x', OpenAI7],
];

describe.each(SDKS)('%s against /v1', (_name, OpenAI) => {
  const client = () => new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: OPERATOR_KEY, maxRetries: 0 });

  it('chat.completions.create: OpenAI shape, echoed model, usage with cached/write details', async () => {
    const res = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hello.' }],
      max_tokens: 6,
      temperature: 0,
    });
    expect(res.object).toBe('chat.completion');
    expect(res.model).toBe(MODEL);
    expect(res.choices[0]?.message.role).toBe('assistant');
    expect(typeof res.choices[0]?.message.content).toBe('string');
    expect(['stop', 'length']).toContain(res.choices[0]?.finish_reason);
    expect(res.usage?.completion_tokens).toBeGreaterThan(0);
    expect(res.usage?.completion_tokens).toBeLessThanOrEqual(6);
    expect(res.usage?.total_tokens).toBe((res.usage?.prompt_tokens ?? 0) + (res.usage?.completion_tokens ?? 0));
    expect(res.usage?.prompt_tokens_details).toMatchObject({ cached_tokens: 0, cache_write_tokens: 0 });
    expect(res._request_id).toMatch(/.{8,}/);
  });

  it('chat.completions.stream().finalChatCompletion() with include_usage', async () => {
    const stream = client().chat.completions.stream({
      model: MODEL,
      messages: [{ role: 'user', content: 'Name a colour.' }],
      max_tokens: 5,
      stream_options: { include_usage: true },
    });
    const deltas: string[] = [];
    stream.on('content', (d) => deltas.push(d));
    const final = await stream.finalChatCompletion();
    expect(final.choices[0]?.message.content).toBe(deltas.join(''));
    expect(final.choices[0]?.finish_reason).toMatch(/stop|length/);
    expect(final.usage?.completion_tokens).toBeGreaterThan(0);
    expect(final.model).toBe(MODEL);
  });

  it('raw streaming: same id on every chunk, usage chunk with choices: [] last, no usage without include_usage', async () => {
    const s = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 4,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const c of s) chunks.push(c);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0]?.choices[0]?.delta.role).toBe('assistant');
    const last = chunks.at(-1);
    expect(last?.choices).toEqual([]);
    expect(last?.usage?.completion_tokens).toBeGreaterThan(0);
    expect(chunks.slice(0, -1).every((c) => c.usage === null)).toBe(true);

    const plain = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 3,
      stream: true,
    });
    const plainChunks = [];
    for await (const c of plain) plainChunks.push(c);
    expect(plainChunks.every((c) => c.usage === undefined)).toBe(true);
    expect(plainChunks.at(-1)?.choices[0]?.finish_reason).toMatch(/stop|length/);
  });

  it('stop sequences: the stop text never appears and finish_reason is stop', async () => {
    const res = await client().chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Count from 1 to 10, separated by commas.' }],
      max_tokens: 40,
      temperature: 0,
      stop: ['5'],
    });
    const text = res.choices[0]?.message.content ?? '';
    expect(text).not.toContain('5');
    if (res.usage && res.usage.completion_tokens < 40) expect(res.choices[0]?.finish_reason).toBe('stop');
  });

  it('completions.create (string prompt), streaming included', async () => {
    const res = await client().completions.create({
      model: MODEL,
      prompt: 'The sky is',
      max_tokens: 4,
      temperature: 0,
    });
    expect(res.object).toBe('text_completion');
    expect(res.choices[0]?.text.length).toBeGreaterThan(0);
    expect(res.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    const s = await client().completions.create({
      model: MODEL,
      prompt: 'The sky is',
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: typeof res.usage;
    for await (const c of s) {
      text += c.choices[0]?.text ?? '';
      if (c.usage) usage = c.usage;
    }
    expect(text).toBe(res.choices[0]?.text.slice(0, text.length));
    expect(usage?.completion_tokens).toBe(3);
  });

  it('responses.create → output_text, and responses.stream().finalResponse()', async () => {
    const res = await client().responses.create({
      model: MODEL,
      input: 'Say yes.',
      max_output_tokens: 4,
      instructions: 'Be brief.',
    });
    expect(res.object).toBe('response');
    expect(res.model).toBe(MODEL);
    expect(res.output_text.length).toBeGreaterThan(0);
    expect(res.usage?.input_tokens_details).toMatchObject({ cached_tokens: 0, cache_write_tokens: 0 });
    const stream = client().responses.stream({
      model: MODEL,
      input: [{ role: 'user', content: [{ type: 'input_text', text: 'Say no.' }] }],
      max_output_tokens: 4,
    });
    const deltas: string[] = [];
    stream.on('response.output_text.delta', (e) => deltas.push(e.delta));
    const final = await stream.finalResponse();
    expect(final.output_text).toBe(deltas.join(''));
    expect(['completed', 'incomplete']).toContain(final.status);
    expect(final.usage?.output_tokens).toBeGreaterThan(0);
  });

  it('prompt caching on chat: a marked system block is written once, then read', async () => {
    const system = longSystem(`openai-${_name}`);
    const ask = (q: string) =>
      client().chat.completions.create({
        model: MODEL,
        messages: [
          { role: 'system', content: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } } as never] },
          { role: 'user', content: q },
        ],
        max_tokens: 3,
      });
    const first = await ask('What is 2+2?');
    expect(first.usage?.prompt_tokens_details?.cached_tokens).toBe(0);
    const written = (first.usage!.prompt_tokens_details as { cache_write_tokens?: number }).cache_write_tokens ?? 0;
    expect(written).toBeGreaterThan(16);
    const second = await ask('What is 3+3?');
    expect(second.usage?.prompt_tokens_details?.cached_tokens).toBe(written);
    expect((second.usage!.prompt_tokens_details as { cache_write_tokens?: number }).cache_write_tokens).toBe(0);
    expect(second.usage?.prompt_tokens).toBeGreaterThan(written);
  });

  it('models.list and models.retrieve (percent-encoded id)', async () => {
    const page = await client().models.list();
    expect(page.data.map((m) => m.id)).toContain(MODEL);
    const one = await client().models.retrieve(MODEL);
    expect(one.id).toBe(MODEL);
  });

  it('errors: typed classes, OpenAI envelope, request ids', async () => {
    const c = client();
    const notFound = await c.chat.completions
      .create({ model: 'nope/unknown', messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(notFound).toBeInstanceOf(OpenAI.NotFoundError);
    expect(notFound.code).toBe('model_not_found');
    expect(notFound.param).toBe('model');
    expect(notFound.requestID).toMatch(/.{8,}/);

    const badKey = await new OpenAI({
      baseURL: `${stack.url}/v1`,
      apiKey: 'svc_sk_wrong',
      maxRetries: 0,
    }).chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(badKey).toBeInstanceOf(OpenAI.AuthenticationError);

    const zero = await c.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 0 })
      .catch((e) => e);
    expect(zero).toBeInstanceOf(OpenAI.BadRequestError);
    expect(zero.param).toBe('max_tokens');

    const tooMany = await c.chat.completions
      .create({ model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 100_000 })
      .catch((e) => e);
    expect(tooMany).toBeInstanceOf(OpenAI.BadRequestError);
    expect(tooMany.message).toMatch(/limit/);

    const encoder = await c.chat.completions
      .create({ model: 'fastino/gliner2-base-v1', messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(encoder).toBeInstanceOf(OpenAI.BadRequestError);
    expect(encoder.message).toMatch(/encoder/);

    const image = await c.chat.completions
      .create({
        model: MODEL,
        messages: [
          { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] },
        ],
      })
      .catch((e) => e);
    expect(image).toBeInstanceOf(OpenAI.BadRequestError);

    const streamErr = await c.chat.completions
      .create({ model: 'nope/unknown', messages: [{ role: 'user', content: 'x' }], stream: true })
      .catch((e) => e);
    expect(streamErr).toBeInstanceOf(OpenAI.NotFoundError);

    const prev = await c.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_1' }).catch((e) => e);
    expect(prev).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('retries a 429 after Retry-After and then succeeds', async () => {
    const fault = inject429(stack, 1);
    const started = Date.now();
    const res = await new OpenAI({
      baseURL: `${stack.url}/v1`,
      apiKey: OPERATOR_KEY,
      maxRetries: 2,
    }).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 2,
    });
    expect(fault.remaining()).toBe(0);
    expect(res.choices).toHaveLength(1);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    fault.clear();
    const spam = inject429(stack, 5);
    const err = await client()
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 })
      .catch((e) => e);
    spam.clear();
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.type).toBe('rate_limit_error');
    expect(spam.remaining()).toBe(0);
  });
});

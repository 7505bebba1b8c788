import Anthropic0 from 'anthropic0';
import Anthropic1 from 'anthropic1';
import { OPERATOR_KEY, type TestStack } from '../helpers/localStack';
import { inject429, longSystem, MODEL, startCompatStack } from './helpers';

let stack: TestStack;
beforeAll(async () => {
  stack = await startCompatStack();
});
afterAll(async () => stack.stop());

// Both majors share the surface used here; typed as 1.x so the union stays callable.
const SDKS: [string, typeof Anthropic1][] = [
  ['@anthropic-ai/sdk 0.x (x-api-key)', Anthropic0 as unknown as typeof Anthropic1],
  ['@anthropic-ai/sdk 1.x (Bearer)', Anthropic1],
];

describe.each(SDKS)('%s against /v1/messages', (name, Anthropic) => {
  const client = (opts: { baseURL?: string; maxRetries?: number } = {}) =>
    new Anthropic({ baseURL: opts.baseURL ?? stack.url, apiKey: OPERATOR_KEY, maxRetries: opts.maxRetries ?? 0 });

  it('messages.create: Message shape, echoed model, usage fields', async () => {
    const msg = await client().messages.create({
      model: MODEL,
      max_tokens: 6,
      messages: [{ role: 'user', content: 'Say hello.' }],
    });
    expect(msg.type).toBe('message');
    expect(msg.role).toBe('assistant');
    expect(msg.model).toBe(MODEL);
    expect(msg.content[0]?.type).toBe('text');
    expect(['end_turn', 'max_tokens']).toContain(msg.stop_reason);
    expect(msg.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    expect(msg.usage.input_tokens).toBeGreaterThan(0);
    expect(msg.usage.output_tokens).toBeGreaterThan(0);
    expect(msg._request_id).toMatch(/.{8,}/);
  });

  it('messages.stream().finalMessage() and raw events in the documented order', async () => {
    const stream = client().messages.stream({
      model: MODEL,
      max_tokens: 5,
      messages: [{ role: 'user', content: 'Name a fruit.' }],
    });
    let text = '';
    stream.on('text', (t) => (text += t));
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: 'text', text });
    expect(final.usage.output_tokens).toBeGreaterThan(0);
    expect(final.stop_reason).toMatch(/end_turn|max_tokens/);

    const raw = await client().messages.create({
      model: MODEL,
      max_tokens: 3,
      messages: [{ role: 'user', content: 'Hi' }],
      stream: true,
    });
    const types: string[] = [];
    for await (const ev of raw) types.push(ev.type);
    expect(types[0]).toBe('message_start');
    expect(types[1]).toBe('content_block_start');
    expect(types.slice(-3)).toEqual(['content_block_stop', 'message_delta', 'message_stop']);
  });

  it('stop_sequences: stop_reason stop_sequence with the matched string, never emitted', async () => {
    const msg = await client().messages.create({
      model: MODEL,
      max_tokens: 40,
      temperature: 0,
      messages: [{ role: 'user', content: 'Count from 1 to 10, separated by commas.' }],
      stop_sequences: ['5'],
    } as never);
    const text = (msg.content[0] as { text: string }).text;
    expect(text).not.toContain('5');
    if (msg.stop_reason === 'stop_sequence') expect(msg.stop_sequence).toBe('5');
  });

  it('prompt caching: explicit cache_control writes then reads; input_tokens exclude cached tokens', async () => {
    const system = longSystem(`anthropic-${name}`);
    const ask = (q: string) =>
      client().messages.create({
        model: MODEL,
        max_tokens: 3,
        system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral' } }],
        messages: [{ role: 'user', content: q }],
      });
    const first = await ask('What is 2+2?');
    expect(first.usage.cache_read_input_tokens).toBe(0);
    expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(16);
    expect(
      (first.usage as { cache_creation?: { ephemeral_5m_input_tokens: number } }).cache_creation
        ?.ephemeral_5m_input_tokens,
    ).toBe(first.usage.cache_creation_input_tokens);
    const second = await ask('What is 3+3?');
    expect(second.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
    expect(second.usage.cache_creation_input_tokens).toBe(0);
    expect(second.usage.input_tokens).toBeLessThan(
      first.usage.input_tokens + (first.usage.cache_creation_input_tokens ?? 0),
    );

    // The stream reports the same reads in message_start.
    const s = client().messages.stream({
      model: MODEL,
      max_tokens: 2,
      system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1h' } as never }],
      messages: [{ role: 'user', content: 'And 4+4?' }],
    });
    const streamed = await s.finalMessage();
    expect(streamed.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
  });

  it('without cache_control nothing is cached (Claude-style opt-in)', async () => {
    const system = longSystem(`nocache-${name}`);
    for (let i = 0; i < 2; i++) {
      const msg = await client().messages.create({
        model: MODEL,
        max_tokens: 2,
        system,
        messages: [{ role: 'user', content: 'Hi' }],
      });
      expect(msg.usage).toMatchObject({ cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
    }
  });

  it('bad input: clear 400s in the Anthropic envelope before any stream', async () => {
    const c = client();
    const noMax = await c.messages
      .create({ model: MODEL, messages: [{ role: 'user', content: 'x' }] } as never)
      .catch((e) => e);
    expect(noMax).toBeInstanceOf(Anthropic.BadRequestError);
    expect(noMax.type ?? noMax.error?.error?.type).toBe('invalid_request_error');

    const five = await c.messages
      .create({
        model: MODEL,
        max_tokens: 2,
        stream: true,
        messages: [
          {
            role: 'user',
            content: [1, 2, 3, 4, 5].map((n) => ({
              type: 'text' as const,
              text: `part ${n}`,
              cache_control: { type: 'ephemeral' as const },
            })),
          },
        ],
      })
      .catch((e) => e);
    expect(five).toBeInstanceOf(Anthropic.BadRequestError);
    expect(five.message).toMatch(/4/);

    const onString = await c.messages
      .create({
        model: MODEL,
        max_tokens: 2,
        messages: [{ role: 'user', content: 'plain', cache_control: { type: 'ephemeral' } } as never],
      })
      .catch((e) => e);
    expect(onString).toBeInstanceOf(Anthropic.BadRequestError);
    expect(onString.message).toMatch(/plain string/);

    const malformed = await c.messages
      .create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: [{ type: 'text' } as never] }] })
      .catch((e) => e);
    expect(malformed).toBeInstanceOf(Anthropic.BadRequestError);

    const unknown = await c.messages
      .create({ model: 'claude-nope', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(unknown).toBeInstanceOf(Anthropic.NotFoundError);
    expect(unknown.requestID).toMatch(/.{8,}/);

    const tools = await c.messages
      .create({
        model: MODEL,
        max_tokens: 2,
        messages: [{ role: 'user', content: 'x' }],
        tools: [{ type: 'web_search_20250305', name: 'web_search' } as never],
      })
      .catch((e) => e);
    // a server tool (run by Anthropic) is refused by name; client tools: anthropicTools.test.ts
    expect(tools).toBeInstanceOf(Anthropic.BadRequestError);
    expect(tools.message).toMatch(/tools\.0: 'web_search' is a server tool/);

    const v1Base = await client({ baseURL: `${stack.url}/v1` })
      .messages.create({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'x' }] })
      .catch((e) => e);
    expect(v1Base).toBeInstanceOf(Anthropic.NotFoundError);
  });

  it('models.list (merged body) and a 429 that is retried', async () => {
    const ids: string[] = [];
    for await (const m of client().models.list()) ids.push(m.id);
    expect(ids).toContain(MODEL);
    const fault = inject429(stack, 1);
    const msg = await client({ maxRetries: 2 }).messages.create({
      model: MODEL,
      max_tokens: 2,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    fault.clear();
    expect(msg.type).toBe('message');
    expect(fault.remaining()).toBe(0);
  });
});

/**
 * Tools and structured outputs on /v1/messages (issue #28) through the official Anthropic SDKs,
 * against the local stack: the catalog decoder at temperature 0 (greedy, so every answer is
 * deterministic), and the mini encoder for JSON answered by extraction. The constrained tests are
 * also run with the test-only `x-sift-test-unconstrained` switch, to show they fail without the grammar.
 */
import Anthropic0 from 'anthropic0';
import Anthropic1 from 'anthropic1';
import { zodOutputFormat } from 'anthropic1/helpers/zod';
import { z } from 'zod';
import { configureDecoder } from '../../src/adapters/decoder';
import { jsonSchemaToGliner, glinerToJsonObject } from '../../src/core/extraction/jsonSchemaMapping';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';
import { MODEL } from './helpers';

const ENCODER = 'sift/gliner2-mini-v1';
const UNCONSTRAINED = { headers: { 'x-sift-test-unconstrained': '1' } };
/** Greedy decoding (API 2026-10-21 dropped `temperature` from SDK 1.x's types; Sift honours it, compat.md §4.1). */
const GREEDY: object = { temperature: 0 };

let stack: TestStack;
beforeAll(async () => {
  // the built models published, so the mini encoder's weights are in the store
  stack = await TestStack.start({ withModels: true });
  configureDecoder(stack.svc, { minCacheTokens: 16 });
}, 180_000);
afterAll(async () => stack?.stop());

const client = (Anthropic: typeof Anthropic1 = Anthropic1) =>
  new Anthropic({ baseURL: stack.url, apiKey: OPERATOR_KEY, maxRetries: 0 });

const Weather = z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']) });
const weatherTool = {
  name: 'get_weather',
  description: 'Current weather in a city',
  input_schema: z.toJSONSchema(Weather) as Anthropic1.Tool.InputSchema,
};
const Time = z.object({ timezone: z.string() });
const timeTool = {
  name: 'get_time',
  description: 'Current time in a timezone',
  input_schema: z.toJSONSchema(Time) as Anthropic1.Tool.InputSchema,
};
const ask = 'What is the weather in Paris right now?';

type Msg = Anthropic1.Message;
const toolUses = (m: Msg) => m.content.filter((b): b is Anthropic1.ToolUseBlock => b.type === 'tool_use');

/** The forced-tool pattern holds: one call of the tool, its input valid against the tool's schema. */
function forcedCallHolds(m: Msg): boolean {
  const [call] = toolUses(m);
  return (
    m.stop_reason === 'tool_use' &&
    toolUses(m).length === 1 &&
    call?.name === 'get_weather' &&
    /^toolu_/.test(call.id) &&
    Weather.safeParse(call.input).success
  );
}

// Both majors send tools and read tool_use blocks the same way; typed as 1.x so the union stays callable.
describe.each([
  ['@anthropic-ai/sdk 0.x', Anthropic0 as unknown as typeof Anthropic1],
  ['@anthropic-ai/sdk 1.x', Anthropic1],
])('%s: tools on the catalog decoder', (_name, Anthropic) => {
  const forced = {
    model: MODEL,
    max_tokens: 60,
    ...GREEDY,
    tools: [weatherTool, timeTool],
    tool_choice: { type: 'tool' as const, name: 'get_weather' },
    messages: [{ role: 'user' as const, content: ask }],
  };

  it('a forced tool (the classic structured-output pattern) gives one tool_use whose input validates; unconstrained it does not', async () => {
    const msg = await client(Anthropic).messages.create(forced);
    expect(forcedCallHolds(msg)).toBe(true);
    const off = await client(Anthropic).messages.create(forced, UNCONSTRAINED);
    expect(forcedCallHolds(off)).toBe(false);
  });
});

describe('tool_choice forms, streaming, caching and tool results (SDK 1.x)', () => {
  const base = {
    model: MODEL,
    max_tokens: 60,
    ...GREEDY,
    tools: [weatherTool, timeTool],
    messages: [{ role: 'user' as const, content: ask }],
  };

  it('streamed: content_block_start tool_use, input_json_delta, assembled by MessageStream.finalMessage()', async () => {
    const stream = client().messages.stream({ ...base, tool_choice: { type: 'tool', name: 'get_weather' } });
    let json = '';
    stream.on('inputJson', (delta) => (json += delta));
    const events: string[] = [];
    stream.on('streamEvent', (e) =>
      events.push(
        e.type === 'content_block_start'
          ? `start:${e.content_block.type}`
          : e.type === 'content_block_delta'
            ? e.delta.type
            : e.type,
      ),
    );
    const final = await stream.finalMessage();
    expect(forcedCallHolds(final)).toBe(true);
    expect(JSON.parse(json)).toEqual(toolUses(final)[0]!.input);
    expect(events[0]).toBe('message_start');
    expect(events.slice(-5)).toEqual([
      'start:tool_use',
      'input_json_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
  });

  it('a cache_control on a tool marks the rendered tools block, first in the prefix', async () => {
    const marked = { ...weatherTool, cache_control: { type: 'ephemeral' as const } };
    const call = (content: string) =>
      client().messages.create({
        ...base,
        max_tokens: 2,
        tools: [timeTool, marked],
        messages: [{ role: 'user', content }],
      });
    const first = await call('Weather in Rome?');
    expect(first.usage.cache_creation_input_tokens).toBeGreaterThan(16);
    const second = await call('Weather in Oslo?');
    expect(second.usage.cache_read_input_tokens).toBe(first.usage.cache_creation_input_tokens);
  });

  it('any: a call of one of the tools, input valid against that tool', async () => {
    const msg = await client().messages.create({ ...base, tool_choice: { type: 'any' } });
    expect(msg.stop_reason).toBe('tool_use');
    const [call] = toolUses(msg);
    expect(call).toBeDefined();
    expect((call!.name === 'get_weather' ? Weather : Time).safeParse(call!.input).success).toBe(true);
  });

  it('auto: a valid call or a plain answer; none: text only', async () => {
    const auto = await client().messages.create({ ...base, tool_choice: { type: 'auto' } });
    if (auto.stop_reason === 'tool_use') {
      const [call] = toolUses(auto);
      expect((call!.name === 'get_weather' ? Weather : Time).safeParse(call!.input).success).toBe(true);
    } else {
      expect(auto.content.map((b) => b.type)).toEqual(['text']);
      expect((auto.content[0] as Anthropic1.TextBlock).text).not.toMatch(/^\s*\{"answer"/);
    }
    const none = await client().messages.create({ ...base, max_tokens: 12, tool_choice: { type: 'none' } });
    expect(none.content.map((b) => b.type)).toEqual(['text']);
    expect(none.stop_reason).not.toBe('tool_use');
  });

  it('tool_use and tool_result turns feed back into the prompt', async () => {
    const turns = (result: string): Anthropic1.MessageParam[] => [
      { role: 'user', content: ask },
      {
        role: 'assistant',
        content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris', unit: 'celsius' } }],
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: result }] },
    ];
    const count = async (result: string) =>
      (await client().messages.countTokens({ model: MODEL, tools: [weatherTool], messages: turns(result) }))
        .input_tokens;
    // the result's text is in the prompt: a longer result is more tokens
    expect(await count('Sunny, 31 degrees celsius, light wind from the south-west.')).toBeGreaterThan(
      await count('Sunny.'),
    );
    const answer = await client().messages.create({
      model: MODEL,
      max_tokens: 16,
      ...GREEDY,
      tools: [weatherTool],
      tool_choice: { type: 'none' },
      messages: turns('Sunny, 31 degrees celsius.'),
    });
    expect(answer.content[0]?.type).toBe('text');
    // an error result (text blocks, is_error) beside a text block, then a forced call again
    const errored = await client().messages.create({
      model: MODEL,
      max_tokens: 60,
      ...GREEDY,
      tools: [weatherTool],
      tool_choice: { type: 'tool', name: 'get_weather' },
      messages: [
        ...turns('').slice(0, 2),
        {
          role: 'user',
          content: [
            {
              type: 'tool_result',
              tool_use_id: 'toolu_1',
              is_error: true,
              content: [{ type: 'text', text: 'unknown city' }],
            },
            { type: 'text', text: 'Try again for Lyon.' },
          ],
        },
      ],
    });
    expect(forcedCallHolds(errored)).toBe(true);
  });
});

describe('output_config.format (messages.parse with zodOutputFormat)', () => {
  const Answer = z.object({ city: z.string(), population_millions: z.number(), capital: z.boolean() });
  const params = {
    model: MODEL,
    max_tokens: 60,
    ...GREEDY,
    messages: [{ role: 'user' as const, content: 'Describe Paris.' }],
    output_config: { format: zodOutputFormat(Answer) },
  };

  it('parse: the text block is JSON the SDK parses and validates; unconstrained it fails', async () => {
    const msg = await client().messages.parse(params);
    expect(Answer.safeParse(msg.parsed_output).success).toBe(true);
    expect(msg.content.map((b) => b.type)).toEqual(['text']);
    await expect(client().messages.parse(params, UNCONSTRAINED)).rejects.toThrow(/parse structured output/);
  });

  it('streamed: finalMessage().parsed_output validates', async () => {
    const final = await client().messages.stream(params).finalMessage();
    expect(Answer.safeParse(final.parsed_output).success).toBe(true);
  });
});

describe('JSON from an encoder: answered by extraction', () => {
  const text = 'Ada Lovelace, a mathematician from London, wrote the first program.';
  const Person = z.object({
    name: z.string().nullable().describe('the person'),
    city: z.string().optional(),
    skills: z.array(z.string()),
    kind: z.enum(['scientist', 'artist']).nullable(),
  });

  /** What the native API extracts for the mapped structure, as the object the schema describes. */
  async function nativeObject(schema: unknown, name?: string) {
    const mapping = jsonSchemaToGliner(schema, 'schema', name);
    const native = await stack.call('POST', '/inference', {
      body: { model_id: ENCODER, text, schema: mapping.schema },
    });
    expect(native.status).toBe(200);
    return glinerToJsonObject(native.body.result, mapping);
  }

  it('output_config.format: parse and stream give the extraction, valid against the schema; stored as an encoder inference', async () => {
    const params = {
      model: ENCODER,
      max_tokens: 1,
      messages: [{ role: 'user' as const, content: text }],
      output_config: { format: zodOutputFormat(Person) },
    };
    const msg = await client().messages.parse(params);
    expect(Person.safeParse(msg.parsed_output).success).toBe(true);
    expect(msg.parsed_output).toEqual(await nativeObject(params.output_config.format.schema));
    const final = await client().messages.stream(params).finalMessage();
    expect(final.parsed_output).toEqual(msg.parsed_output);
    const stored = await stack.call('GET', `/inferences/${(msg as unknown as { inference_id: string }).inference_id}`);
    expect(stored.body).toMatchObject({
      model_id: ENCODER,
      type: 'encoder',
      endpoint: '/v1/messages',
      input: { text },
    });
  });

  it('a forced tool: one tool_use whose input is the extraction', async () => {
    const tool = { name: 'record_person', input_schema: z.toJSONSchema(Person) as Anthropic1.Tool.InputSchema };
    const msg = await client().messages.create({
      model: ENCODER,
      max_tokens: 1,
      tools: [tool],
      tool_choice: { type: 'tool', name: 'record_person' },
      messages: [{ role: 'user', content: text }],
    });
    expect(msg.stop_reason).toBe('tool_use');
    const [call] = toolUses(msg);
    expect(call).toMatchObject({ name: 'record_person', id: expect.stringMatching(/^toolu_/) });
    expect(Person.safeParse(call!.input).success).toBe(true);
    expect(call!.input).toEqual(await nativeObject(tool.input_schema, 'record_person'));
  });
});

describe('refusals: 400 in the Anthropic envelope, naming the field', () => {
  const refused = async (body: Record<string, unknown>) => {
    const err = await client()
      .messages.create({ max_tokens: 8, messages: [{ role: 'user', content: 'x' }], model: MODEL, ...body } as never)
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic1.BadRequestError);
    expect(err.type).toBe('invalid_request_error');
    return err.message as string;
  };

  it('server tools, unknown or missing tool names, schemas the grammar cannot express, format beside tools', async () => {
    expect(await refused({ tools: [{ type: 'web_search_20250305', name: 'web_search' }] })).toMatch(
      /tools\.0: 'web_search' is a server tool/,
    );
    expect(await refused({ tools: [weatherTool], tool_choice: { type: 'tool', name: 'nope' } })).toMatch(
      /tool_choice names 'nope'/,
    );
    expect(await refused({ tool_choice: { type: 'any' } })).toMatch(/tools is empty/);
    expect(await refused({ tools: [{ name: 'f' }] })).toMatch(/tools\.0\.input_schema/);
    expect(
      await refused({
        tools: [{ name: 'f', input_schema: { type: 'object', properties: { a: { type: 'string', pattern: '^a' } } } }],
      }),
    ).toMatch(/tools\[0\] \(f\) parameters .*`pattern`/);
    expect(
      await refused({
        output_config: { format: { type: 'json_schema', schema: { type: 'object', patternProperties: { a: {} } } } },
      }),
    ).toMatch(/output_config\.format\.schema .*`patternProperties`/);
    expect(
      await refused({
        tools: [weatherTool],
        output_config: { format: { type: 'json_schema', schema: { type: 'object' } } },
      }),
    ).toMatch(/either output_config\.format or tools/);
  });

  it('on an encoder: a required string, a nested object or a number, each named', async () => {
    const msg = await refused({
      model: ENCODER,
      output_config: {
        format: {
          type: 'json_schema',
          schema: {
            type: 'object',
            properties: {
              name: { type: 'string' },
              address: { type: 'object', properties: {} },
              age: { type: 'number' },
            },
            required: ['name'],
          },
        },
      },
    });
    expect(msg).toContain('output_config.format.schema.properties.name: is required and not nullable');
    expect(msg).toContain('output_config.format.schema.properties.address: a nested object is not supported');
    expect(msg).toContain("output_config.format.schema.properties.age: type 'number' is not supported");
    expect(
      await refused({
        model: ENCODER,
        tools: [{ name: 'f', input_schema: { type: 'object', properties: { n: { type: 'integer' } } } }],
        tool_choice: { type: 'tool', name: 'f' },
      }),
    ).toContain("tools.0.input_schema.properties.n: type 'integer' is not supported");
    // an encoder cannot answer free text or an unforced tool choice
    expect(await refused({ model: ENCODER, tools: [weatherTool], tool_choice: { type: 'auto' } })).toMatch(/encoder/);
  });
});

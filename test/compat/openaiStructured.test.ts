/**
 * Structured outputs, tools and logprobs on /v1/chat/completions, /v1/completions and /v1/responses through the
 * official OpenAI SDKs (#28), on the catalog decoder (greedy, seeded) and on the mini encoder (JSON schema →
 * GLiNER2). Validity comes from grammar-constrained decoding, so every parsed object is checked against its
 * schema. One file, one stack: the models load once.
 */
import OpenAI6 from 'openai6';
import OpenAI7 from 'openai7';
import { zodFunction, zodResponseFormat, zodResponsesFunction, zodTextFormat } from 'openai7/helpers/zod';
import { zodResponseFormat as zodResponseFormat6 } from 'openai6/helpers/zod';
import { z } from 'zod';
import { OPERATOR_KEY } from '../helpers/localStack';
import { ENCODER, MODEL, useModelsStack } from './helpers';

const stack = useModelsStack();

const client = (OpenAI: typeof OpenAI7 = OpenAI7) =>
  new OpenAI({ baseURL: `${stack().url}/v1`, apiKey: OPERATOR_KEY, maxRetries: 0 });
const greedy = { temperature: 0, seed: 7 } as const;

const City = z.object({ city: z.string(), country: z.string() });
const Weather = z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']) });
const Time = z.object({ timezone: z.string() });
const fn = (name: string, description: string, schema: z.ZodType) => ({
  type: 'function' as const,
  function: { name, description, parameters: z.toJSONSchema(schema) as Record<string, unknown> },
});
const weatherTool = fn('get_weather', 'Current weather in a city', Weather);
const timeTool = fn('get_time', 'Current time in a timezone', Time);
const ask = [{ role: 'user' as const, content: 'What is the weather in Paris?' }];

describe.each([
  ['openai 6.x', OpenAI6 as unknown as typeof OpenAI7, zodResponseFormat6 as unknown as typeof zodResponseFormat],
  ['openai 7.x', OpenAI7, zodResponseFormat],
])('%s: chat.completions.parse with zodResponseFormat', (_name, OpenAI, format) => {
  it('parses an object that validates against the zod schema', async () => {
    const completion = await client(OpenAI).chat.completions.parse({
      model: MODEL,
      messages: [{ role: 'user', content: 'Where is the Eiffel Tower?' }],
      response_format: format(City, 'location'),
      max_tokens: 60,
      ...greedy,
    });
    const parsed = completion.choices[0]?.message.parsed;
    expect(City.parse(parsed)).toEqual(parsed);
    expect(completion.choices[0]?.finish_reason).toBe('stop');
  });
});

describe('/v1/chat/completions structured outputs and tools (openai 7.x)', () => {
  it('proof the test can fail: without the constraint (test-only switch) the same request does not parse', async () => {
    const off = await client().chat.completions.create(
      {
        model: MODEL,
        messages: [{ role: 'user', content: 'Where is the Eiffel Tower?' }],
        response_format: zodResponseFormat(City, 'location'),
        max_tokens: 60,
        ...greedy,
      },
      { headers: { 'x-sift-test-unconstrained': '1' } },
    );
    const content = off.choices[0]?.message.content ?? '';
    expect(content.length).toBeGreaterThan(0);
    const json = (() => {
      try {
        return JSON.parse(content) as unknown;
      } catch {
        return undefined;
      }
    })();
    expect(City.safeParse(json).success).toBe(false);
  });

  it('json_object: the content is a JSON object, streamed too', async () => {
    const body = {
      model: MODEL,
      messages: [
        { role: 'user' as const, content: 'Reply with a JSON object whose key "colour" is the colour of the sky.' },
      ],
      response_format: { type: 'json_object' as const },
      max_tokens: 60,
      ...greedy,
    };
    const res = await client().chat.completions.create(body);
    const content = JSON.parse(res.choices[0]?.message.content ?? 'null');
    expect(typeof content).toBe('object');
    expect(Array.isArray(content)).toBe(false);
    const streamed = await client().chat.completions.stream(body).finalChatCompletion();
    expect(streamed.choices[0]?.message.content).toBe(res.choices[0]?.message.content);
  });

  it('a named tool_choice answers with that call: id, content null, finish_reason tool_calls, valid arguments', async () => {
    const res = await client().chat.completions.create({
      model: MODEL,
      messages: ask,
      tools: [weatherTool, timeTool],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 60,
      ...greedy,
    });
    const choice = res.choices[0]!;
    expect(choice.finish_reason).toBe('tool_calls');
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls?.[0];
    expect(call).toMatchObject({ type: 'function', id: expect.stringMatching(/^call_/) });
    if (call?.type !== 'function') throw new Error('expected a function call');
    expect(call.function.name).toBe('get_weather');
    Weather.parse(JSON.parse(call.function.arguments));
  });

  it('required calls one of the tools; none answers in text; auto answers or calls', async () => {
    const base = { model: MODEL, messages: ask, tools: [weatherTool, timeTool], max_tokens: 60, ...greedy };
    const required = await client().chat.completions.create({ ...base, tool_choice: 'required' });
    const call = required.choices[0]?.message.tool_calls?.[0];
    if (call?.type !== 'function') throw new Error('required must call a tool');
    const schema = call.function.name === 'get_weather' ? Weather : Time;
    expect(['get_weather', 'get_time']).toContain(call.function.name);
    schema.parse(JSON.parse(call.function.arguments));

    const none = await client().chat.completions.create({ ...base, tool_choice: 'none', max_tokens: 8 });
    expect(none.choices[0]?.message.tool_calls).toBeUndefined();
    expect(typeof none.choices[0]?.message.content).toBe('string');

    const auto = await client().chat.completions.create({ ...base, tool_choice: 'auto', parallel_tool_calls: false });
    const message = auto.choices[0]!.message;
    if (message.tool_calls?.length) {
      expect(auto.choices[0]?.finish_reason).toBe('tool_calls');
      for (const c of message.tool_calls) {
        if (c.type !== 'function') throw new Error('function calls only');
        (c.function.name === 'get_weather' ? Weather : Time).parse(JSON.parse(c.function.arguments));
      }
    } else expect(typeof message.content).toBe('string');
  });

  it('streamed tool-call deltas (index, id, type, name first) assemble in the SDK stream helper', async () => {
    const params = {
      model: MODEL,
      messages: ask,
      tools: [weatherTool],
      tool_choice: { type: 'function' as const, function: { name: 'get_weather' } },
      max_tokens: 60,
      stream_options: { include_usage: true },
      ...greedy,
    };
    const stream = client().chat.completions.stream(params);
    const chunks: OpenAI7.Chat.Completions.ChatCompletionChunk[] = [];
    stream.on('chunk', (c) => chunks.push(c));
    const final = await stream.finalChatCompletion();
    const call = final.choices[0]?.message.tool_calls?.[0];
    if (call?.type !== 'function') throw new Error('expected a function call');
    expect(call.function.name).toBe('get_weather');
    Weather.parse(JSON.parse(call.function.arguments));
    expect(final.choices[0]?.finish_reason).toBe('tool_calls');
    const first = chunks.flatMap((c) => c.choices[0]?.delta.tool_calls ?? [])[0];
    expect(first).toMatchObject({ index: 0, id: call.id, type: 'function', function: { name: 'get_weather' } });
    expect(chunks.at(-1)?.usage?.completion_tokens).toBeGreaterThan(0);
  });

  it('runTools calls the zod function with validated arguments and feeds its result back', async () => {
    const seen: z.infer<typeof Weather>[] = [];
    const runner = client().chat.completions.runTools({
      model: MODEL,
      messages: ask,
      tools: [
        zodFunction({
          name: 'get_weather',
          parameters: Weather,
          function: (args) => {
            seen.push(args);
            return { temperature: 18 };
          },
        }),
      ],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 60,
      ...greedy,
    });
    await runner.finalChatCompletion();
    expect(seen).toHaveLength(1);
    expect(Weather.parse(seen[0])).toEqual(seen[0]);
    const toolTurn = runner.messages.find((m) => m.role === 'tool');
    expect(toolTurn).toMatchObject({ content: '{"temperature":18}' });
  });

  it('an assistant tool_calls turn and its tool result feed back into the prompt', async () => {
    const turns = (result: string): OpenAI7.Chat.Completions.ChatCompletionMessageParam[] => [
      ...ask,
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'call_1', content: result },
    ];
    const short = await client().chat.completions.create({
      model: MODEL,
      messages: turns('18C'),
      tools: [weatherTool],
      tool_choice: 'none',
      max_tokens: 8,
      ...greedy,
    });
    const long = await client().chat.completions.create({
      model: MODEL,
      messages: turns('18 degrees celsius, light rain, wind from the west at 20 km/h'),
      tools: [weatherTool],
      tool_choice: 'none',
      max_tokens: 8,
      ...greedy,
    });
    expect(typeof short.choices[0]?.message.content).toBe('string');
    // the tool's result is in the prompt: a longer result, a longer prompt
    expect(long.usage!.prompt_tokens).toBeGreaterThan(short.usage!.prompt_tokens + 10);
  });

  it('logprobs with top_logprobs, non-streaming and streaming; legacy completions logprobs', async () => {
    const body = {
      model: MODEL,
      messages: [{ role: 'user' as const, content: 'Name a colour.' }],
      logprobs: true,
      top_logprobs: 2,
      max_tokens: 4,
      ...greedy,
    };
    const res = await client().chat.completions.create(body);
    const content = res.choices[0]?.logprobs?.content ?? [];
    expect(content.length).toBeGreaterThan(0);
    expect(content.map((t) => t.token).join('')).toBe(res.choices[0]?.message.content);
    for (const t of content) {
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.bytes).toEqual([...Buffer.from(t.token)]);
      expect(t.top_logprobs).toHaveLength(2);
      // greedy: the chosen token is the most likely one
      expect(t.top_logprobs[0]?.logprob).toBeCloseTo(t.logprob, 4);
    }
    const streamed = await client().chat.completions.stream(body).finalChatCompletion();
    expect(streamed.choices[0]?.logprobs?.content?.map((t) => t.token)).toEqual(content.map((t) => t.token));

    const legacy = await client().completions.create({
      model: MODEL,
      prompt: 'The capital of France is',
      logprobs: 2,
      max_tokens: 3,
      ...greedy,
    });
    const lp = legacy.choices[0]?.logprobs;
    expect(lp?.tokens?.join('')).toBe(legacy.choices[0]?.text);
    expect(lp?.token_logprobs).toHaveLength(lp?.tokens?.length ?? -1);
    expect(Object.keys(lp?.top_logprobs?.[0] ?? {})).toHaveLength(2);
    expect(lp?.text_offset?.[0]).toBe(0);
    expect(lp?.text_offset?.[1]).toBe(lp?.tokens?.[0]?.length);
  });

  it('refusals name their field', async () => {
    const c = client();
    const fail = (p: Promise<unknown>) =>
      p.then(() => undefined).catch((e) => e as InstanceType<typeof OpenAI7.APIError>);
    const unknownTool = await fail(
      c.chat.completions.create({
        model: MODEL,
        messages: ask,
        tools: [weatherTool],
        tool_choice: { type: 'function', function: { name: 'get_stock' } },
      }),
    );
    expect(unknownTool).toBeInstanceOf(OpenAI7.BadRequestError);
    expect(unknownTool?.param).toBe('tool_choice');
    expect(unknownTool?.message).toMatch(/get_stock/);

    const keyword = await fail(
      c.chat.completions.create({
        model: MODEL,
        messages: ask,
        response_format: {
          type: 'json_schema',
          json_schema: {
            name: 'x',
            schema: { type: 'object', properties: { a: { type: 'string' } }, patternProperties: { '^b': {} } },
          },
        },
      }),
    );
    expect(keyword).toBeInstanceOf(OpenAI7.BadRequestError);
    expect(keyword?.message).toMatch(/patternProperties/);
    expect(keyword?.message).toMatch(/response_format\.json_schema\.schema/);

    const topOnly = await fail(c.chat.completions.create({ model: MODEL, messages: ask, top_logprobs: 2 }));
    expect(topOnly?.param).toBe('top_logprobs');
    const n = await fail(c.chat.completions.create({ model: MODEL, messages: ask, n: 2 }));
    expect(n?.param).toBe('n');
  });
});

describe('an encoder answers a JSON schema by extraction', () => {
  const Person = z.object({ person: z.string().nullable(), company: z.string().nullable() });
  const text = 'Tim Cook leads Apple.';

  it('chat.completions.parse gets the extracted object, streamed and not; a named tool answers as its call', async () => {
    const params = {
      model: ENCODER,
      messages: [{ role: 'user' as const, content: text }],
      // named as the tool below: the name is part of the encoder's prompt, so the two ask the same question
      // (with different names the spans found may differ, by how the built model scores them)
      response_format: zodResponseFormat(Person, 'record'),
    };
    const res = await client().chat.completions.parse(params);
    const parsed = res.choices[0]?.message.parsed;
    expect(Person.parse(parsed)).toEqual(parsed);
    expect(Object.keys(parsed ?? {}).sort()).toEqual(['company', 'person']);
    const streamed = await client().chat.completions.stream(params).finalChatCompletion();
    expect(streamed.choices[0]?.message.parsed).toEqual(parsed);

    const tool = await client().chat.completions.create({
      model: ENCODER,
      messages: [{ role: 'user', content: text }],
      tools: [{ type: 'function', function: { name: 'record', parameters: z.toJSONSchema(Person) as never } }],
      tool_choice: { type: 'function', function: { name: 'record' } },
    });
    const call = tool.choices[0]?.message.tool_calls?.[0];
    if (call?.type !== 'function') throw new Error('expected a function call');
    expect(call.function.name).toBe('record');
    expect(JSON.parse(call.function.arguments)).toEqual(parsed);
    expect(tool.choices[0]?.finish_reason).toBe('tool_calls');
  });

  it('a required non-nullable string is a 400 naming it', async () => {
    const err = await client()
      .chat.completions.create({
        model: ENCODER,
        messages: [{ role: 'user', content: text }],
        response_format: zodResponseFormat(z.object({ person: z.string() }), 'people'),
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI7.BadRequestError);
    expect(err.message).toMatch(/person/);
  });
});

const weatherFn = zodResponsesFunction({ name: 'get_weather', parameters: Weather, description: 'Weather in a city' });

describe('/v1/responses structured outputs and tools', () => {
  it('responses.parse with zodTextFormat: output_parsed validates, streamed too', async () => {
    const params = {
      model: MODEL,
      input: 'Where is the Eiffel Tower?',
      text: { format: zodTextFormat(City, 'location') },
      max_output_tokens: 60,
      temperature: 0,
    };
    const res = await client().responses.parse(params);
    expect(City.parse(res.output_parsed)).toEqual(res.output_parsed);
    expect(res.status).toBe('completed');
    const streamed = await client().responses.stream(params).finalResponse();
    expect(streamed.output_parsed).toEqual(res.output_parsed);
  });

  it('a named function tool answers with a function_call item; streamed as its events', async () => {
    const params = {
      model: MODEL,
      input: 'What is the weather in Paris?',
      tools: [weatherFn],
      tool_choice: { type: 'function' as const, name: 'get_weather' },
      max_output_tokens: 60,
      temperature: 0,
    };
    const res = await client().responses.parse(params);
    const call = res.output.find((o) => o.type === 'function_call');
    expect(call).toMatchObject({ name: 'get_weather', call_id: expect.stringMatching(/^call_/), status: 'completed' });
    if (call?.type !== 'function_call') throw new Error('expected a function_call item');
    expect(Weather.parse(call.parsed_arguments)).toEqual(JSON.parse(call.arguments));

    const types: string[] = [];
    const stream = client().responses.stream(params);
    stream.on('event', (e) => types.push(e.type));
    const final = await stream.finalResponse();
    expect(final.output).toEqual(
      res.output.map((o) =>
        expect.objectContaining({ type: o.type, arguments: (o as { arguments?: string }).arguments }),
      ),
    );
    expect(types).toEqual(
      expect.arrayContaining([
        'response.output_item.added',
        'response.function_call_arguments.delta',
        'response.function_call_arguments.done',
        'response.output_item.done',
        'response.completed',
      ]),
    );

    const none = await client().responses.create({ ...params, tool_choice: 'none', max_output_tokens: 8 });
    expect(none.output[0]?.type).toBe('message');
  });

  it('function_call and function_call_output items feed back into the prompt', async () => {
    const input = (output: string): OpenAI7.Responses.ResponseInput => [
      { role: 'user', content: 'What is the weather in Paris?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
      { type: 'function_call_output', call_id: 'call_1', output },
    ];
    const short = await client().responses.create({
      model: MODEL,
      input: input('18C'),
      max_output_tokens: 8,
      temperature: 0,
    });
    const long = await client().responses.create({
      model: MODEL,
      input: input('18 degrees celsius, light rain, wind from the west at 20 km/h'),
      max_output_tokens: 8,
      temperature: 0,
    });
    expect(short.output_text.length).toBeGreaterThan(0);
    expect(long.usage!.input_tokens).toBeGreaterThan(short.usage!.input_tokens + 10);
  });

  it('an encoder answers text.format json_schema by extraction; a required string is a 400 naming it', async () => {
    const Person = z.object({ person: z.string().nullable(), company: z.string().nullable() });
    const res = await client().responses.parse({
      model: ENCODER,
      input: 'Tim Cook leads Apple.',
      text: { format: zodTextFormat(Person, 'people') },
    });
    expect(Person.parse(res.output_parsed)).toEqual(res.output_parsed);

    const err = await client()
      .responses.create({
        model: ENCODER,
        input: 'Tim Cook leads Apple.',
        text: { format: zodTextFormat(z.object({ person: z.string() }), 'people') },
      })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI7.BadRequestError);
    expect(err.message).toMatch(/person/);
  });

  it('refusals name their field', async () => {
    const unknown = await client()
      .responses.create({
        model: MODEL,
        input: 'x',
        tools: [weatherFn],
        tool_choice: { type: 'function', name: 'get_stock' },
      })
      .catch((e) => e);
    expect(unknown).toBeInstanceOf(OpenAI7.BadRequestError);
    expect(unknown.param).toBe('tool_choice');
    const keyword = await client()
      .responses.create({
        model: MODEL,
        input: 'x',
        text: {
          format: {
            type: 'json_schema',
            name: 'x',
            schema: { type: 'object', properties: { a: { type: 'string' } }, patternProperties: { '^b': {} } },
          },
        },
      })
      .catch((e) => e);
    expect(keyword).toBeInstanceOf(OpenAI7.BadRequestError);
    expect(keyword.message).toMatch(/patternProperties/);
    expect(keyword.message).toMatch(/text\.format\.schema/);
  });
});

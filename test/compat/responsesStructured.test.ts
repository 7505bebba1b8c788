/**
 * Structured outputs and function tools on /v1/responses through the official OpenAI SDK (#28): `responses.parse`
 * with `zodTextFormat`, function_call output items (streamed as their events), calls and results fed back, and the
 * encoder's JSON-schema answers.
 */
import OpenAI from 'openai7';
import { zodResponsesFunction, zodTextFormat } from 'openai7/helpers/zod';
import { z } from 'zod';
import { OPERATOR_KEY } from '../helpers/localStack';
import { ENCODER, MODEL, useModelsStack } from './helpers';

const stack = useModelsStack();

const client = () => new OpenAI({ baseURL: `${stack().url}/v1`, apiKey: OPERATOR_KEY, maxRetries: 0 });
const greedy = { temperature: 0 } as const;
const City = z.object({ city: z.string(), country: z.string() });
const Weather = z.object({ city: z.string(), unit: z.enum(['celsius', 'fahrenheit']) });
const weather = zodResponsesFunction({ name: 'get_weather', parameters: Weather, description: 'Weather in a city' });

describe('/v1/responses structured outputs and tools', () => {
  it('responses.parse with zodTextFormat: output_parsed validates, streamed too', async () => {
    const params = {
      model: MODEL,
      input: 'Where is the Eiffel Tower?',
      text: { format: zodTextFormat(City, 'location') },
      max_output_tokens: 60,
      ...greedy,
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
      tools: [weather],
      tool_choice: { type: 'function' as const, name: 'get_weather' },
      max_output_tokens: 60,
      ...greedy,
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

    const required = await client().responses.create({ ...params, tool_choice: 'required' });
    expect(required.output[0]?.type).toBe('function_call');
    const none = await client().responses.create({ ...params, tool_choice: 'none', max_output_tokens: 8 });
    expect(none.output[0]?.type).toBe('message');
  });

  it('function_call and function_call_output items feed back into the prompt', async () => {
    const input = (output: string): OpenAI.Responses.ResponseInput => [
      { role: 'user', content: 'What is the weather in Paris?' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris","unit":"celsius"}' },
      { type: 'function_call_output', call_id: 'call_1', output },
    ];
    const short = await client().responses.create({
      model: MODEL,
      input: input('18C'),
      max_output_tokens: 8,
      ...greedy,
    });
    const long = await client().responses.create({
      model: MODEL,
      input: input('18 degrees celsius, light rain, wind from the west at 20 km/h'),
      max_output_tokens: 8,
      ...greedy,
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
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect(err.message).toMatch(/person/);
  });

  it('refusals name their field', async () => {
    const unknown = await client()
      .responses.create({
        model: MODEL,
        input: 'x',
        tools: [weather],
        tool_choice: { type: 'function', name: 'get_stock' },
      })
      .catch((e) => e);
    expect(unknown).toBeInstanceOf(OpenAI.BadRequestError);
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
    expect(keyword).toBeInstanceOf(OpenAI.BadRequestError);
    expect(keyword.message).toMatch(/patternProperties/);
    expect(keyword.message).toMatch(/text\.format\.schema/);
  });
});

import { z } from 'zod';
import { checkJsonSchema, grammarSchema, structuredOutputMessages } from '../../src/core/decoder/structured';
import { planToolUse, readToolOutput, toolCallsText, toolResultText } from '../../src/core/decoder/tools';
import type { DecoderMessage, ToolChoice, ToolSpec } from '../../src/core/decoder/types';
import { BadRequestError } from '../../src/core/errors';

const refused = (schema: unknown, field = 'response_format.json_schema.schema'): string => {
  try {
    checkJsonSchema(schema, field);
  } catch (err) {
    expect(err).toBeInstanceOf(BadRequestError);
    return (err as Error).message;
  }
  throw new Error('schema was accepted');
};

describe('checkJsonSchema', () => {
  it('accepts what an OpenAI strict schema is made of, and returns it as sent', () => {
    // What openai's zodResponseFormat sends for a Zod object with a nullable, an enum, a list and a $ref.
    const strict = {
      type: 'object',
      properties: {
        name: { type: 'string', description: 'who' },
        age: { type: ['integer', 'null'] },
        role: { type: 'string', enum: ['admin', 'user'] },
        address: { anyOf: [{ $ref: '#/$defs/address' }, { type: 'null' }] },
        tags: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: 3 },
        when: { type: 'string', format: 'date-time' },
        kind: { const: 'person' },
      },
      required: ['name', 'age', 'role', 'address', 'tags', 'when', 'kind'],
      additionalProperties: false,
      $defs: {
        address: {
          type: 'object',
          properties: { city: { type: 'string', minLength: 1 } },
          required: ['city'],
          additionalProperties: false,
        },
      },
      $schema: 'http://json-schema.org/draft-07/schema#',
      title: 'Person',
    };
    expect(checkJsonSchema(strict, 'f')).toBe(strict);
    // An object nullable by a type list becomes two alternatives for the grammar builder.
    expect(
      grammarSchema({
        kind: 'json_schema',
        schema: { type: ['object', 'null'], properties: { a: { type: 'number' } }, required: ['a'] },
      }),
    ).toEqual({
      oneOf: [{ type: 'object', properties: { a: { type: 'number' } }, additionalProperties: false }, { type: 'null' }],
    });
  });

  it('gives the grammar the same schema with $refs inlined, anyOf as oneOf and "any object" spelled out', () => {
    const g = grammarSchema({
      kind: 'json_schema',
      schema: {
        type: 'object',
        properties: { p: { $ref: '#/definitions/point' }, meta: { type: 'object' } },
        definitions: { point: { anyOf: [{ type: 'integer' }, { type: 'string' }] } },
      },
    });
    expect(g).toEqual({
      type: 'object',
      properties: {
        p: { oneOf: [{ type: 'integer' }, { type: 'string' }] },
        meta: { type: 'object', properties: {}, additionalProperties: true },
      },
      additionalProperties: false,
    });
    expect(grammarSchema({ kind: 'json_object' })).toEqual({ type: 'object', additionalProperties: true });
  });

  it('refuses with a 400 naming the field and every unsupported feature with where it is', () => {
    const msg = refused({
      type: 'object',
      properties: {
        code: { type: 'string', pattern: '^[A-Z]+$' },
        n: { type: 'number', minimum: 0, multipleOf: 2 },
        both: { allOf: [{ type: 'string' }] },
        neg: { not: { type: 'null' } },
        email: { type: 'string', format: 'email' },
      },
      patternProperties: { '^x-': { type: 'string' } },
      if: { required: ['code'] },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keyword, refused by the check
      then: { required: ['n'] },
    });
    expect(msg).toContain('response_format.json_schema.schema');
    for (const part of [
      '`pattern` at /properties/code',
      '`minimum` at /properties/n',
      '`multipleOf` at /properties/n',
      '`allOf` at /properties/both',
      '`not` at /properties/neg',
      '`format: "email"` at /properties/email',
      '`patternProperties` at /',
      '`if` at /',
      '`then` at /',
    ])
      expect(msg).toContain(part);
  });

  it('refuses recursive, external and dangling references, and a required property it cannot write', () => {
    expect(
      refused({
        type: 'object',
        properties: { child: { $ref: '#/$defs/node' } },
        $defs: { node: { type: 'object', properties: { next: { $ref: '#/$defs/node' } } } },
      }),
    ).toContain('a recursive `$ref`');
    expect(refused({ $ref: 'https://example.com/s.json' })).toContain('`$ref: "https://example.com/s.json"`');
    expect(refused({ $ref: '#/$defs/missing' })).toContain('`$ref: "#/$defs/missing"`');
    expect(refused({ type: 'object', properties: {}, required: ['x'] })).toContain(
      '`required` naming a property not in `properties`',
    );
    expect(refused('string', 'tools[0] parameters')).toBe('tools[0] parameters must be a JSON Schema object');
  });
});

describe('structuredOutputMessages', () => {
  const user: DecoderMessage = { role: 'user', parts: [{ text: 'hi' }] };
  it('tells the model to write JSON, with the schema, in the first system message', () => {
    const c = { kind: 'json_schema', schema: { type: 'object', properties: { a: { type: 'string' } } } } as const;
    const [sys, rest] = structuredOutputMessages([user], c);
    expect(sys!.role).toBe('system');
    expect(sys!.parts[0]!.text).toContain('{"type":"object","properties":{"a":{"type":"string"}}}');
    expect(rest).toBe(user);
    const system: DecoderMessage = { role: 'system', parts: [{ text: 'Be brief.', cache: { ttlSeconds: 300 } }] };
    const out = structuredOutputMessages([system, user], { kind: 'json_object' });
    expect(out).toHaveLength(2);
    // The caller's own part (and its cache marker) stays first: the instruction is a part of its own.
    expect(out[0]!.parts[0]).toBe(system.parts[0]);
    expect(out[0]!.parts[1]!.text).toContain('JSON object');
  });
});

const weather: ToolSpec = {
  name: 'get_weather',
  description: 'Weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
};
const time: ToolSpec = { name: 'get_time', parameters: { type: 'object', properties: {} } };
const ask: DecoderMessage[] = [{ role: 'user', parts: [{ text: 'Weather in Paris?' }] }];

/** Whether `value` is valid against the plan's constraint (zod's JSON Schema reader). */
const fits = (choice: ToolChoice, value: unknown): boolean => {
  const { constraint } = planToolUse(ask, [weather, time], choice, 'tools');
  if (constraint?.kind !== 'json_schema') throw new Error('no schema');
  return z.fromJSONSchema(constraint.schema as never).safeParse(value).success;
};

describe('planToolUse', () => {
  const call = { name: 'get_weather', arguments: { city: 'Paris' } };
  const other = { name: 'get_time', arguments: {} };
  const answer = { answer: 'Sunny.' };

  it('constrains the output to what each choice allows', () => {
    expect([fits({ type: 'auto' }, call), fits({ type: 'auto' }, other), fits({ type: 'auto' }, answer)]).toEqual([
      true,
      true,
      true,
    ]);
    expect([
      fits({ type: 'required' }, call),
      fits({ type: 'required' }, other),
      fits({ type: 'required' }, answer),
    ]).toEqual([true, true, false]);
    const named: ToolChoice = { type: 'tool', name: 'get_weather' };
    expect([fits(named, call), fits(named, other), fits(named, answer)]).toEqual([true, false, false]);
    expect(fits(named, { name: 'get_weather', arguments: { town: 'Paris' } })).toBe(false);
  });

  it('renders the tools into the system prompt, except for `none`, which offers none and constrains nothing', () => {
    const { messages } = planToolUse(ask, [weather, time], { type: 'auto' }, 'tools');
    const sys = messages[0]!.parts.map((p) => p.text).join('');
    expect(messages[0]!.role).toBe('system');
    expect(sys).toContain('- get_weather: Weather in a city');
    expect(sys).toContain(JSON.stringify(weather.parameters));
    expect(sys).toContain('{"answer":');
    expect(messages.slice(1)).toEqual(ask);
    expect(planToolUse(ask, [weather], { type: 'none' }, 'tools')).toEqual({ messages: ask });
  });

  it('refuses a choice naming no offered tool, unusable parameters and repeated names, naming the field', () => {
    expect(() => planToolUse(ask, [weather], { type: 'tool', name: 'nope' }, 'tools')).toThrow(
      "tool_choice names 'nope', which is not one of tools",
    );
    expect(() => planToolUse(ask, [], { type: 'required' }, 'tools')).toThrow('tools is empty');
    expect(() =>
      planToolUse(
        ask,
        [{ name: 'f', parameters: { type: 'object', properties: { x: { type: 'string', pattern: 'a' } } } }],
        { type: 'auto' },
        'tools',
      ),
    ).toThrow(
      'tools[0] (f) parameters uses JSON Schema features that constrained decoding cannot guarantee: `pattern` at /properties/x',
    );
    expect(() => planToolUse(ask, [{ name: 'f', parameters: { type: 'string' } }], { type: 'auto' }, 'tools')).toThrow(
      'must be an object schema',
    );
    expect(() => planToolUse(ask, [weather, weather], { type: 'auto' }, 'tools')).toThrow(
      "repeats the tool name 'get_weather'",
    );
  });
});

describe('readToolOutput', () => {
  let n = 0;
  const newId = () => `call_${++n}`;
  it('reads a call (arguments as JSON text, id from newId) or an answer', () => {
    n = 0;
    expect(
      readToolOutput('{"name": "get_weather", "arguments": {"city": "Paris"}}', [weather], { type: 'auto' }, newId),
    ).toEqual({
      text: null,
      calls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' }],
    });
    expect(readToolOutput('{"answer": "Sunny."}', [weather], { type: 'auto' }, newId)).toEqual({
      text: 'Sunny.',
      calls: [],
    });
  });

  it('returns anything else as text: free text, a cut-off call, an unknown tool, tool_choice none', () => {
    for (const text of ['It is sunny.', '{"name": "get_weather", "argu', '{"name": "other", "arguments": {}}', '[1]'])
      expect(readToolOutput(text, [weather], { type: 'required' }, newId)).toEqual({ text, calls: [] });
    const call = '{"name": "get_weather", "arguments": {}}';
    expect(readToolOutput(call, [weather], { type: 'none' }, newId)).toEqual({ text: call, calls: [] });
  });

  it('writes earlier calls back as the model writes them, and results as labelled text', () => {
    const calls = [{ id: 'c1', name: 'get_weather', arguments: '{"city":"Paris"}' }];
    expect(toolCallsText(calls)).toBe('{"name":"get_weather","arguments":{"city":"Paris"}}');
    // What is written back reads as a call again.
    expect(readToolOutput(toolCallsText(calls), [weather], { type: 'auto' }, () => 'c1').calls).toEqual(calls);
    expect(toolResultText({ id: 'c1', name: 'get_weather' }, '18°C')).toBe('Tool result (get_weather, call c1):\n18°C');
    expect(toolResultText({}, 'ok')).toBe('Tool result:\nok');
  });
});

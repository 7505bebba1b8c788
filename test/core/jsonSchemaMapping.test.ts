import { z } from 'zod';
import { SchemaBody, toEncoderSchema } from '../../src/core/extraction/api';
import { glinerToJsonObject, jsonSchemaToGliner } from '../../src/core/extraction/jsonSchemaMapping';
import { BadRequestError } from '../../src/core/errors';
import { buildPromptTasks } from '../../src/encoder/schema';

const F = 'response_format.json_schema.schema';

/** The mapping's schema, through the encoder API's own validation and into the engine's prompt tasks. */
function engineSchema(schema: unknown, name?: string) {
  const m = jsonSchemaToGliner(schema, F, name);
  const parsed = toEncoderSchema(SchemaBody.parse(m.schema));
  return { m, parsed, tasks: buildPromptTasks(parsed) };
}

function refusal(schema: unknown): string {
  try {
    jsonSchemaToGliner(schema, F);
  } catch (err) {
    expect(err).toBeInstanceOf(BadRequestError);
    return (err as Error).message;
  }
  throw new Error('expected a 400');
}

const span = (text: string) => ({ text, score: 0.9, start: 0, end: text.length });

describe('jsonSchemaToGliner', () => {
  it('maps strings, string arrays and enums onto one structure, descriptions kept', () => {
    const { m, parsed, tasks } = engineSchema({
      type: 'object',
      title: 'person',
      properties: {
        name: { type: ['string', 'null'], description: 'full name' },
        skills: { type: 'array', items: { type: 'string' } },
        seniority: { anyOf: [{ type: 'string', enum: ['junior', 'senior'] }, { type: 'null' }] },
      },
      required: ['name', 'skills', 'seniority'],
      additionalProperties: false,
    });
    expect(m.structure).toBe('person');
    expect(parsed.structures).toEqual([
      {
        name: 'person',
        fields: [
          { name: 'name', dtype: 'str', description: 'full name' },
          { name: 'skills', dtype: 'list' },
          { name: 'seniority', dtype: 'str', choices: ['junior', 'senior'] },
        ],
      },
    ]);
    expect(tasks.map((t) => [t.kind, t.name, t.fields])).toEqual([
      ['json_structures', 'person', ['name', 'skills', 'seniority']],
    ]);
    expect(m.properties).toEqual([
      { name: 'name', kind: 'str', required: true },
      { name: 'skills', kind: 'list', required: true },
      { name: 'seniority', kind: 'choice', required: true },
    ]);
  });

  it('reads zod v4 JSON schemas as the SDK helpers send them ($defs references, nullable, optional, enum without type)', () => {
    const Person = z
      .object({
        name: z.string().nullable().describe('the person'),
        city: z.string().optional(),
        tags: z.array(z.string()),
        kind: z.enum(['a', 'b']).nullable(),
        mood: z.enum(['x', 'y']).optional(),
      })
      .meta({ title: 'person' });
    const { m, parsed } = engineSchema(z.toJSONSchema(Person, { reused: 'ref' }));
    expect(parsed.structures[0]!.fields).toEqual([
      { name: 'name', dtype: 'str', description: 'the person' },
      { name: 'city', dtype: 'str' },
      { name: 'tags', dtype: 'list' },
      { name: 'kind', dtype: 'str', choices: ['a', 'b'] },
      { name: 'mood', dtype: 'str', choices: ['x', 'y'] },
    ]);
    expect(m.properties.map((p) => [p.name, p.required])).toEqual([
      ['name', true],
      ['city', false],
      ['tags', true],
      ['kind', true],
      ['mood', false],
    ]);
    // An enum with null among its values is nullable too (anthropic's transformJSONSchema drops `type`).
    expect(
      jsonSchemaToGliner({ type: 'object', properties: { k: { enum: ['a', null] } }, required: ['k'] }, F).properties,
    ).toEqual([{ name: 'k', kind: 'choice', required: true }]);
  });

  it('names the structure from the caller, else the title, else "extraction"', () => {
    const props = { properties: { a: { type: 'string' } } };
    expect(jsonSchemaToGliner({ type: 'object', title: 'T', ...props }, F, 'given').structure).toBe('given');
    expect(jsonSchemaToGliner({ type: 'object', title: 'T', ...props }, F).structure).toBe('T');
    expect(jsonSchemaToGliner({ type: 'object', ...props }, F).structure).toBe('extraction');
  });

  it('refuses a required, non-nullable string or enum, naming it', () => {
    const msg = refusal({
      type: 'object',
      properties: {
        name: { type: 'string' },
        kind: { enum: ['a', 'b'] },
        tags: { type: 'array', items: { type: 'string' } },
      },
      required: ['name', 'kind', 'tags'],
    });
    expect(msg).toContain(`${F}.properties.name: is required and not nullable`);
    expect(msg).toContain(`${F}.properties.kind: is required and not nullable`);
    expect(msg).not.toContain('properties.tags');
  });

  it('refuses nested objects, numbers, booleans, arrays of objects and arrays of enums, naming each and why', () => {
    const msg = refusal({
      type: 'object',
      properties: {
        address: { type: 'object', properties: { city: { type: 'string' } } },
        age: { type: ['integer', 'null'] },
        score: { type: 'number' },
        ok: { type: 'boolean' },
        people: { type: 'array', items: { type: 'object', properties: {} } },
        labels: { type: 'array', items: { enum: ['a', 'b'] } },
      },
    });
    expect(msg).toContain(`${F}.properties.address: a nested object is not supported`);
    expect(msg).toContain(`${F}.properties.age: type 'integer' is not supported`);
    expect(msg).toContain(`${F}.properties.score: type 'number' is not supported`);
    expect(msg).toContain(`${F}.properties.ok: type 'boolean' is not supported`);
    expect(msg).toContain(`${F}.properties.people.items: only arrays of strings are supported`);
    expect(msg).toContain(`${F}.properties.labels: an array of enum values is not supported`);
  });

  it('refuses what a span cannot promise, real unions, remote refs and a schema that is not an object', () => {
    expect(
      refusal({
        type: 'object',
        properties: {
          email: { type: 'string', format: 'email' },
          code: { type: 'string', pattern: '^[A-Z]+$' },
          nonEmpty: { type: 'string', minLength: 1 },
          long: { type: 'string', minLength: 5 },
          few: { type: 'array', items: { type: 'string' }, minItems: 2 },
          either: { anyOf: [{ type: 'string' }, { type: 'number' }] },
          remote: { $ref: 'https://example.com/s.json' },
        },
      }),
    ).toEqual(
      [
        `${F}.properties.email.format: not supported on an encoder (an extracted span cannot promise it)`,
        `${F}.properties.code.pattern: not supported on an encoder (an extracted span cannot promise it)`,
        `${F}.properties.long.minLength: not supported on an encoder (an extracted span cannot promise it)`,
        `${F}.properties.few.minItems: not supported on an encoder (an extracted span cannot promise it)`,
        `${F}.properties.either: a union is only supported as a nullable form (anyOf: [<schema>, {type: 'null'}])`,
        `${F}.properties.remote.$ref: only local references into $defs or definitions are supported`,
      ].join('; '),
    );
    expect(refusal({ type: 'array', items: { type: 'string' } })).toContain(
      `${F}.type: the encoder answers with an object`,
    );
    expect(refusal({ type: 'object', properties: {} })).toContain(`${F}.properties: give at least one property`);
    expect(refusal('nope')).toBe(`${F}: must be a JSON schema object`);
    expect(refusal({ type: 'object', properties: { k: { enum: ['a', 1] } } })).toContain(
      `${F}.properties.k.enum: the values must be non-empty strings`,
    );
    expect(refusal({ type: 'object', properties: { d: { type: 'string', description: 'x'.repeat(501) } } })).toContain(
      `${F}.properties.d.description: at most 500 characters`,
    );
  });
});

describe('glinerToJsonObject', () => {
  const schema = {
    type: 'object',
    properties: {
      name: { type: ['string', 'null'] },
      city: { type: 'string' },
      skills: { type: 'array', items: { type: 'string' } },
      seniority: { enum: ['junior', 'senior', null] },
    },
    required: ['name', 'skills', 'seniority'],
  };
  const m = jsonSchemaToGliner(schema, F, 'person');

  it('takes the first instance: span texts, list texts, the picked choice', () => {
    const result = {
      structures: {
        person: [
          {
            name: span('Ada'),
            city: span('London'),
            skills: [span('maths'), span('poetry')],
            seniority: { text: 'senior', score: 0.8 },
          },
          { name: span('Other'), city: null, skills: [], seniority: null },
        ],
      },
    };
    expect(glinerToJsonObject(result, m)).toEqual({
      name: 'Ada',
      city: 'London',
      skills: ['maths', 'poetry'],
      seniority: 'senior',
    });
  });

  it('writes a missing value as null when required (nullable), leaves it out when optional, [] for a list', () => {
    const none = { name: null, city: null, skills: [], seniority: null };
    expect(glinerToJsonObject({ structures: { person: [none] } }, m)).toEqual({
      name: null,
      skills: [],
      seniority: null,
    });
    expect(glinerToJsonObject({ structures: { person: [] } }, m)).toEqual({ name: null, skills: [], seniority: null });
    expect(glinerToJsonObject({}, m)).toEqual({ name: null, skills: [], seniority: null });
  });
});

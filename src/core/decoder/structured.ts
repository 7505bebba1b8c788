/**
 * Structured outputs: which JSON Schemas a constrained decoder can guarantee, and the prompt a small
 * model needs to write them. The grammar builder (node-llama-cpp's GBNF JSON schema, the llama.cpp
 * backend) expresses a subset of JSON Schema; a schema outside it is refused with a 400 naming every
 * unsupported feature, never silently loosened, so an output is always valid against what was sent.
 */
import { BadRequestError } from '../errors';
import { localRefTarget } from '../jsonSchemaRefs';
import type { DecoderMessage, JsonSchema, OutputConstraint } from './types';

/** Keywords that only describe: they change nothing the grammar must produce. */
const ANNOTATIONS = new Set([
  'title',
  'description',
  '$comment',
  'examples',
  'default',
  'deprecated',
  'readOnly',
  'writeOnly',
  '$schema',
  '$id',
]);
const PRIMITIVES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
/** The only string formats the grammar writes (node-llama-cpp GbnfJsonFormatStringSchema). */
const FORMATS = new Set(['date-time', 'date', 'time']);
/** What the grammar expresses, per kind of node (anything else is reported). */
const KEYWORDS: Record<string, Set<string>> = {
  object: new Set(['type', 'properties', 'required', 'additionalProperties', 'minProperties', 'maxProperties']),
  array: new Set(['type', 'items', 'prefixItems', 'minItems', 'maxItems']),
  string: new Set(['type', 'minLength', 'maxLength', 'format']),
  primitive: new Set(['type']),
};

type Node = Record<string, unknown>;

interface Walk {
  problems: string[];
  /** The schema `$ref`s resolve in (jsonSchemaRefs.ts). */
  root: Node;
  /** Definitions being converted, by `$ref` (a reference back to one is recursion), and those done. */
  visiting: Set<string>;
  converted: Record<string, Node>;
}

const isNode = (v: unknown): v is Node => typeof v === 'object' && v !== null && !Array.isArray(v);
const at = (path: string) => path || '/';

/** Any JSON value, as the grammar builder spells it (a bare `{}` would mean `null` to it). */
const ANY: Node = {
  oneOf: [
    { type: ['string', 'number', 'boolean', 'null'] },
    { type: 'object', additionalProperties: true },
    { type: 'array' },
  ],
};

function convert(schema: unknown, path: string, w: Walk): Node {
  if (schema === true) return ANY;
  if (!isNode(schema)) {
    w.problems.push(`${schema === false ? 'a false schema' : 'a schema that is not an object'} at ${at(path)}`);
    return ANY;
  }
  const keys = Object.keys(schema).filter((k) => !ANNOTATIONS.has(k) && k !== '$defs' && k !== 'definitions');
  const report = (allowed: Set<string>) => {
    for (const k of keys) if (!allowed.has(k)) w.problems.push(`\`${k}\` at ${at(path)}`);
  };
  if (typeof schema.$ref === 'string') {
    report(new Set(['$ref']));
    return convertRef(schema.$ref, path, w);
  }
  for (const combinator of ['anyOf', 'oneOf'] as const) {
    const alternatives = schema[combinator];
    if (alternatives === undefined) continue;
    if (!Array.isArray(alternatives) || alternatives.length === 0) {
      w.problems.push(`\`${combinator}\` that is not a non-empty list at ${at(path)}`);
      return ANY;
    }
    const siblings = keys.filter((k) => k !== combinator);
    if (siblings.length)
      w.problems.push(`\`${combinator}\` beside ${siblings.map((k) => `\`${k}\``).join(', ')} at ${at(path)}`);
    // anyOf becomes the grammar's one choice among alternatives: the output matches the one chosen.
    return { oneOf: alternatives.map((s, i) => convert(s, `${path}/${combinator}/${i}`, w)) };
  }
  if ('const' in schema || 'enum' in schema) {
    const literals = 'const' in schema ? [schema.const] : schema.enum;
    report(new Set([...('const' in schema ? ['const'] : ['enum']), 'type']));
    if (!Array.isArray(literals) || literals.length === 0) {
      w.problems.push(`\`enum\` that is not a non-empty list at ${at(path)}`);
      return ANY;
    }
    if (literals.some((v) => typeof v === 'object' && v !== null))
      w.problems.push(`an object or array in \`${'const' in schema ? 'const' : 'enum'}\` at ${at(path)}`);
    return 'const' in schema ? { const: schema.const } : { enum: literals };
  }
  const type = schema.type;
  if (type === undefined) {
    report(new Set());
    return ANY;
  }
  const types = Array.isArray(type) ? type : [type];
  if (types.length === 0 || types.some((t) => typeof t !== 'string')) {
    w.problems.push(`a \`type\` that is not a type name or a list of them at ${at(path)}`);
    return ANY;
  }
  if (types.length > 1) {
    if (types.every((t) => PRIMITIVES.has(t as string)) && keys.every((k) => k === 'type'))
      return { type: [...new Set(types)] };
    // ["object", "null"] and the like: one alternative per type, each with the keywords of its kind.
    const kinds = types.map((t) => KEYWORDS[t as string] ?? KEYWORDS.primitive!);
    report(new Set(kinds.flatMap((k) => [...k])));
    const only = (i: number) => Object.fromEntries(Object.entries(schema).filter(([k]) => kinds[i]!.has(k)));
    return { oneOf: types.map((t, i) => convert({ ...only(i), type: t }, path, w)) };
  }
  const t = types[0] as string;
  if (t === 'object') {
    report(KEYWORDS.object!);
    const properties = schema.properties === undefined ? {} : schema.properties;
    if (!isNode(properties)) {
      w.problems.push(`\`properties\` that is not an object at ${at(path)}`);
      return ANY;
    }
    const required = schema.required ?? [];
    if (!Array.isArray(required) || required.some((r) => typeof r !== 'string' || !(r in properties)))
      w.problems.push(`\`required\` naming a property not in \`properties\` at ${at(path)}`);
    const extra = schema.additionalProperties;
    const out: Node = {
      type: 'object',
      properties: Object.fromEntries(
        Object.entries(properties).map(([k, v]) => [k, convert(v, `${path}/properties/${k}`, w)]),
      ),
      // JSON Schema allows any other property by default; the grammar writes only the listed ones
      // (valid either way), except for an object with none listed, which means any object.
      additionalProperties:
        extra === undefined
          ? schema.properties === undefined
          : isNode(extra)
            ? convert(extra, `${path}/additionalProperties`, w)
            : extra,
    };
    if (typeof out.additionalProperties !== 'boolean' && !isNode(out.additionalProperties))
      w.problems.push(`\`additionalProperties\` that is not a boolean or a schema at ${at(path)}`);
    const count = Object.keys(properties).length;
    for (const k of ['minProperties', 'maxProperties'] as const) {
      if (schema[k] === undefined) continue;
      const n = schema[k];
      // Every listed property is always written, so bounds hold only as counts the grammar can meet.
      if (
        !Number.isInteger(n) ||
        (out.additionalProperties === false && (k === 'minProperties' ? (n as number) > count : (n as number) < count))
      )
        w.problems.push(`\`${k}\` the grammar cannot meet at ${at(path)}`);
      else out[k] = n;
    }
    return out;
  }
  if (t === 'array') {
    report(KEYWORDS.array!);
    const out: Node = { type: 'array' };
    if (schema.items !== undefined) {
      if (Array.isArray(schema.items)) w.problems.push(`\`items\` as a list (use \`prefixItems\`) at ${at(path)}`);
      else if (schema.items === false) out.maxItems = Array.isArray(schema.prefixItems) ? schema.prefixItems.length : 0;
      else out.items = convert(schema.items, `${path}/items`, w);
    }
    if (schema.prefixItems !== undefined) {
      if (!Array.isArray(schema.prefixItems)) w.problems.push(`\`prefixItems\` that is not a list at ${at(path)}`);
      else out.prefixItems = schema.prefixItems.map((s, i) => convert(s, `${path}/prefixItems/${i}`, w));
    }
    for (const k of ['minItems', 'maxItems'] as const) {
      if (schema[k] === undefined) continue;
      if (!Number.isInteger(schema[k]) || (schema[k] as number) < 0)
        w.problems.push(`\`${k}\` that is not a count at ${at(path)}`);
      else out[k] = Math.min(schema[k] as number, (out[k] as number | undefined) ?? Infinity);
    }
    return out;
  }
  if (t === 'string') {
    report(KEYWORDS.string!);
    if (schema.format !== undefined) {
      if (!FORMATS.has(schema.format as string))
        w.problems.push(`\`format: ${JSON.stringify(schema.format)}\` at ${at(path)}`);
      if (schema.minLength !== undefined || schema.maxLength !== undefined)
        w.problems.push(`\`format\` beside \`minLength\`/\`maxLength\` at ${at(path)}`);
      return { type: 'string', format: schema.format };
    }
    const out: Node = { type: 'string' };
    for (const k of ['minLength', 'maxLength'] as const) {
      if (schema[k] === undefined) continue;
      if (!Number.isInteger(schema[k]) || (schema[k] as number) < 0)
        w.problems.push(`\`${k}\` that is not a count at ${at(path)}`);
      else out[k] = schema[k];
    }
    return out;
  }
  if (PRIMITIVES.has(t)) {
    // zod's `.int()` (so openai's zodResponseFormat) bounds every integer by the safe-integer range:
    // accepted as the range of a JSON number a client can read, the grammar having no digit limit.
    const safe =
      (t === 'integer' || t === 'number') &&
      (schema.minimum === undefined || schema.minimum === -Number.MAX_SAFE_INTEGER) &&
      (schema.maximum === undefined || schema.maximum === Number.MAX_SAFE_INTEGER);
    report(safe ? new Set(['type', 'minimum', 'maximum']) : KEYWORDS.primitive!);
    return { type: t };
  }
  w.problems.push(`\`type: ${JSON.stringify(t)}\` at ${at(path)}`);
  return ANY;
}

function convertRef(ref: string, path: string, w: Walk): Node {
  const target = localRefTarget(w.root, ref);
  if (!target) {
    w.problems.push(`\`$ref: ${JSON.stringify(ref)}\` (only #/$defs/<name> of the root schema) at ${at(path)}`);
    return ANY;
  }
  if (w.visiting.has(ref)) {
    // A grammar is finite rules over a fixed nesting depth here: recursive types are refused.
    w.problems.push(`a recursive \`$ref\` to ${JSON.stringify(ref)} at ${at(path)}`);
    return ANY;
  }
  const done = w.converted[ref];
  if (done) return done;
  w.visiting.add(ref);
  const out = convert(target, ref.slice(1), w);
  w.visiting.delete(ref);
  w.converted[ref] = out;
  return out;
}

function walk(schema: unknown): { grammar: Node; problems: string[] } {
  const w: Walk = { problems: [], root: isNode(schema) ? schema : {}, visiting: new Set(), converted: {} };
  const grammar = convert(schema, '', w);
  return { grammar, problems: [...new Set(w.problems)] };
}

/**
 * Checks that a caller's schema is one the grammar can guarantee and returns it as sent (a backend
 * with its own structured outputs, vLLM, gets the original); otherwise a 400 naming `field` and
 * every unsupported keyword or feature with where it is.
 */
export function checkJsonSchema(schema: unknown, field: string): JsonSchema {
  if (!isNode(schema)) throw new BadRequestError(`${field} must be a JSON Schema object`, { param: field });
  const { problems } = walk(schema);
  if (problems.length) {
    throw new BadRequestError(
      `${field} uses JSON Schema features that constrained decoding cannot guarantee: ${problems.join('; ')}`,
      { param: field },
    );
  }
  return schema;
}

/**
 * The schema in the form node-llama-cpp's grammar builder reads (anyOf as oneOf, nullable unions as
 * alternatives, `$ref`s inlined, "any object" spelled out). Only for a schema `checkJsonSchema` accepted.
 */
export function grammarSchema(constraint: OutputConstraint): JsonSchema {
  if (constraint.kind === 'json_object') return { type: 'object', additionalProperties: true };
  return walk(constraint.schema).grammar;
}

/**
 * The prompt with an instruction to write JSON (and the schema), so a small model knows what the
 * grammar will hold it to: appended to the first system message, or a new one before the rest.
 */
export function structuredOutputMessages(messages: DecoderMessage[], constraint: OutputConstraint): DecoderMessage[] {
  const text =
    constraint.kind === 'json_object'
      ? 'Reply with a single JSON object and nothing else.'
      : `Reply with a single JSON value and nothing else, valid against this JSON Schema:\n${JSON.stringify(constraint.schema)}`;
  return withSystemText(messages, text);
}

/** Adds `text` to the first system message (its own part, after a blank line: parts join with a newline), or as a system message of its own first. */
export function withSystemText(messages: DecoderMessage[], text: string): DecoderMessage[] {
  const [first, ...rest] = messages;
  if (first?.role === 'system') return [{ role: 'system', parts: [...first.parts, { text: `\n${text}` }] }, ...rest];
  return [{ role: 'system', parts: [{ text }] }, ...messages];
}

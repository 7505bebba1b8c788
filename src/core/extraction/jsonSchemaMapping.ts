/**
 * A JSON schema on an encoder (structured outputs, issue #28): a flat object of strings, string
 * arrays and string enums is one GLiNER2 structure (str / list / choices fields), so a standard SDK
 * asking for JSON gets extraction with no code change. An extractor cannot promise a value, so a
 * string or enum property must be optional or nullable; what it did not find comes back as `null`
 * (nullable) or absent (optional), and a list as `[]` (an empty list is always a valid answer).
 * Everything else (nested objects, numbers, booleans, arrays of objects, string constraints the
 * span cannot promise) is a 400 naming the property and why.
 */
import { BadRequestError } from '../errors';
import { localRefTarget } from '../jsonSchemaRefs';
import { ENCODER_LIMITS, type SchemaInput } from './api';

export interface MappedProperty {
  name: string;
  kind: 'str' | 'list' | 'choice';
  /** In the schema's `required`: a missing value must still be written (as `null`, or `[]` for a list). */
  required: boolean;
}

export interface GlinerMapping {
  /** The extraction schema (docs/reference/decisions.md#schema-object): one structure. */
  schema: SchemaInput;
  /** The structure's name (the schema's `title`, the caller's name, or `extraction`). */
  structure: string;
  properties: MappedProperty[];
}

/** Annotations that constrain nothing the encoder could violate. */
const ANNOTATIONS = new Set(['description', 'title', 'default', 'examples', '$comment', 'deprecated', 'readOnly']);
const ROOT_KEYWORDS = new Set([
  ...ANNOTATIONS,
  '$schema',
  '$id',
  '$defs',
  'definitions',
  'type',
  'properties',
  'required',
  'additionalProperties',
]);

type Schema = Record<string, unknown>;
const isObject = (v: unknown): v is Schema => typeof v === 'object' && v !== null && !Array.isArray(v);

/** What one property's schema is, once its nullable wrapper (`type: [t, "null"]`, `anyOf: [s, {type: null}]`, `enum: [..., null]`) is taken off. */
interface Shape {
  nullable: boolean;
  type?: unknown;
  enum?: unknown[];
  items?: unknown;
  description?: string;
}

export function jsonSchemaToGliner(schema: unknown, field: string, name?: string): GlinerMapping {
  const problems: string[] = [];
  const root = isObject(schema) ? schema : undefined;
  if (!root) throw new BadRequestError(`${field}: must be a JSON schema object`);
  const resolve = refResolver(root, problems);
  const type = root.type;
  if (type !== undefined && type !== 'object')
    problems.push(`${field}.type: the encoder answers with an object; the schema must be of type 'object'`);
  for (const k of Object.keys(root))
    if (!ROOT_KEYWORDS.has(k)) problems.push(`${field}.${k}: not supported on an encoder`);
  const props = root.properties;
  if (!isObject(props) || Object.keys(props).length === 0)
    problems.push(`${field}.properties: give at least one property for the encoder to extract`);
  const required = new Set(Array.isArray(root.required) ? root.required.filter((r) => typeof r === 'string') : []);
  const structure = pickName(name, root.title);
  const fields: NonNullable<SchemaInput['structures']>[string]['fields'] = [];
  const properties: MappedProperty[] = [];
  for (const [prop, raw] of Object.entries(isObject(props) ? props : {})) {
    const at = `${field}.properties.${prop}`;
    const before = problems.length;
    if (prop.length === 0 || prop.length > ENCODER_LIMITS.maxLabelChars)
      problems.push(`${at}: a property name must have 1 to ${ENCODER_LIMITS.maxLabelChars} characters`);
    const shape = unwrap(resolve(raw, at), resolve, at, problems);
    if (!shape) continue;
    const description = shape.description;
    if (description !== undefined && description.length > ENCODER_LIMITS.maxDescriptionChars)
      problems.push(`${at}.description: at most ${ENCODER_LIMITS.maxDescriptionChars} characters`);
    let kind: MappedProperty['kind'] | undefined;
    let choices: string[] | undefined;
    if (shape.enum) {
      choices = enumChoices(shape.enum, at, problems);
      if (shape.type !== undefined && shape.type !== 'string')
        problems.push(`${at}: an enum must be of strings, not of type '${String(shape.type)}'`);
      kind = 'choice';
    } else if (shape.type === 'string') kind = 'str';
    else if (shape.type === 'array') {
      const item = unwrap(resolve(shape.items, `${at}.items`), resolve, `${at}.items`, problems);
      if (item?.nullable) problems.push(`${at}.items: list items cannot be null`);
      if (item?.enum)
        problems.push(
          `${at}: an array of enum values is not supported (a GLiNER2 choices field picks one value); use a single enum`,
        );
      else if (item && item.type !== 'string')
        problems.push(
          `${at}.items: only arrays of strings are supported (an encoder extracts text spans), not ${describeType(item.type)}`,
        );
      kind = 'list';
    } else
      problems.push(
        `${at}: ${describeType(shape.type)} is not supported on an encoder (it extracts text: strings, arrays of strings and string enums)`,
      );
    if (kind && kind !== 'list' && required.has(prop) && !shape.nullable)
      problems.push(
        `${at}: is required and not nullable, but an extractor cannot promise a value; make it optional or nullable`,
      );
    if (problems.length > before || !kind) continue;
    fields.push({
      name: prop,
      dtype: kind === 'list' ? 'list' : 'str',
      ...(choices ? { choices } : {}),
      ...(description ? { description } : {}),
    });
    properties.push({ name: prop, kind, required: required.has(prop) });
  }
  if (fields.length > ENCODER_LIMITS.maxLabels)
    problems.push(`${field}.properties: at most ${ENCODER_LIMITS.maxLabels} properties on an encoder`);
  if (problems.length) throw new BadRequestError(problems.join('; '));
  return { schema: { structures: { [structure]: { fields } } }, structure, properties };
}

/**
 * An extraction's formatted `result` (runExtraction) → the object for the caller's schema: the first
 * instance of the structure (gliner2's best), span texts for strings, texts for lists, the picked choice.
 */
export function glinerToJsonObject(result: unknown, mapping: GlinerMapping): Record<string, unknown> {
  const structures = isObject(result) && isObject(result.structures) ? result.structures : {};
  const instances = structures[mapping.structure];
  const first = Array.isArray(instances) && isObject(instances[0]) ? instances[0] : {};
  const out: Record<string, unknown> = {};
  for (const p of mapping.properties) {
    const v = first[p.name];
    if (p.kind === 'list') {
      out[p.name] = Array.isArray(v) ? v.map(textOf).filter((t): t is string => t !== null) : [];
      continue;
    }
    const text = textOf(Array.isArray(v) ? v[0] : v);
    if (text !== null) out[p.name] = text;
    else if (p.required) out[p.name] = null;
  }
  return out;
}

const textOf = (v: unknown): string | null => (isObject(v) && typeof v.text === 'string' ? v.text : null);

function pickName(name: string | undefined, title: unknown): string {
  const n = name?.trim() || (typeof title === 'string' ? title.trim() : '') || 'extraction';
  return [...n].slice(0, ENCODER_LIMITS.maxLabelChars).join('');
}

function describeType(t: unknown): string {
  if (t === 'object') return 'a nested object';
  if (t === undefined) return 'a schema without a type';
  return `type '${Array.isArray(t) ? t.join('|') : String(t)}'`;
}

function enumChoices(values: unknown[], at: string, problems: string[]): string[] | undefined {
  const strings = values.filter((v) => v !== null);
  if (
    !strings.every(
      (v): v is string => typeof v === 'string' && v.length > 0 && v.length <= ENCODER_LIMITS.maxLabelChars,
    )
  ) {
    problems.push(
      `${at}.enum: the values must be non-empty strings of at most ${ENCODER_LIMITS.maxLabelChars} characters`,
    );
    return undefined;
  }
  if (strings.length === 0) problems.push(`${at}.enum: give at least one value`);
  if (new Set(strings).size !== strings.length) problems.push(`${at}.enum: values must be distinct`);
  return strings;
}

/** Local `$ref`s (`#/$defs/x`, `#/definitions/x`), as zod's toJSONSchema writes them; nothing remote (`false`: refused). */
function refResolver(root: Schema, problems: string[]): (s: unknown, at: string) => unknown {
  return (s, at) => {
    let cur = s;
    for (let hops = 0; isObject(cur) && typeof cur.$ref === 'string'; hops++) {
      const target = localRefTarget(root, cur.$ref);
      if (!target || hops > 16) {
        problems.push(`${at}.$ref: only local references into $defs or definitions are supported`);
        return false;
      }
      const { $ref: _, ...siblings } = cur;
      cur = { ...target, ...siblings };
    }
    return cur;
  };
}

/** Takes the nullable wrapper off; reports a keyword the encoder cannot honour. */
function unwrap(
  raw: unknown,
  resolve: (s: unknown, at: string) => unknown,
  at: string,
  problems: string[],
): Shape | undefined {
  if (raw === false) return undefined;
  if (!isObject(raw)) {
    problems.push(`${at}: must be a schema object`);
    return undefined;
  }
  const description = typeof raw.description === 'string' ? raw.description : undefined;
  const variants = Array.isArray(raw.anyOf) ? raw.anyOf : Array.isArray(raw.oneOf) ? raw.oneOf : undefined;
  if (variants) {
    const resolved = variants.map((v, i) => resolve(v, `${at}.anyOf.${i}`));
    const nonNull = resolved.filter((v) => !(isObject(v) && v.type === 'null'));
    if (nonNull.length !== 1 || resolved.length - nonNull.length > 1) {
      problems.push(`${at}: a union is only supported as a nullable form (anyOf: [<schema>, {type: 'null'}])`);
      return undefined;
    }
    const inner = unwrap(nonNull[0], resolve, at, problems);
    const rest = Object.keys(raw).filter((k) => k !== 'anyOf' && k !== 'oneOf' && !ANNOTATIONS.has(k));
    for (const k of rest) problems.push(`${at}.${k}: not supported on an encoder`);
    return (
      inner && {
        ...inner,
        nullable: inner.nullable || nonNull.length < resolved.length,
        description: description ?? inner.description,
      }
    );
  }
  let type = raw.type;
  let nullable = false;
  if (Array.isArray(type)) {
    const nonNull = type.filter((t) => t !== 'null');
    nullable = nonNull.length < type.length;
    type = nonNull.length === 1 ? nonNull[0] : nonNull;
  }
  if (type === 'null') type = undefined;
  let values: unknown[] | undefined;
  if (Array.isArray(raw.enum)) {
    values = raw.enum;
    if (values.includes(null)) nullable = true;
  }
  const allowed = new Set([...ANNOTATIONS, 'type', 'enum', ...(type === 'array' ? ['items'] : [])]);
  const keywords = Object.keys(raw).filter((k) => !allowed.has(k));
  // `minItems: 0` promises nothing, nor `minLength` up to 1 (a span is never empty); a nested object is refused as such.
  const promised = (k: string) =>
    (k === 'minItems' && raw.minItems === 0) ||
    (k === 'minLength' && typeof raw.minLength === 'number' && raw.minLength <= 1);
  for (const k of keywords)
    if (!promised(k) && type !== 'object')
      problems.push(`${at}.${k}: not supported on an encoder (an extracted span cannot promise it)`);
  return {
    nullable,
    type,
    ...(values ? { enum: values } : {}),
    ...(type === 'array' ? { items: raw.items } : {}),
    ...(description !== undefined ? { description } : {}),
  };
}

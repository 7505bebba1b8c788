/**
 * `POST /gliner-2`: the wire contract of the `gliner2` package's own API client (`GLiNER2.from_api`,
 * gliner2/api_client.py) and the library's own output format (`GLiNER2.extract*` with `format_results`,
 * `include_confidence`, `include_spans`; gliner2/inference/runtime.py), over the same engine call as every
 * other extraction route (api.ts runExtraction). docs/reference/decisions.md#gliner2-client.
 */
import { z } from 'zod';
import type { Services } from '../context';
import { ValidationError } from '../errors';
import { getTeam } from '../teams';
import { ENCODER_LIMITS, toEncoderSchema, type SchemaInput } from './api';
import type { EncoderResult, EncoderSchema, FieldValue, LabelScore, Span } from './types';

const name = z.string().min(1).max(ENCODER_LIMITS.maxLabelChars);
const description = z.string().max(ENCODER_LIMITS.maxDescriptionChars);
const threshold = z.number().min(0).max(1);
/** The client sends None for what a builder left unset. */
const nullish = <T extends z.ZodType>(t: T) => t.nullish();

/** Entity types, relation types or labels as the library takes them: names, or name → description / config. */
const LabelSet = z.union([
  name.transform((n) => [n]),
  z.array(name).min(1),
  z.record(
    name,
    z.union([
      description,
      z.looseObject({
        description: nullish(description),
        threshold: nullish(threshold),
        dtype: nullish(z.enum(['str', 'list'])),
      }),
    ]),
  ),
]);
/** A structure field: the library's `"name::dtype::[a|b]::description"` string, or the builder's dict. */
const FieldSpecIn = z.union([
  z.string().min(1),
  z.looseObject({
    name,
    dtype: nullish(z.enum(['str', 'list'])),
    choices: nullish(z.array(name).min(1)),
    description: nullish(description),
    threshold: nullish(threshold),
  }),
]);
const Structures = z.record(name, z.array(FieldSpecIn).min(1));
const ClassificationTask = z.union([
  z.array(name).min(1),
  z.record(name, description),
  z.looseObject({
    labels: z.union([z.array(name).min(1), z.record(name, description)]),
    multi_label: nullish(z.boolean()),
    cls_threshold: nullish(threshold),
    top_k: nullish(z.number().int().min(1)),
  }),
]);
/** The `schema` task: what the client's SchemaAPI.build() sends. */
const FullSchema = z.looseObject({
  entities: LabelSet.optional(),
  entity_dtype: z.enum(['str', 'list']).optional(),
  entity_threshold: nullish(threshold),
  classifications: z.record(name, ClassificationTask).optional(),
  structures: Structures.optional(),
  relations: LabelSet.optional(),
  relation_threshold: nullish(threshold),
});

export const GLINER2_TASKS = ['extract_entities', 'classify_text', 'extract_json', 'schema'] as const;
export type Gliner2Task = (typeof GLINER2_TASKS)[number];

export const Gliner2ClientBody = z.strictObject({
  task: z.enum(GLINER2_TASKS),
  text: z.union([z.string(), z.array(z.string()).min(1)]),
  schema: z
    .unknown()
    .describe(
      'By task: extract_entities, a list of entity types; classify_text, {categories: [labels]}; extract_json, {structure: ["field::dtype::description", …]}; schema, what the client\'s create_schema() builds ({entities, entity_dtype, classifications, structures, relations, …})',
    ),
  threshold: threshold.default(0.5),
  include_confidence: z.boolean().default(false),
  include_spans: z.boolean().default(false),
  format_results: z.boolean().default(true),
  model: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The encoder to run; the gliner2 client sends none: then the team's default_encoder, else the operator's SIFT_DEFAULT_ENCODER",
    ),
  store: z.boolean().optional(),
});
export type Gliner2ClientInput = z.output<typeof Gliner2ClientBody>;

/** What the library's formatter needs beyond the engine schema. */
export interface LibraryShape {
  /** Entity types of dtype `str`: one value (or null) instead of a list. */
  scalarEntities: Set<string>;
  /** `classify_text`'s one task: answered as `{classification: …}`, which the client renames to the caller's task. */
  classifyTask?: string;
}

/** `"name::str::[a|b]::description"` as gliner2's `_parse_field_spec` reads it. */
function parseFieldSpec(spec: z.output<typeof FieldSpecIn>) {
  if (typeof spec !== 'string')
    return {
      name: spec.name,
      dtype: spec.dtype ?? undefined,
      choices: spec.choices ?? undefined,
      description: spec.description ?? undefined,
      threshold: spec.threshold ?? undefined,
    };
  const [fieldName, ...parts] = spec.split('::');
  let dtype: 'str' | 'list' | undefined;
  let choices: string[] | undefined;
  let desc: string | undefined;
  for (const part of parts) {
    if (part === 'str' || part === 'list') dtype = part;
    else if (part.startsWith('[') && part.endsWith(']'))
      choices = part
        .slice(1, -1)
        .split('|')
        .map((c) => c.trim());
    else desc = part;
  }
  return { name: fieldName!, dtype: dtype ?? (choices ? 'str' : 'list'), choices, description: desc };
}

const drop = <T extends Record<string, unknown>>(o: T) =>
  Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== '' && v !== null)) as Partial<T>;

interface LabelEntry {
  name: string;
  description?: string | undefined;
  threshold?: number | undefined;
  dtype?: 'str' | 'list' | undefined;
}
function labelEntries(set: z.output<typeof LabelSet>, defaultThreshold: number | null | undefined): LabelEntry[] {
  if (Array.isArray(set)) return set.map((n) => ({ name: n, threshold: defaultThreshold ?? undefined }));
  return Object.entries(set).map(([n, v]) =>
    typeof v === 'string'
      ? { name: n, description: v, threshold: defaultThreshold ?? undefined }
      : {
          name: n,
          description: v.description ?? undefined,
          threshold: v.threshold ?? defaultThreshold ?? undefined,
          dtype: v.dtype ?? undefined,
        },
  );
}

function parseWire<T extends z.ZodType>(type: T, value: unknown): z.output<T> {
  const r = type.safeParse(value);
  if (r.success) return r.data;
  throw new ValidationError(
    r.error.issues.map((i) => ({
      loc: ['body', 'schema', ...i.path.map((p) => (typeof p === 'symbol' ? String(p) : p))],
      msg: i.message,
      type: 'value_error',
    })),
  );
}

/** The client's task + schema → the engine schema (through the one API-schema check, toEncoderSchema) and the output shape. */
export function clientSchema(task: Gliner2Task, schema: unknown): { schema: EncoderSchema; shape: LibraryShape } {
  const shape: LibraryShape = { scalarEntities: new Set() };
  let full: Partial<z.output<typeof FullSchema>>;
  if (task === 'extract_entities') full = { entities: parseWire(LabelSet, schema) };
  else if (task === 'extract_json') full = { structures: parseWire(Structures, schema) };
  else if (task === 'classify_text') {
    const { categories } = parseWire(z.looseObject({ categories: ClassificationTask }), schema);
    shape.classifyTask = 'classification';
    full = { classifications: { classification: categories } };
  } else full = parseWire(FullSchema, schema);

  const api: SchemaInput = {};
  if (full.entities !== undefined) {
    const entries = labelEntries(full.entities, full.entity_threshold);
    for (const e of entries) if ((e.dtype ?? full.entity_dtype) === 'str') shape.scalarEntities.add(e.name);
    api.entities = Object.fromEntries(entries.map((e) => [e.name, e.description ?? '']));
  }
  if (full.classifications)
    api.classifications = Object.entries(full.classifications).map(([task, c]) => {
      const cfg = Array.isArray(c) || !('labels' in c) ? { labels: c } : c;
      const labels = Array.isArray(cfg.labels) ? cfg.labels : Object.keys(cfg.labels as Record<string, string>);
      // the library's cls_threshold defaults to 0.5 whatever the call's threshold
      return drop({
        task,
        labels,
        multi_label: 'multi_label' in cfg ? (cfg.multi_label ?? undefined) : undefined,
        top_k: 'top_k' in cfg ? (cfg.top_k ?? undefined) : undefined,
        threshold: ('cls_threshold' in cfg ? cfg.cls_threshold : undefined) ?? 0.5,
      }) as NonNullable<SchemaInput['classifications']>[number];
    });
  if (full.structures)
    api.structures = Object.fromEntries(
      Object.entries(full.structures).map(([s, fields]) => [
        s,
        { fields: fields.map((f) => drop({ ...parseFieldSpec(f) }) as { name: string }) },
      ]),
    );
  if (full.relations !== undefined)
    api.relations = labelEntries(full.relations, full.relation_threshold).map((r) =>
      drop({ name: r.name, description: r.description, threshold: r.threshold }),
    ) as NonNullable<SchemaInput['relations']>;
  const encoder = toEncoderSchema(api, ['body', 'schema'], { listChoices: true });
  // per-entity thresholds (a config dict, or entity_threshold) reach the engine through EntitySpec
  const entityThresholds = new Map(
    full.entities === undefined
      ? []
      : labelEntries(full.entities, full.entity_threshold).map((e) => [e.name, e.threshold]),
  );
  encoder.entities = encoder.entities.map((e) => {
    const t = entityThresholds.get(e.name);
    return t === undefined ? e : { ...e, threshold: t };
  });
  return { schema: encoder, shape };
}

export interface LibraryFormat {
  includeConfidence: boolean;
  includeSpans: boolean;
  formatResults: boolean;
}

/**
 * One text's engine result in the library's own output (gliner2 `format_results` when `formatResults`, its raw
 * per-task results otherwise). Where its count head predicted no entity, the library answers an empty map (formatted)
 * or list (raw), and so does this.
 */
export function libraryResult(
  r: EncoderResult,
  schema: EncoderSchema,
  shape: LibraryShape,
  f: LibraryFormat,
): Record<string, unknown> {
  const item = (s: Span) => {
    if (!f.includeConfidence && !f.includeSpans) return s.text;
    return {
      text: s.text,
      ...(f.includeConfidence ? { confidence: s.score } : {}),
      ...(f.includeSpans ? { start: s.start, end: s.end } : {}),
    };
  };
  const value = (v: FieldValue): unknown => {
    if (v === null) return null;
    if (Array.isArray(v)) return v.map((x) => value(x));
    if ('start' in v) return item(v);
    return f.includeConfidence ? { text: v.text, confidence: v.score } : v.text;
  };
  const out: Record<string, unknown> = {};
  if (schema.entities.length) {
    const ents = r.entities ?? {};
    const found = Object.keys(ents).length > 0;
    const byLabel = Object.fromEntries(
      schema.entities.map((e) => {
        const spans = ents[e.name] ?? [];
        return [e.name, shape.scalarEntities.has(e.name) ? (spans[0] ? item(spans[0]) : null) : spans.map(item)];
      }),
    );
    out.entities = f.formatResults ? (found ? byLabel : {}) : found ? [byLabel] : [];
  }
  const labelOrder = (c: EncoderSchema['classifications'][number], xs: LabelScore[]) =>
    c.topK === undefined ? [...xs].sort((a, b) => c.labels.indexOf(a.label) - c.labels.indexOf(b.label)) : xs;
  for (const c of schema.classifications) {
    const chosen = labelOrder(c, r.classifications[c.task] ?? []);
    const key = shape.classifyTask ?? c.task;
    if (!f.formatResults)
      out[key] = c.multiLabel ? chosen.map((x) => [x.label, x.score]) : [chosen[0]?.label, chosen[0]?.score];
    else {
      const one = (x: LabelScore) => (f.includeConfidence ? { label: x.label, confidence: x.score } : x.label);
      out[key] = c.multiLabel ? chosen.map(one) : chosen[0] ? one(chosen[0]) : null;
    }
  }
  // the library answers {} where its count head predicted no instance and [] where instances were all empty;
  // the engine returns no instance either way, answered as []
  for (const s of schema.structures)
    out[s.name] = (r.structures[s.name] ?? []).map((inst) =>
      Object.fromEntries(s.fields.map((fl) => [fl.name, value(inst[fl.name] ?? (fl.dtype === 'list' ? [] : null))])),
    );
  if (schema.relations.length) {
    const rel = (x: { head: Span; tail: Span }) =>
      !f.includeConfidence && !f.includeSpans ? [x.head.text, x.tail.text] : { head: item(x.head), tail: item(x.tail) };
    const relations = Object.fromEntries(
      schema.relations.map((rs) => [rs.name, (r.relations[rs.name] ?? []).map(rel)]),
    );
    if (f.formatResults) out.relation_extraction = relations;
    else Object.assign(out, relations);
  }
  return out;
}

/** Which encoder answers (docs/reference/decisions.md#gliner2-client): the request's `model`, the team's default, the operator's. */
export async function clientModel(svc: Services, teamId: string, requested: string | undefined): Promise<string> {
  if (requested !== undefined) return requested;
  return (await getTeam(svc, teamId)).default_encoder ?? svc.config.defaultEncoder;
}

/**
 * The extraction schema (docs/reference/decisions.md#schema-object) normalized for the engine, and its serialization
 * into gliner2 prompt pre-tokens (gliner2 2.1.0 `processor.py` `_infer_from_json`,
 * `_transform_schema`, `_build_classification_prefix`).
 */

import type {
  ClassificationSpec,
  EncoderSchema,
  EntitySpec,
  RelationSpec,
  StructureSpec,
} from '../core/extraction/types';

// The schema's types are the core's (what it sends an engine); the prompt serialization is the engine's.
export type {
  ClassificationSpec,
  Dtype,
  EncoderSchema,
  EntitySpec,
  FieldSpec,
  RelationSpec,
  StructureSpec,
} from '../core/extraction/types';

export const SPECIAL = {
  SEP_STRUCT: '[SEP_STRUCT]',
  SEP_TEXT: '[SEP_TEXT]',
  P: '[P]',
  C: '[C]',
  E: '[E]',
  R: '[R]',
  L: '[L]',
  DESCRIPTION: '[DESCRIPTION]',
} as const;

export type TaskKind = 'json_structures' | 'entities' | 'relations' | 'classifications';

export interface PromptTask {
  kind: TaskKind;
  /** Structure / relation name, "entities", or the classification task. */
  name: string;
  /** Pre-tokens: ( [P] prompt ( X f1 X f2 … ) ) */
  tokens: string[];
  /** Field / label names in marker order. */
  fields: string[];
  structure?: StructureSpec;
  entities?: EntitySpec[];
  classification?: ClassificationSpec;
  relation?: RelationSpec;
}

function transformSchema(
  parent: string,
  fields: string[],
  marker: string,
  prompt: string | undefined,
  descriptions: Array<[string, string]>,
): string[] {
  let promptStr = prompt ? `${parent}: ${prompt}` : parent;
  for (const [label, desc] of descriptions)
    if (fields.includes(label)) promptStr += ` ${SPECIAL.DESCRIPTION} ${label}: ${desc}`;
  const tokens = ['(', SPECIAL.P, promptStr, '('];
  for (const f of fields) tokens.push(marker, f);
  tokens.push(')', ')');
  return tokens;
}

/** Schemas in gliner2's inference order: structures, entities, relations, classifications. */
export function buildPromptTasks(schema: EncoderSchema): PromptTask[] {
  const tasks: PromptTask[] = [];
  for (const s of schema.structures) {
    const fields = s.fields.map((f) => f.name);
    if (!fields.length) continue;
    const descs = s.fields.filter((f) => f.description).map((f): [string, string] => [f.name, f.description!]);
    tasks.push({
      kind: 'json_structures',
      name: s.name,
      tokens: transformSchema(s.name, fields, SPECIAL.C, undefined, descs),
      fields,
      structure: s,
    });
  }
  if (schema.entities.length) {
    const fields = schema.entities.map((e) => e.name);
    const descs = schema.entities.filter((e) => e.description).map((e): [string, string] => [e.name, e.description!]);
    tasks.push({
      kind: 'entities',
      name: 'entities',
      tokens: transformSchema('entities', fields, SPECIAL.E, undefined, descs),
      fields,
      entities: schema.entities,
    });
  }
  for (const r of schema.relations) {
    const fields = ['head', 'tail'];
    tasks.push({
      kind: 'relations',
      name: r.name,
      tokens: transformSchema(r.name, fields, SPECIAL.R, r.description || undefined, []),
      fields,
      relation: r,
    });
  }
  for (const c of schema.classifications) {
    const descs = Object.entries(c.labelDescriptions ?? {});
    tasks.push({
      kind: 'classifications',
      name: c.task,
      tokens: transformSchema(c.task, c.labels, SPECIAL.L, c.prompt, descs),
      fields: c.labels,
      classification: c,
    });
  }
  return tasks;
}

/** Choice-field prefix placed before the text words (`_build_classification_prefix`, inference order). */
export function buildChoicePrefix(schema: EncoderSchema): string[] {
  const prefix: string[] = [];
  for (const s of schema.structures) {
    const inner: string[] = [];
    for (const f of s.fields) {
      if (!f.choices?.length) continue;
      const choiceTokens: string[] = [];
      f.choices.forEach((c, i) => {
        if (i > 0) choiceTokens.push('|');
        choiceTokens.push(c);
      });
      inner.push(f.name, '(', ...choiceTokens, ')', ',');
    }
    if (inner.length) {
      inner.pop();
      prefix.push('(', `${s.name}:`, ...inner, ')');
    }
  }
  return prefix;
}

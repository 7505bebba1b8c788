/**
 * Label groups ("Large label sets" in docs/reference/encoder.md): a schema whose prompt cannot share the encoder
 * with a text is split into groups of entity types / labels / whole structures and relations that fit;
 * each group runs as its own schema and the per-text results are merged.
 */
import { decodeClassification } from './classification';
import { SPECIAL, type ClassificationSpec, type EncoderSchema } from './schema';
import type { PromptTokens } from './tokenize';
import { EncoderInputError, type EncoderResult, type RawLabelScore } from './types';

/** The smallest parts a schema is split into: one entity type / classification label, or a whole structure / relation. */
type Unit =
  | { kind: 'structure'; name: string }
  | { kind: 'entity'; name: string }
  | { kind: 'relation'; name: string }
  | { kind: 'label'; task: number; label: string };

/**
 * Splits a schema into groups whose prompt is at most `budget` tokens, greedily in prompt order.
 * Entity types and classification labels are split one by one; a structure (its fields share the
 * count head and instance slots) and a relation stay whole. A part longer than `budget` runs alone;
 * one that cannot fit the encoder even without text is an `EncoderInputError`.
 */
export async function planLabelGroups(
  tok: PromptTokens,
  schema: EncoderSchema,
  budget: number,
  maxPos: number,
): Promise<EncoderSchema[]> {
  const units: Unit[] = [
    ...schema.structures.filter((s) => s.fields.length).map((s): Unit => ({ kind: 'structure', name: s.name })),
    ...schema.entities.map((e): Unit => ({ kind: 'entity', name: e.name })),
    ...schema.relations.map((r): Unit => ({ kind: 'relation', name: r.name })),
    ...schema.classifications.flatMap((c, task) => c.labels.map((label): Unit => ({ kind: 'label', task, label }))),
  ];
  // additive estimate (exact for WordPiece: the prompt string's pieces are split at spaces anyway)
  const pieces = new Set<string>([
    SPECIAL.SEP_STRUCT,
    SPECIAL.SEP_TEXT,
    SPECIAL.P,
    SPECIAL.E,
    SPECIAL.L,
    '(',
    ')',
    'entities',
  ]);
  const descOf = (label: string, desc: string | undefined) =>
    desc ? `${SPECIAL.DESCRIPTION} ${label}: ${desc}` : undefined;
  const taskHead = (c: ClassificationSpec) => (c.prompt ? `${c.task}: ${c.prompt}` : c.task);
  for (const e of schema.entities) for (const x of [e.name, descOf(e.name, e.description)]) if (x) pieces.add(x);
  for (const c of schema.classifications) {
    pieces.add(taskHead(c));
    for (const l of c.labels) for (const x of [l, descOf(l, c.labelDescriptions?.[l])]) if (x) pieces.add(x);
  }
  await tok.tokenizeAll(pieces);
  const n = (x: string | undefined) => (x === undefined ? 0 : tok.ids(x).length);
  const whole = new Map<string, number>();
  for (const u of units) {
    if (u.kind !== 'structure' && u.kind !== 'relation') continue;
    const sub = subSchema(schema, [u]);
    whole.set(`${u.kind}:${u.name}`, (await tok.promptTokens(sub)) - n(SPECIAL.SEP_TEXT) + n(SPECIAL.SEP_STRUCT));
  }
  const wrapper = n('(') * 2 + n(')') * 2 + n(SPECIAL.P) + n(SPECIAL.SEP_STRUCT);
  const cost = (u: Unit, open: Set<string>): number => {
    if (u.kind === 'structure' || u.kind === 'relation') return whole.get(`${u.kind}:${u.name}`)!;
    if (u.kind === 'entity') {
      const e = schema.entities.find((x) => x.name === u.name)!;
      return (
        (open.has('entities') ? 0 : wrapper + n('entities')) +
        n(SPECIAL.E) +
        n(e.name) +
        n(descOf(e.name, e.description))
      );
    }
    const c = schema.classifications[u.task]!;
    return (
      (open.has(`task:${u.task}`) ? 0 : wrapper + n(taskHead(c))) +
      n(SPECIAL.L) +
      n(u.label) +
      n(descOf(u.label, c.labelDescriptions?.[u.label]))
    );
  };
  const key = (u: Unit) =>
    u.kind === 'entity' ? 'entities' : u.kind === 'label' ? `task:${u.task}` : `${u.kind}:${u.name}`;

  const groups: Unit[][] = [];
  let cur: Unit[] = [];
  let open = new Set<string>();
  let used = n(SPECIAL.SEP_TEXT);
  for (const u of units) {
    const c = cost(u, open);
    if (cur.length && used + c > budget) {
      groups.push(cur);
      cur = [];
      open = new Set();
      used = n(SPECIAL.SEP_TEXT);
    }
    used += cost(u, open);
    open.add(key(u));
    cur.push(u);
  }
  if (cur.length) groups.push(cur);

  // exact check per group; a group over budget (a tokenizer that is not additive) gives up its last parts
  const out: EncoderSchema[] = [];
  for (let gi = 0; gi < groups.length; gi++) {
    const g = groups[gi]!;
    const len = await tok.promptTokens(subSchema(schema, g));
    if (g.length === 1) {
      if (len + 2 > maxPos) {
        const u = g[0]!;
        const what =
          u.kind === 'label'
            ? `label '${u.label}' of classification '${schema.classifications[u.task]!.task}'`
            : u.kind === 'entity'
              ? `entity type '${u.name}'`
              : `${u.kind} '${u.name}'`;
        throw new EncoderInputError(
          `the ${what} alone serializes to ${len} tokens; the model accepts ${maxPos} tokens in all (schema + text)`,
        );
      }
    } else if (len > budget) {
      groups.splice(gi + 1, 0, [g.pop()!]);
      gi--;
      continue;
    }
    out.push(subSchema(schema, g));
  }
  return out;
}

/** The schema restricted to some of its parts (`labelGroups`); descriptions follow their labels. */
function subSchema(schema: EncoderSchema, units: Unit[]): EncoderSchema {
  const has = (kind: Unit['kind'], name: string) =>
    units.some((u) => u.kind === kind && 'name' in u && u.name === name);
  return {
    structures: schema.structures.filter((s) => has('structure', s.name)),
    entities: schema.entities.filter((e) => has('entity', e.name)),
    relations: schema.relations.filter((r) => has('relation', r.name)),
    classifications: schema.classifications
      .map((c, task) => ({
        ...c,
        labels: c.labels.filter((l) => units.some((u) => u.kind === 'label' && u.task === task && u.label === l)),
      }))
      .filter((c) => c.labels.length > 0),
  };
}

/**
 * One text's results from every label group → the result of the whole schema. Entity types,
 * structures and relations belong to exactly one group, so their results are taken as they are;
 * a classification task's labels are spread over groups, so their logits are gathered and decoded
 * together: one softmax over all labels (single-label) or every label's sigmoid (multi-label).
 */
export function mergeGroups(parts: EncoderResult[], schema: EncoderSchema, threshold: number): EncoderResult {
  const out: EncoderResult = { classifications: {}, structures: {}, relations: {} };
  if (schema.entities.length) {
    out.entities = {};
    for (const e of schema.entities)
      for (const p of parts) if (p.entities && e.name in p.entities) out.entities[e.name] = p.entities[e.name]!;
  }
  for (const p of parts) {
    Object.assign(out.structures, p.structures);
    Object.assign(out.relations, p.relations);
  }
  for (const c of schema.classifications) {
    const logits = new Float32Array(c.labels.length).fill(Number.NaN);
    const at = new Map(c.labels.map((l, j) => [l, j]));
    for (const p of parts)
      for (const x of (p.classifications[c.task] ?? []) as RawLabelScore[]) logits[at.get(x.label)!] = x.logit;
    if (logits.some((x) => Number.isNaN(x))) continue;
    out.classifications[c.task] = decodeClassification(c, logits, threshold);
  }
  return out;
}

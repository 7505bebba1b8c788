/**
 * The evaluation scorer: gold dataset rows vs encoder predictions → tp/fp/fn counts → P/R/F1.
 * Pure functions, no I/O. Used by evaluations (one `scoreRow` per row, shards merged with
 * `mergeCounts`, then `finalizeMetrics`) and mirrored rule for rule by the trainer's validation
 * metrics (containers/training/sift_trainer/data/metrics.py); test/fixtures/evaluation/cases.json holds
 * hand-computed cases that both languages must reproduce. docs/evaluation.md states the same rules.
 *
 * Matching rules
 * - Normalising: "ws" = split on whitespace (the characters in `WHITESPACE`, Python's `str.isspace`
 *   set), drop empty pieces, join with one space (so also trimmed). "value" = ws + lower-case.
 * - A head is scored on a row only when the row has that head's gold column (`entities`; `label`
 *   for single-label / `labels` for multi-label; `json_structures`; `relations`), an empty list
 *   included (`entities: []` says "no entities", so every predicted entity is a false positive).
 *   A row without the column says nothing about that head: its predictions for it are ignored.
 * - With a schema (`evaluationSchemaFor`) only the heads it asks for are scored, and entity types,
 *   structure fields and relation types it does not name are ignored on both sides. Classification
 *   is per row: every gold and predicted label counts, inside the schema's label list or not.
 * - Entities: gold with offsets and predictions are sets of exact `(label, start, end)` (Unicode
 *   code points; duplicates collapse; a prediction without integer offsets is ignored). A gold
 *   entity without offsets (mention only) matches a predicted span of the same label left unmatched
 *   by the exact pass whose `text` equals the mention after ws-normalising (case-sensitive); each
 *   such gold is consumed at most once, so per `(label, mention)`:
 *   tp = min(#gold mentions, #leftover predictions with that text); further predictions of that
 *   exact mention are ignored (the label doesn't say which occurrence it meant). Every other prediction is a fp,
 *   every other gold a fn.
 * - Classification (task `classification`): single-label compares the top-1 prediction (highest
 *   score; the first on ties; none when the list is empty) with `label`: equal → tp for it;
 *   otherwise fn for the gold label and fp for the predicted one (if any). The confusion matrix
 *   counts gold × top-1, with `(none)` when nothing was predicted. Multi-label compares the set of
 *   predicted labels with the set `labels`, per label.
 * - Structures: per `<structure>.<field>`, the multiset of normalised ("value") non-empty values over
 *   all predicted instances vs over all gold instances of that structure in the row (values are
 *   pooled across instances, not aligned instance by instance): tp = Σ min(count_pred, count_gold).
 *   A `null` str field or empty list contributes nothing.
 * - Relations: sets of `(relation, value(head text), value(tail text))` triples.
 * - Micro-averaging: precision = Σtp / (Σtp + Σfp), recall = Σtp / (Σtp + Σfn),
 *   f1 = 2PR / (P + R), over every breakdown of every head scored; a 0/0 ratio is 0 (no
 *   predictions → precision 0; no gold → recall 0). Values are rounded to 6 decimals.
 */
import type { NormalizedRow } from '../datasets/rows';
import type { SchemaInput } from '../encoder/api';

/** The classification task name the trainer's manifest uses for `label` / `labels` columns. */
export const CLASSIFICATION_TASK = 'classification';
/** The confusion-matrix column for single-label rows where no label was predicted. */
export const NO_PREDICTION = '(none)';
export const DEFAULT_MAX_EXAMPLES = 20;
/** Code points of an example's text that are kept. */
export const EXAMPLE_TEXT_CHARS = 300;
/** Items per side (gold / predicted) of one example, and code points per item string. */
const EXAMPLE_ITEMS = 10;
const EXAMPLE_ITEM_CHARS = 100;

/** Python's `str.isspace()` characters, spelled out so both languages split the same way. */
const WHITESPACE = /[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

/** Collapse whitespace runs to one space and trim. */
export function normalizeSpace(s: string): string {
  return s
    .split(WHITESPACE)
    .filter((x) => x.length > 0)
    .join(' ');
}

/** `normalizeSpace` + lower-case: structure values and relation arguments. */
export function normalizeValue(s: string): string {
  return normalizeSpace(s).toLowerCase();
}

// ---------------------------------------------------------------------------------------------
// Types
// ---------------------------------------------------------------------------------------------

/** A dataset version's vocabulary (DatasetVersion / DatasetSummary.describe()). */
export interface DatasetVocabulary {
  task_types: readonly string[];
  label_vocabulary: readonly string[];
  entity_types?: readonly string[];
  relation_types?: readonly string[];
  structures?: Record<string, Record<string, { dtype: 'str' | 'list' }>>;
}

export interface PredictedSpan {
  text: string;
  score?: number;
  start?: number;
  end?: number;
}

/** The per-text `result` of the encoder API (`formatResult` in src/core/encoder/api.ts). */
export interface EncoderPrediction {
  entities?: { text: string; label: string; score?: number; start: number; end: number }[];
  classifications?: Record<string, { label: string; score?: number }[]>;
  structures?: Record<string, Record<string, PredictedSpan | PredictedSpan[] | null>[]>;
  relations?: Record<string, { head: PredictedSpan; tail: PredictedSpan; score?: number }[]>;
}

export interface Tally {
  tp: number;
  fp: number;
  fn: number;
}
export type TallyMap = Record<string, Tally>;

/** What the model got wrong on one row: the unmatched gold items and the unmatched predictions. */
export interface ExampleItems {
  entities?: { text: string; label: string; start?: number; end?: number }[];
  labels?: string[];
  /** `<structure>.<field>` → values (normalised). */
  fields?: Record<string, string[]>;
  relations?: { relation: string; head: string; tail: string }[];
}

export interface EvaluationExample {
  /** The row's `id` column, or the row number passed in `ScoreOptions.row`. */
  id?: string | number;
  /** The first `EXAMPLE_TEXT_CHARS` code points of the row's text. */
  text: string;
  gold: ExampleItems;
  predicted: ExampleItems;
}

/**
 * Mergeable, JSON-serialisable counts (plain numbers and small objects: shard results travel
 * through Step Functions). Size grows with the number of types/labels/fields and distinct
 * (gold, predicted) confusion pairs, not with the number of rows.
 */
export interface EvaluationCounts {
  /** Rows passed to `scoreRow`. */
  rows: number;
  /** Rows on which each head was scored (the row had the gold column and the schema the head). */
  scored: { entities: number; classification: number; structures: number; relations: number };
  per_entity: TallyMap;
  per_label: TallyMap;
  /** Keyed `<structure>.<field>`. */
  per_field: TallyMap;
  per_relation: TallyMap;
  /** Single-label only: gold label → top-1 predicted label (or `(none)`) → rows. */
  confusion: Record<string, Record<string, number>>;
  examples: EvaluationExample[];
  max_examples: number;
}

export interface Breakdown {
  f1: number;
  precision: number;
  recall: number;
  /** Gold items: tp + fn. */
  support: number;
  tp: number;
  fp: number;
  fn: number;
}

export interface EvaluationMetrics {
  f1: number;
  precision: number;
  recall: number;
  per_entity?: Record<string, Breakdown>;
  per_label?: Record<string, Breakdown>;
  per_field?: Record<string, Breakdown>;
  per_relation?: Record<string, Breakdown>;
  /** Gold labels are rows, predicted labels columns, in `labels` order; `(none)` (last, when present) is a column only: its row is all zeros. */
  confusion?: { labels: string[]; matrix: number[][] };
  examples?: EvaluationExample[];
  /** `rows`: rows scored; per head: gold items (entities, labels, field values, relations). */
  support: { rows: number; entities?: number; labels?: number; fields?: number; relations?: number };
}

export interface ScoreOptions {
  /** The schema the predictions were made with; restricts what is scored (see the rules above). */
  schema?: SchemaInput | undefined;
  /** Examples kept (default 20). */
  maxExamples?: number | undefined;
  /** Row number for the example, when the row has no `id`. */
  row?: number | undefined;
}

// ---------------------------------------------------------------------------------------------
// Safe dictionaries: labels are user data (`__proto__` must be an ordinary key).
// ---------------------------------------------------------------------------------------------

function getOwn<T>(m: Record<string, T>, k: string): T | undefined {
  return Object.hasOwn(m, k) ? m[k] : undefined;
}
function setOwn<T>(m: Record<string, T>, k: string, v: T): T {
  Object.defineProperty(m, k, { value: v, enumerable: true, writable: true, configurable: true });
  return v;
}
function tallyOf(m: TallyMap, k: string): Tally {
  return getOwn(m, k) ?? setOwn(m, k, { tp: 0, fp: 0, fn: 0 });
}
function add(m: TallyMap, k: string, tp: number, fp: number, fn: number): void {
  const t = tallyOf(m, k);
  t.tp += tp;
  t.fp += fp;
  t.fn += fn;
}
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const cut = (s: string, n: number) => Array.from(s).slice(0, n).join('');

class Counter {
  readonly m = new Map<string, number>();
  add(k: string, n = 1) {
    this.m.set(k, (this.m.get(k) ?? 0) + n);
  }
  get(k: string) {
    return this.m.get(k) ?? 0;
  }
  total() {
    let n = 0;
    for (const v of this.m.values()) n += v;
    return n;
  }
}

// ---------------------------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------------------------

/**
 * The inference schema that asks the engine for every head a dataset version has: entity types,
 * one classification task named `classification` over `label_vocabulary` (`multi_label` when the
 * dataset's rows use `labels`), its structures (a field is `list` when any gold value was an array,
 * see DatasetSummary) and relation types. An empty object means the dataset has no encoder head.
 * Large vocabularies may exceed ENCODER_LIMITS.maxLabels; the caller validates with toEncoderSchema.
 */
export function evaluationSchemaFor(vocabulary: DatasetVocabulary): SchemaInput {
  const schema: SchemaInput = {};
  const entities = vocabulary.entity_types ?? [];
  if (entities.length) schema.entities = [...entities];
  if (vocabulary.label_vocabulary.length) {
    schema.classifications = [
      { task: CLASSIFICATION_TASK, labels: [...vocabulary.label_vocabulary], multi_label: vocabulary.task_types.includes('multi_label_classification') },
    ];
  }
  const structures = Object.entries(vocabulary.structures ?? {}).filter(([, fields]) => Object.keys(fields).length > 0);
  if (structures.length) {
    schema.structures = Object.fromEntries(
      structures.map(([name, fields]) => [name, { fields: Object.entries(fields).map(([f, spec]) => ({ name: f, dtype: spec.dtype })) }]),
    );
  }
  const relations = vocabulary.relation_types ?? [];
  if (relations.length) schema.relations = [...relations];
  return schema;
}

interface SchemaView {
  entities: Set<string>;
  classification?: { labels: Set<string>; multi: boolean };
  structures: Map<string, string[]>;
  relations: Set<string>;
}

function viewOf(schema: SchemaInput): SchemaView {
  const entities = new Set(schema.entities === undefined ? [] : Array.isArray(schema.entities) ? schema.entities : Object.keys(schema.entities));
  const task = schema.classifications?.find((c) => c.task === CLASSIFICATION_TASK);
  const structures = new Map(Object.entries(schema.structures ?? {}).map(([name, s]) => [name, s.fields.map((f) => f.name)]));
  const relations = new Set((schema.relations ?? []).map((r) => (typeof r === 'string' ? r : r.name)));
  return { entities, ...(task ? { classification: { labels: new Set(task.labels), multi: task.multi_label ?? false } } : {}), structures, relations };
}

// ---------------------------------------------------------------------------------------------
// Counts
// ---------------------------------------------------------------------------------------------

export function emptyCounts(maxExamples = DEFAULT_MAX_EXAMPLES): EvaluationCounts {
  return {
    rows: 0,
    scored: { entities: 0, classification: 0, structures: 0, relations: 0 },
    per_entity: {},
    per_label: {},
    per_field: {},
    per_relation: {},
    confusion: {},
    examples: [],
    max_examples: maxExamples,
  };
}

const key = (...parts: (string | number)[]) => JSON.stringify(parts);

/** Scores one gold row against the engine's `result` for its text. */
export function scoreRow(gold: NormalizedRow, prediction: EncoderPrediction | null | undefined, opts: ScoreOptions = {}): EvaluationCounts {
  const counts = emptyCounts(opts.maxExamples ?? DEFAULT_MAX_EXAMPLES);
  counts.rows = 1;
  const pred: EncoderPrediction = isObject(prediction) ? prediction : {};
  const view = opts.schema ? viewOf(opts.schema) : undefined;
  const missed: ExampleItems = {};
  const spurious: ExampleItems = {};

  // -- entities
  if (gold.entities !== undefined && (!view || view.entities.size > 0)) {
    counts.scored.entities = 1;
    const allowed = (label: string) => !view || view.entities.has(label);
    for (const t of view?.entities ?? []) tallyOf(counts.per_entity, t);
    const exactGold = new Map<string, { text: string; label: string; start: number; end: number }>();
    const mentionGold = new Counter();
    const mentionItems: { text: string; label: string }[] = [];
    for (const e of gold.entities) {
      if (!allowed(e.label)) continue;
      if (typeof e.start === 'number' && typeof e.end === 'number') {
        const k = key(e.label, e.start, e.end);
        if (!exactGold.has(k)) exactGold.set(k, { text: e.text, label: e.label, start: e.start, end: e.end });
      } else {
        mentionGold.add(key(e.label, normalizeSpace(e.text)));
        mentionItems.push({ text: e.text, label: e.label });
      }
    }
    const preds = new Map<string, { text: string; label: string; start: number; end: number }>();
    for (const p of Array.isArray(pred.entities) ? pred.entities : []) {
      if (!isObject(p) || typeof p.label !== 'string' || !allowed(p.label) || !Number.isInteger(p.start) || !Number.isInteger(p.end)) continue;
      const k = key(p.label, p.start, p.end);
      if (!preds.has(k)) preds.set(k, { text: typeof p.text === 'string' ? p.text : '', label: p.label, start: p.start, end: p.end });
    }
    const leftover: { k: string; p: { text: string; label: string; start: number; end: number } }[] = [];
    for (const [k, p] of preds) {
      if (exactGold.has(k)) add(counts.per_entity, p.label, 1, 0, 0);
      else leftover.push({ k: key(p.label, normalizeSpace(p.text)), p });
    }
    for (const [k, g] of exactGold) {
      if (!preds.has(k)) {
        add(counts.per_entity, g.label, 0, 0, 1);
        (missed.entities ??= []).push(g);
      }
    }
    // mention-only golds: each consumed at most once, by leftover predictions in order
    const remaining = new Map(mentionGold.m);
    for (const { k, p } of leftover) {
      const left = remaining.get(k) ?? 0;
      if (left > 0) {
        remaining.set(k, left - 1);
        add(counts.per_entity, p.label, 1, 0, 0);
      } else if (mentionGold.m.has(k)) {
        // another occurrence of a mention labelled without offsets: consistent with the label, not an error
      } else {
        add(counts.per_entity, p.label, 0, 1, 0);
        (spurious.entities ??= []).push(p);
      }
    }
    for (const m of mentionItems) {
      const k = key(m.label, normalizeSpace(m.text));
      const left = remaining.get(k) ?? 0;
      if (left > 0) {
        remaining.set(k, left - 1);
        add(counts.per_entity, m.label, 0, 0, 1);
        (missed.entities ??= []).push(m);
      }
    }
  }

  // -- classification
  const multi = view ? view.classification?.multi : gold.labels !== undefined;
  const goldLabels = multi === undefined ? undefined : multi ? gold.labels : gold.label !== undefined ? [gold.label] : undefined;
  if (goldLabels !== undefined && multi !== undefined) {
    counts.scored.classification = 1;
    for (const l of view?.classification?.labels ?? []) tallyOf(counts.per_label, l);
    const raw = isObject(pred.classifications) ? getOwn(pred.classifications, CLASSIFICATION_TASK) : undefined;
    const items = (Array.isArray(raw) ? raw : []).filter((x): x is { label: string; score?: number } => isObject(x) && typeof x.label === 'string');
    let predicted: string[];
    if (multi) predicted = [...new Set(items.map((x) => x.label))];
    else {
      let top: { label: string; score: number } | undefined;
      for (const x of items) {
        const s = typeof x.score === 'number' ? x.score : -Infinity;
        if (!top || s > top.score) top = { label: x.label, score: s };
      }
      predicted = top ? [top.label] : [];
      const g = goldLabels[0]!;
      const row = getOwn(counts.confusion, g) ?? setOwn(counts.confusion, g, {});
      const col = top?.label ?? NO_PREDICTION;
      setOwn(row, col, (getOwn(row, col) ?? 0) + 1);
    }
    const goldSet = new Set(goldLabels);
    const predSet = new Set(predicted);
    for (const l of goldSet) {
      if (predSet.has(l)) add(counts.per_label, l, 1, 0, 0);
      else {
        add(counts.per_label, l, 0, 0, 1);
        (missed.labels ??= []).push(l);
      }
    }
    for (const l of predSet) {
      if (!goldSet.has(l)) {
        add(counts.per_label, l, 0, 1, 0);
        (spurious.labels ??= []).push(l);
      }
    }
  }

  // -- structures
  if (gold.json_structures !== undefined && (!view || view.structures.size > 0)) {
    counts.scored.structures = 1;
    const fieldsOf = (name: string): string[] | undefined => (view ? view.structures.get(name) : undefined);
    const goldC = new Map<string, Counter>();
    const predC = new Map<string, Counter>();
    const bump = (m: Map<string, Counter>, k: string, v: string) => {
      const n = normalizeValue(v);
      if (!n) return;
      const c = m.get(k) ?? new Counter();
      m.set(k, c);
      c.add(n);
    };
    for (const [name, fields] of view?.structures ?? []) for (const f of fields) tallyOf(counts.per_field, `${name}.${f}`);
    for (const instance of gold.json_structures) {
      for (const [name, fields] of Object.entries(instance)) {
        if (view && !view.structures.has(name)) continue;
        const allowed = fieldsOf(name);
        for (const [f, v] of Object.entries(fields)) {
          if (allowed && !allowed.includes(f)) continue;
          for (const x of Array.isArray(v) ? v : [v]) if (typeof x === 'string') bump(goldC, `${name}.${f}`, x);
        }
      }
    }
    const predStructures = isObject(pred.structures) ? pred.structures : {};
    const names = view ? [...view.structures.keys()] : Object.keys(predStructures);
    for (const name of names) {
      const instances = getOwn(predStructures, name);
      for (const inst of Array.isArray(instances) ? instances : []) {
        if (!isObject(inst)) continue;
        for (const f of fieldsOf(name) ?? Object.keys(inst)) {
          const v = getOwn(inst, f);
          for (const x of Array.isArray(v) ? v : [v]) if (isObject(x) && typeof x.text === 'string') bump(predC, `${name}.${f}`, x.text);
        }
      }
    }
    for (const k of new Set([...goldC.keys(), ...predC.keys()])) {
      const g = goldC.get(k) ?? new Counter();
      const p = predC.get(k) ?? new Counter();
      let tp = 0;
      for (const [v, n] of g.m) {
        const hit = Math.min(n, p.get(v));
        tp += hit;
        for (let i = hit; i < n; i++) ((missed.fields ??= {})[k] ??= []).push(v);
      }
      for (const [v, n] of p.m) for (let i = Math.min(n, g.get(v)); i < n; i++) ((spurious.fields ??= {})[k] ??= []).push(v);
      add(counts.per_field, k, tp, p.total() - tp, g.total() - tp);
    }
  }

  // -- relations
  if (gold.relations !== undefined && (!view || view.relations.size > 0)) {
    counts.scored.relations = 1;
    for (const r of view?.relations ?? []) tallyOf(counts.per_relation, r);
    const allowed = (r: string) => !view || view.relations.has(r);
    const goldT = new Map<string, { relation: string; head: string; tail: string }>();
    for (const r of gold.relations) {
      if (!allowed(r.relation)) continue;
      const t = { relation: r.relation, head: normalizeValue(r.head), tail: normalizeValue(r.tail) };
      goldT.set(key(t.relation, t.head, t.tail), t);
    }
    const predT = new Map<string, { relation: string; head: string; tail: string }>();
    const predRel = isObject(pred.relations) ? pred.relations : {};
    for (const relation of Object.keys(predRel)) {
      if (!allowed(relation)) continue;
      const items = getOwn(predRel, relation);
      for (const it of Array.isArray(items) ? items : []) {
        if (!isObject(it) || !isObject(it.head) || !isObject(it.tail)) continue;
        const head = typeof it.head.text === 'string' ? normalizeValue(it.head.text) : '';
        const tail = typeof it.tail.text === 'string' ? normalizeValue(it.tail.text) : '';
        if (head && tail) predT.set(key(relation, head, tail), { relation, head, tail });
      }
    }
    for (const [k, t] of goldT) {
      if (predT.has(k)) add(counts.per_relation, t.relation, 1, 0, 0);
      else {
        add(counts.per_relation, t.relation, 0, 0, 1);
        (missed.relations ??= []).push(t);
      }
    }
    for (const [k, t] of predT) {
      if (!goldT.has(k)) {
        add(counts.per_relation, t.relation, 0, 1, 0);
        (spurious.relations ??= []).push(t);
      }
    }
  }

  if (counts.max_examples > 0 && (hasItems(missed) || hasItems(spurious))) {
    const id = gold.id ?? opts.row;
    counts.examples.push({ ...(id !== undefined ? { id } : {}), text: cut(gold.text ?? '', EXAMPLE_TEXT_CHARS), gold: capItems(missed), predicted: capItems(spurious) });
  }
  return counts;
}

const hasItems = (x: ExampleItems) => Object.keys(x).length > 0;

/** At most EXAMPLE_ITEMS items per side (entities, then labels, fields, relations), each string cut to EXAMPLE_ITEM_CHARS. */
function capItems(x: ExampleItems): ExampleItems {
  let budget = EXAMPLE_ITEMS;
  const take = <T>(xs: T[]): T[] => {
    const out = xs.slice(0, Math.max(0, budget));
    budget -= out.length;
    return out;
  };
  const c = (s: string) => cut(s, EXAMPLE_ITEM_CHARS);
  const out: ExampleItems = {};
  if (x.entities) out.entities = take(x.entities).map((e) => ({ ...e, text: c(e.text) }));
  if (x.labels) out.labels = take(x.labels).map(c);
  if (x.fields) {
    const fields: Record<string, string[]> = {};
    for (const [k, vs] of Object.entries(x.fields)) {
      const kept = take(vs);
      if (kept.length) setOwn(fields, k, kept.map(c));
    }
    out.fields = fields;
  }
  if (x.relations) out.relations = take(x.relations).map((r) => ({ relation: r.relation, head: c(r.head), tail: c(r.tail) }));
  return out;
}

function mergeTallies(a: TallyMap, b: TallyMap): TallyMap {
  const out: TallyMap = {};
  for (const m of [a, b]) for (const [k, t] of Object.entries(m)) add(out, k, t.tp, t.fp, t.fn);
  return out;
}

/** Sums two counts (associative and commutative except for which examples are kept: `a`'s first). Inputs are not modified. */
export function mergeCounts(a: EvaluationCounts, b: EvaluationCounts): EvaluationCounts {
  const confusion: EvaluationCounts['confusion'] = {};
  for (const m of [a.confusion, b.confusion]) {
    for (const [g, row] of Object.entries(m)) {
      const out = getOwn(confusion, g) ?? setOwn(confusion, g, {});
      for (const [p, n] of Object.entries(row)) setOwn(out, p, (getOwn(out, p) ?? 0) + n);
    }
  }
  const max = Math.min(a.max_examples, b.max_examples);
  return {
    rows: a.rows + b.rows,
    scored: {
      entities: a.scored.entities + b.scored.entities,
      classification: a.scored.classification + b.scored.classification,
      structures: a.scored.structures + b.scored.structures,
      relations: a.scored.relations + b.scored.relations,
    },
    per_entity: mergeTallies(a.per_entity, b.per_entity),
    per_label: mergeTallies(a.per_label, b.per_label),
    per_field: mergeTallies(a.per_field, b.per_field),
    per_relation: mergeTallies(a.per_relation, b.per_relation),
    confusion,
    examples: [...a.examples, ...b.examples].slice(0, max),
    max_examples: max,
  };
}

const round6 = (x: number) => Math.round(x * 1e6) / 1e6;

/** P/R/F1 of one tally; 0/0 → 0. */
export function prf(t: Tally): Breakdown {
  const p = t.tp + t.fp ? t.tp / (t.tp + t.fp) : 0;
  const r = t.tp + t.fn ? t.tp / (t.tp + t.fn) : 0;
  const f = p + r ? (2 * p * r) / (p + r) : 0;
  return { f1: round6(f), precision: round6(p), recall: round6(r), support: t.tp + t.fn, tp: t.tp, fp: t.fp, fn: t.fn };
}

const sortedKeys = (m: object) => Object.keys(m).sort();

/** Micro-averaged metrics with per-type breakdowns (only for heads that were scored), confusion and examples. */
export function finalizeMetrics(counts: EvaluationCounts): EvaluationMetrics {
  const total: Tally = { tp: 0, fp: 0, fn: 0 };
  const support: EvaluationMetrics['support'] = { rows: counts.rows };
  const breakdown = (m: TallyMap) => {
    const out: Record<string, Breakdown> = {};
    let gold = 0;
    for (const k of sortedKeys(m)) {
      const t = m[k]!;
      total.tp += t.tp;
      total.fp += t.fp;
      total.fn += t.fn;
      gold += t.tp + t.fn;
      setOwn(out, k, prf(t));
    }
    return { out, gold };
  };
  const overall: Partial<EvaluationMetrics> = {};
  // head scored → its tallies, its breakdown key, its support key
  const heads = [
    [counts.scored.entities, 'per_entity', 'entities'],
    [counts.scored.classification, 'per_label', 'labels'],
    [counts.scored.structures, 'per_field', 'fields'],
    [counts.scored.relations, 'per_relation', 'relations'],
  ] as const;
  for (const [scored, key, supportKey] of heads) {
    if (!scored) continue;
    const b = breakdown(counts[key]);
    overall[key] = b.out;
    support[supportKey] = b.gold;
  }
  const { f1, precision, recall } = prf(total);
  const metrics: EvaluationMetrics = { f1, precision, recall, ...overall, support };
  const golds = sortedKeys(counts.confusion);
  if (golds.length) {
    const predicted = new Set<string>();
    for (const g of golds) for (const p of Object.keys(counts.confusion[g]!)) predicted.add(p);
    const labels = [...new Set([...golds, ...predicted])].filter((l) => l !== NO_PREDICTION).sort();
    if (predicted.has(NO_PREDICTION)) labels.push(NO_PREDICTION);
    metrics.confusion = {
      labels,
      matrix: labels.map((g) => {
        const row = getOwn(counts.confusion, g) ?? {};
        return labels.map((p) => getOwn(row, p) ?? 0);
      }),
    };
  }
  if (counts.examples.length) metrics.examples = counts.examples;
  return metrics;
}

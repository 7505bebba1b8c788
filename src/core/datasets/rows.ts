/**
 * Row rules for training datasets (docs/reference/decisions.md#dataset-rows).
 * Pure functions: one raw row in, one normalized row or a list of problems out.
 */
import { CodePointIndex, occurringIn } from './textIndex';

export { textWork as validationWork } from './textIndex';

export interface RowError {
  /** 1-based row number (JSONL line, CSV record, JSON array element); null for dataset-wide problems. */
  row: number | null;
  /** The column at fault, with a path inside it where useful: `entities[2].start`. */
  field: string | null;
  message: string;
}

export type TaskType =
  | 'ner'
  | 'classification'
  | 'multi_label_classification'
  | 'structures'
  | 'relations'
  | 'sft'
  | 'dpo'
  | 'grpo';

export const ENCODER_TASK_TYPES: TaskType[] = [
  'ner',
  'classification',
  'multi_label_classification',
  'structures',
  'relations',
];
export const DECODER_TASK_TYPES: TaskType[] = ['sft', 'dpo', 'grpo'];

export interface EntityLabel {
  text: string;
  label: string;
  start?: number;
  end?: number;
}

export interface RelationLabel {
  relation: string;
  head: string;
  tail: string;
}

export type StructureInstance = Record<string, Record<string, string | string[]>>;

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | { type: 'text'; text: string }[];
}

export interface NormalizedRow {
  id?: string | number;
  text?: string;
  label?: string;
  labels?: string[];
  entities?: EntityLabel[];
  relations?: RelationLabel[];
  json_structures?: StructureInstance[];
  messages?: ChatMessage[];
  prompt?: string | ChatMessage[];
  chosen?: string;
  rejected?: string;
  answer?: string;
  metadata?: Record<string, unknown>;
}

const ENCODER_COLUMNS = ['text', 'label', 'labels', 'entities', 'relations', 'json_structures'] as const;
/** OpenAI's preference fine-tuning format, normalized to a DPO row (prompt, chosen, rejected). */
const OPENAI_PREFERENCE_COLUMNS = ['input', 'preferred_output', 'non_preferred_output'] as const;
const DECODER_COLUMNS = ['messages', 'prompt', 'chosen', 'rejected', 'answer', ...OPENAI_PREFERENCE_COLUMNS] as const;
const COMMON_COLUMNS = ['id', 'metadata'] as const;
const KNOWN_COLUMNS = new Set<string>([...ENCODER_COLUMNS, ...DECODER_COLUMNS, ...COMMON_COLUMNS]);

/**
 * Bounds on what one row may hold and on what its errors may say, so that a hostile row costs
 * time and memory in proportion to its size (security review F4): a 1 MiB row once produced GBs of
 * error text. README "Datasets" states them.
 */
export const ROW_LIMITS = {
  /** Errors reported per row; the rest become one "… and K more errors in this row". */
  errorsPerRow: 20,
  /** Characters of a row's own value echoed in a message (then an ellipsis and the full length). */
  echoChars: 200,
  /** Longest `field` path and `message` kept: only a pathological name or value reaches them. */
  fieldChars: 300,
  messageChars: 1000,
  entities: 5_000,
  relations: 5_000,
  structures: 1_000,
} as const;

/** Names that mean something to every JavaScript object: never a structure or field name (F13). */
const RESERVED_NAMES = new Set(['__proto__', 'constructor', 'prototype']);

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.trim().length > 0;
const count = (n: number) => n.toLocaleString('en-US');

/** Offsets are Unicode code points (Python semantics), not UTF-16 units. */
export function codePointSlice(text: string, start: number, end: number): string {
  return Array.from(text).slice(start, end).join('');
}

/** Code points in `s` (a lone surrogate counts as one, as in Array.from). */
function codePointLength(s: string): number {
  let n = s.length;
  for (let i = 0; i + 1 < s.length; i += 1) {
    const c = s.charCodeAt(i);
    const d = s.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && d >= 0xdc00 && d <= 0xdfff) {
      n -= 1;
      i += 1;
    }
  }
  return n;
}

/** The first `max` code points of `s`, never half a surrogate pair. */
function head(s: string, max: number): string {
  let units = 0;
  for (let cps = 0; cps < max && units < s.length; cps += 1) {
    const c = s.charCodeAt(units);
    units += c >= 0xd800 && c <= 0xdbff && units + 1 < s.length ? 2 : 1;
  }
  return s.slice(0, units);
}

/**
 * A row's value quoted in a message: whole up to `ROW_LIMITS.echoChars` code points, else its start,
 * an ellipsis and its full length. `length` is the value's length in code points when the caller
 * holds only a prefix of it.
 */
export function echo(value: string, length?: number): string {
  const max = ROW_LIMITS.echoChars;
  const full = length ?? codePointLength(value);
  return full <= max ? `'${value}'` : `'${head(value, max)}…' (${count(full)} characters)`;
}

function bounded(s: string, max: number): string {
  return s.length <= max ? s : `${head(s, max)}…`;
}

/** Caps a row error's field and message (the reader's and the summary's errors as well as ours). */
export function boundRowError(e: RowError): RowError {
  const field = e.field === null ? null : bounded(e.field, ROW_LIMITS.fieldChars);
  const message = bounded(e.message, ROW_LIMITS.messageChars);
  return field === e.field && message === e.message ? e : { row: e.row, field, message };
}

export interface RowResult {
  row?: NormalizedRow;
  tasks: TaskType[];
  errors: RowError[];
}

/** Reports one problem; a message that echoes row values is a function, built only if it is kept. */
type Report = (field: string | null, message: string | (() => string)) => void;

/**
 * Validates one row in time linear in its size: the text is indexed once (code points, substring
 * search) whatever the number of entities, relations and structure values.
 */
export function validateRow(raw: unknown, rowNumber: number): RowResult {
  const errors: RowError[] = [];
  let unreported = 0;
  const err: Report = (field, message) => {
    if (errors.length >= ROW_LIMITS.errorsPerRow) {
      unreported += 1;
      return;
    }
    errors.push(boundRowError({ row: rowNumber, field, message: typeof message === 'function' ? message() : message }));
  };
  const result = (r: RowResult): RowResult => {
    if (unreported > 0)
      r.errors.push({ row: rowNumber, field: null, message: `… and ${count(unreported)} more errors in this row` });
    return r;
  };
  if (!isPlainObject(raw)) {
    err(null, 'row must be a JSON object');
    return result({ tasks: [], errors });
  }
  for (const key of Object.keys(raw)) {
    if (!KNOWN_COLUMNS.has(key)) {
      err(key, () => `unknown column ${echo(key)} (allowed: ${[...KNOWN_COLUMNS].join(', ')})`);
    }
  }
  const hasEncoder = ENCODER_COLUMNS.some((c) => c in raw);
  const hasDecoder = DECODER_COLUMNS.some((c) => c in raw);
  if (hasEncoder && hasDecoder) {
    err(null, 'row mixes encoder columns (text, label, entities, ...) with decoder columns (messages, prompt, ...)');
    return result({ tasks: [], errors });
  }
  const row: NormalizedRow = {};
  if ('id' in raw) {
    if (typeof raw.id === 'string' || typeof raw.id === 'number') row.id = raw.id;
    else err('id', 'must be a string or a number');
  }
  if ('metadata' in raw) {
    if (isPlainObject(raw.metadata)) row.metadata = raw.metadata;
    else err('metadata', 'must be an object');
  }
  const tasks = hasDecoder ? validateDecoderRow(raw, row, err) : validateEncoderRow(raw, row, err);
  return result(errors.length ? { tasks, errors } : { row, tasks, errors });
}

/** A list column over its per-row cap is reported once, naming the column, and not looked into. */
function overCap(value: unknown, column: string, max: number, err: Report): boolean {
  if (!Array.isArray(value) || value.length <= max) return false;
  err(column, `has ${count(value.length)} items; a row may have at most ${count(max)}`);
  return true;
}

/**
 * The row's text with its checks: code points and substring search, each computed once for the
 * row. Every string a substring rule may ask about is gathered first (the same walk the rules make),
 * so one pass over the text answers them all.
 */
class RowText {
  readonly codePoints: CodePointIndex;
  private readonly asked = new Set<string>();
  private present: Set<string> | undefined;

  constructor(
    readonly text: string,
    raw: Record<string, unknown>,
  ) {
    this.codePoints = new CodePointIndex(text);
    const ask = (v: unknown) => {
      if (typeof v === 'string') this.asked.add(v);
    };
    const entities = raw.entities;
    if (Array.isArray(entities) && entities.length <= ROW_LIMITS.entities) {
      for (const item of entities) {
        if (Array.isArray(item)) ask(item[0]);
        else if (isPlainObject(item)) ask(item.text);
      }
    }
    const relations = raw.relations;
    if (Array.isArray(relations) && relations.length <= ROW_LIMITS.relations) {
      for (const item of relations) {
        if (isPlainObject(item)) {
          ask(item.head);
          ask(item.tail);
        }
      }
    }
    const structures = raw.json_structures;
    if (Array.isArray(structures) && structures.length <= ROW_LIMITS.structures) {
      for (const instance of structures) {
        if (!isPlainObject(instance)) continue;
        for (const fields of Object.values(instance)) {
          if (!isPlainObject(fields)) continue;
          for (const v of Object.values(fields)) (Array.isArray(v) ? v : [v]).forEach(ask);
        }
      }
    }
  }

  /** `text.includes(value)`, answered for every gathered value by one scan of the text. */
  contains(value: string): boolean {
    if (!this.asked.has(value)) return this.text.includes(value);
    this.present ??= occurringIn(this.text, this.asked);
    return this.present.has(value);
  }
}

function validateEncoderRow(raw: Record<string, unknown>, row: NormalizedRow, err: Report): TaskType[] {
  const tasks: TaskType[] = [];
  const text = raw.text;
  if (!('text' in raw)) {
    err('text', 'missing required column');
    return tasks;
  }
  if (!isNonEmptyString(text)) {
    err('text', 'must be a non-empty string');
    return tasks;
  }
  row.text = text;
  const rowText = new RowText(text, raw);
  if ('label' in raw && 'labels' in raw)
    err('label', "a row has either 'label' (single-label) or 'labels' (multi-label), not both");
  if ('label' in raw) {
    if (isNonEmptyString(raw.label)) {
      row.label = raw.label;
      tasks.push('classification');
    } else err('label', 'must be a non-empty string');
  }
  if ('labels' in raw) {
    const labels = raw.labels;
    if (!Array.isArray(labels)) err('labels', 'must be an array of strings');
    else {
      labels.forEach((l, i) => {
        if (!isNonEmptyString(l)) err(`labels[${i}]`, 'must be a non-empty string');
      });
      if (new Set(labels).size !== labels.length) err('labels', 'must not repeat a label');
      row.labels = labels as string[];
      tasks.push('multi_label_classification');
    }
  }
  if ('entities' in raw) {
    const entities = validateEntities(raw.entities, rowText, err);
    if (entities) {
      row.entities = entities;
      tasks.push('ner');
    }
  }
  if ('relations' in raw) {
    const relations = validateRelations(raw.relations, rowText, err);
    if (relations) {
      row.relations = relations;
      tasks.push('relations');
    }
  }
  if ('json_structures' in raw) {
    const structures = validateStructures(raw.json_structures, rowText, err);
    if (structures) {
      row.json_structures = structures;
      tasks.push('structures');
    }
  }
  if (!['label', 'labels', 'entities', 'relations', 'json_structures'].some((c) => c in raw)) {
    err(null, 'row has no label column: add entities, label, labels, json_structures or relations');
  }
  return tasks;
}

/** "unknown key(s): a, b", naming at most a few of them. */
function unknownKeys(extra: string[]): string {
  const shown = extra.slice(0, 5).map((k) => echo(k));
  return `unknown key(s): ${shown.join(', ')}${extra.length > shown.length ? ` and ${count(extra.length - shown.length)} more` : ''}`;
}

function validateEntities(value: unknown, rowText: RowText, err: Report): EntityLabel[] | undefined {
  if (!Array.isArray(value)) {
    err('entities', 'must be an array of {text, label, start?, end?} objects or [text, label] pairs');
    return undefined;
  }
  if (overCap(value, 'entities', ROW_LIMITS.entities, err)) return undefined;
  const out: EntityLabel[] = [];
  const codePoints = rowText.codePoints;
  value.forEach((item, i) => {
    const at = `entities[${i}]`;
    let entity: EntityLabel | undefined;
    if (Array.isArray(item)) {
      if (item.length === 2 && isNonEmptyString(item[0]) && isNonEmptyString(item[1]))
        entity = { text: item[0], label: item[1] };
      else err(at, 'a pair must be [entity text, label], both non-empty strings');
    } else if (isPlainObject(item)) {
      const extra = Object.keys(item).filter((k) => !['text', 'label', 'start', 'end'].includes(k));
      if (extra.length) err(at, () => unknownKeys(extra));
      if (!isNonEmptyString(item.text)) err(`${at}.text`, 'must be a non-empty string');
      if (!isNonEmptyString(item.label)) err(`${at}.label`, 'must be a non-empty string');
      if (isNonEmptyString(item.text) && isNonEmptyString(item.label)) {
        entity = { text: item.text, label: item.label };
        const hasStart = item.start !== undefined;
        const hasEnd = item.end !== undefined;
        if (hasStart !== hasEnd) err(at, 'give both start and end, or neither');
        else if (hasStart) {
          const start = item.start;
          const end = item.end;
          if (
            !Number.isInteger(start) ||
            !Number.isInteger(end) ||
            (start as number) < 0 ||
            (end as number) <= (start as number) ||
            (end as number) > codePoints.length
          ) {
            err(at, `start/end must be integers with 0 <= start < end <= ${codePoints.length} (code points)`);
            entity = undefined;
          } else if (!codePoints.sliceEquals(start as number, end as number, entity.text)) {
            const [s, e, wanted] = [start as number, end as number, entity.text];
            // the slice is echoed by its first code points only: a wrong offset must not copy the text
            err(
              at,
              () =>
                `text[${s}:${e}] is ${echo(codePoints.slice(s, e, ROW_LIMITS.echoChars + 1), e - s)}, not ${echo(wanted)} (offsets count code points)`,
            );
            entity = undefined;
          } else {
            entity.start = start as number;
            entity.end = end as number;
          }
        }
      }
    } else err(at, 'must be an object {text, label, start?, end?} or a [text, label] pair');
    if (entity && entity.start === undefined && !rowText.contains(entity.text)) {
      const missing = entity.text;
      err(`${at}.text`, () => `${echo(missing)} is not a verbatim substring of text`);
      entity = undefined;
    }
    if (entity) out.push(entity);
  });
  return out;
}

function validateRelations(value: unknown, rowText: RowText, err: Report): RelationLabel[] | undefined {
  if (!Array.isArray(value)) {
    err('relations', 'must be an array of {relation, head, tail} objects');
    return undefined;
  }
  if (overCap(value, 'relations', ROW_LIMITS.relations, err)) return undefined;
  const out: RelationLabel[] = [];
  value.forEach((item, i) => {
    const at = `relations[${i}]`;
    if (!isPlainObject(item)) {
      err(at, 'must be an object {relation, head, tail}');
      return;
    }
    const extra = Object.keys(item).filter((k) => !['relation', 'head', 'tail'].includes(k));
    if (extra.length) err(at, () => unknownKeys(extra));
    let ok = extra.length === 0;
    if (!isNonEmptyString(item.relation)) {
      err(`${at}.relation`, 'must be a non-empty string');
      ok = false;
    }
    for (const side of ['head', 'tail'] as const) {
      const v = item[side];
      if (!isNonEmptyString(v)) {
        err(`${at}.${side}`, 'must be a non-empty string');
        ok = false;
      } else if (!rowText.contains(v)) {
        err(`${at}.${side}`, () => `${echo(v)} is not a verbatim substring of text`);
        ok = false;
      }
    }
    if (ok) out.push({ relation: item.relation as string, head: item.head as string, tail: item.tail as string });
  });
  return out;
}

function validateStructures(value: unknown, rowText: RowText, err: Report): StructureInstance[] | undefined {
  if (!Array.isArray(value)) {
    err('json_structures', 'must be a list of {structure_name: {field: value}} objects');
    return undefined;
  }
  if (overCap(value, 'json_structures', ROW_LIMITS.structures, err)) return undefined;
  const out: StructureInstance[] = [];
  let ok = true;
  value.forEach((instance, i) => {
    const at = `json_structures[${i}]`;
    if (!isPlainObject(instance) || Object.keys(instance).length === 0) {
      ok = false;
      err(at, 'must be an object {structure_name: {field: value}}');
      return;
    }
    for (const [name, fields] of Object.entries(instance)) {
      if (RESERVED_NAMES.has(name)) {
        ok = false;
        err(
          `${at}.${name}`,
          `'${name}' cannot name a structure (it is reserved on every JavaScript object); rename it`,
        );
        continue;
      }
      if (!isPlainObject(fields) || Object.keys(fields).length === 0) {
        ok = false;
        err(`${at}.${name}`, 'must be an object mapping field names to values');
        continue;
      }
      for (const [field, v] of Object.entries(fields)) {
        const fat = `${at}.${name}.${field}`;
        if (RESERVED_NAMES.has(field)) {
          ok = false;
          err(fat, `'${field}' cannot name a field (it is reserved on every JavaScript object); rename it`);
          continue;
        }
        const values = Array.isArray(v) ? v : [v];
        values.forEach((s, j) => {
          const where = Array.isArray(v) ? `${fat}[${j}]` : fat;
          if (typeof s !== 'string' || s.length === 0) {
            ok = false;
            err(where, 'must be a non-empty string (a str field) or an array of strings (a list field)');
          } else if (!rowText.contains(s)) {
            ok = false;
            err(where, () => `${echo(s)} is not a verbatim substring of text`);
          }
        });
      }
    }
    out.push(instance as StructureInstance);
  });
  return ok ? out : undefined;
}

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);

/** A chat as a list of {role, content}; reports each bad message under `field[i]`. */
function validMessages(field: string, messages: unknown, err: Report): messages is ChatMessage[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    err(field, 'must be a non-empty array of {role, content}');
    return false;
  }
  let ok = true;
  messages.forEach((m, i) => {
    const at = `${field}[${i}]`;
    if (!isPlainObject(m)) {
      ok = false;
      err(at, 'must be an object {role, content}');
      return;
    }
    if (typeof m.role !== 'string' || !ROLES.has(m.role)) {
      ok = false;
      err(`${at}.role`, 'must be one of system, user, assistant, tool');
    }
    const content = m.content;
    const blocksOk =
      Array.isArray(content) &&
      content.length > 0 &&
      content.every((b) => isPlainObject(b) && b.type === 'text' && typeof b.text === 'string');
    if (typeof content !== 'string' && !blocksOk) {
      ok = false;
      err(`${at}.content`, 'must be a string or an array of {type: "text", text} blocks');
    }
  });
  return ok;
}

/**
 * OpenAI's preference row `{input: {messages}, preferred_output: [assistant], non_preferred_output:
 * [assistant]}` as Sift's DPO row; errors name OpenAI's fields, so a file from OpenAI is fixed there.
 */
function validatePreferenceRow(raw: Record<string, unknown>, row: NormalizedRow, err: Report): TaskType[] {
  for (const c of Object.keys(raw))
    if (
      (DECODER_COLUMNS as readonly string[]).includes(c) &&
      !(OPENAI_PREFERENCE_COLUMNS as readonly string[]).includes(c)
    )
      err(c, `not allowed together with ${OPENAI_PREFERENCE_COLUMNS.join(', ')}`);
  const input = raw.input;
  if (!isPlainObject(input)) err('input', 'must be an object {messages: [...]}');
  else {
    for (const key of Object.keys(input))
      if (key !== 'messages') err(`input.${key}`, () => `unknown field ${echo(key)} (allowed: messages)`);
    if (validMessages('input.messages', input.messages, err)) {
      if (input.messages[input.messages.length - 1]?.role !== 'user')
        err('input.messages', 'must end with the user message the outputs answer');
      else row.prompt = input.messages;
    }
  }
  const chosen = singleAnswer(raw, 'preferred_output', err);
  const rejected = singleAnswer(raw, 'non_preferred_output', err);
  if (chosen !== undefined) row.chosen = chosen;
  if (rejected !== undefined) row.rejected = rejected;
  return ['dpo'];
}

/** One assistant message with non-empty text content, as a preference output holds it. */
function singleAnswer(raw: Record<string, unknown>, field: string, err: Report): string | undefined {
  const value = raw[field];
  if (!Array.isArray(value) || value.length !== 1) {
    err(field, 'must be a list of exactly one {role: "assistant", content} message');
    return undefined;
  }
  if (!validMessages(field, value, err)) return undefined;
  const [message] = value;
  if (message?.role !== 'assistant') {
    err(`${field}[0].role`, 'must be assistant');
    return undefined;
  }
  const text =
    typeof message.content === 'string' ? message.content : message.content.map((block) => block.text).join('');
  if (!isNonEmptyString(text)) {
    err(`${field}[0].content`, 'must not be empty');
    return undefined;
  }
  return text;
}

function validateDecoderRow(raw: Record<string, unknown>, row: NormalizedRow, err: Report): TaskType[] {
  if (OPENAI_PREFERENCE_COLUMNS.some((c) => c in raw)) return validatePreferenceRow(raw, row, err);
  if ('messages' in raw) {
    for (const c of ['prompt', 'chosen', 'rejected', 'answer'])
      if (c in raw) err(c, "not allowed together with 'messages'");
    const messages = raw.messages;
    if (!validMessages('messages', messages, err)) return Array.isArray(messages) && messages.length > 0 ? ['sft'] : [];
    if (!messages.some((m) => m.role === 'assistant'))
      err('messages', 'needs at least one assistant message to learn from');
    else row.messages = messages;
    return ['sft'];
  }
  const prompt = raw.prompt;
  if (Array.isArray(prompt)) {
    // a conversation so far (e.g. a worked example as earlier turns); the model answers the last user turn
    if (!validMessages('prompt', prompt, err)) return [];
    if (prompt[prompt.length - 1]?.role !== 'user') err('prompt', 'a conversation prompt must end with a user message');
    row.prompt = prompt;
  } else if (isNonEmptyString(prompt)) {
    row.prompt = prompt;
  } else {
    err(
      'prompt',
      'missing or empty (decoder rows have messages, or prompt (a string or a list of messages) with chosen/rejected or answer)',
    );
    return [];
  }
  if ('chosen' in raw || 'rejected' in raw) {
    if ('answer' in raw) err('answer', 'not allowed in a preference (chosen/rejected) row');
    for (const c of ['chosen', 'rejected'] as const) {
      if (isNonEmptyString(raw[c])) row[c] = raw[c];
      else err(c, 'must be a non-empty string');
    }
    return ['dpo'];
  }
  if ('answer' in raw) {
    if (typeof raw.answer === 'string') row.answer = raw.answer;
    else err('answer', 'must be a string');
  }
  return ['grpo'];
}

/** Dataset-wide facts, accumulated row by row so a large file never sits in memory. */
export class DatasetSummary {
  rowCount = 0;
  readonly tasks = new Set<TaskType>();
  readonly labels = new Set<string>();
  readonly entityTypes = new Set<string>();
  readonly relationTypes = new Set<string>();
  /** structure name → field → dtype, as first seen. */
  readonly structures = new Map<string, Map<string, 'str' | 'list'>>();
  private firstLabelRow: { column: 'label' | 'labels'; row: number } | undefined;

  /** Adds one valid row; returns dataset-level problems that this row reveals. */
  add(row: NormalizedRow, tasks: TaskType[], rowNumber: number): RowError[] {
    const errors: RowError[] = [];
    this.rowCount += 1;
    for (const t of tasks) this.tasks.add(t);
    const column = row.label !== undefined ? 'label' : row.labels !== undefined ? 'labels' : undefined;
    if (column) {
      if (!this.firstLabelRow) this.firstLabelRow = { column, row: rowNumber };
      else if (this.firstLabelRow.column !== column) {
        errors.push({
          row: rowNumber,
          field: column,
          message: `the dataset mixes '${this.firstLabelRow.column}' (first at row ${this.firstLabelRow.row}) and '${column}'; use one consistently`,
        });
      }
    }
    if (row.label) this.labels.add(row.label);
    for (const l of row.labels ?? []) this.labels.add(l);
    for (const e of row.entities ?? []) this.entityTypes.add(e.label);
    for (const r of row.relations ?? []) this.relationTypes.add(r.relation);
    for (const instance of row.json_structures ?? []) {
      for (const [name, fields] of Object.entries(instance)) {
        const known = this.structures.get(name) ?? new Map<string, 'str' | 'list'>();
        this.structures.set(name, known);
        for (const [field, value] of Object.entries(fields)) {
          const dtype = Array.isArray(value) ? 'list' : 'str';
          const seen = known.get(field);
          if (!seen) known.set(field, dtype);
          else if (seen !== dtype) {
            errors.push({
              row: rowNumber,
              field: `json_structures.${name}.${field}`,
              message: `is a ${dtype} here but a ${seen} in earlier rows`,
            });
          }
        }
      }
    }
    return errors;
  }

  /**
   * Problems only visible once every row is read. `rowsRead` counts every row the reader produced,
   * invalid ones included: a file whose rows all failed has rows, and already says why.
   */
  finish(rowsRead = this.rowCount): RowError[] {
    const errors: RowError[] = [];
    if (rowsRead === 0) errors.push({ row: null, field: null, message: 'the dataset has no rows' });
    const encoder = ENCODER_TASK_TYPES.some((t) => this.tasks.has(t));
    const decoder = DECODER_TASK_TYPES.filter((t) => this.tasks.has(t));
    if (encoder && decoder.length)
      errors.push({
        row: null,
        field: null,
        message: 'the dataset mixes encoder rows (text + labels) and decoder rows',
      });
    if (decoder.length > 1)
      errors.push({ row: null, field: null, message: `the dataset mixes decoder row kinds: ${decoder.join(', ')}` });
    return errors;
  }

  describe() {
    const sorted = (s: Set<string>) => [...s].sort();
    return {
      row_count: this.rowCount,
      task_types: [...this.tasks].sort(),
      label_vocabulary: sorted(this.labels),
      entity_types: sorted(this.entityTypes),
      relation_types: sorted(this.relationTypes),
      structures: Object.fromEntries(
        [...this.structures].map(([name, fields]) => [
          name,
          Object.fromEntries([...fields].map(([f, d]) => [f, { dtype: d }])),
        ]),
      ),
    };
  }
}

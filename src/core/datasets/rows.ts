/**
 * Row rules for training datasets (SPEC "Training dataset rows", DESIGN §3 "Training rows").
 * Pure functions: one raw row in, one normalized row or a list of problems out.
 */

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

export const ENCODER_TASK_TYPES: TaskType[] = ['ner', 'classification', 'multi_label_classification', 'structures', 'relations'];
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
const DECODER_COLUMNS = ['messages', 'prompt', 'chosen', 'rejected', 'answer'] as const;
const COMMON_COLUMNS = ['id', 'metadata'] as const;
const KNOWN_COLUMNS = new Set<string>([...ENCODER_COLUMNS, ...DECODER_COLUMNS, ...COMMON_COLUMNS]);

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isNonEmptyString = (v: unknown): v is string => typeof v === 'string' && v.trim().length > 0;

/** Offsets are Unicode code points (Python semantics), not UTF-16 units. */
export function codePointSlice(text: string, start: number, end: number): string {
  return Array.from(text).slice(start, end).join('');
}

export interface RowResult {
  row?: NormalizedRow;
  tasks: TaskType[];
  errors: RowError[];
}

export function validateRow(raw: unknown, rowNumber: number): RowResult {
  const errors: RowError[] = [];
  const err = (field: string | null, message: string) => errors.push({ row: rowNumber, field, message });
  if (!isPlainObject(raw)) {
    err(null, 'row must be a JSON object');
    return { tasks: [], errors };
  }
  for (const key of Object.keys(raw)) {
    if (!KNOWN_COLUMNS.has(key)) {
      err(key, `unknown column '${key}' (allowed: ${[...KNOWN_COLUMNS].join(', ')})`);
    }
  }
  const hasEncoder = ENCODER_COLUMNS.some((c) => c in raw);
  const hasDecoder = DECODER_COLUMNS.some((c) => c in raw);
  if (hasEncoder && hasDecoder) {
    err(null, 'row mixes encoder columns (text, label, entities, ...) with decoder columns (messages, prompt, ...)');
    return { tasks: [], errors };
  }
  const row: NormalizedRow = {};
  if ('id' in raw) {
    if (typeof raw['id'] === 'string' || typeof raw['id'] === 'number') row.id = raw['id'];
    else err('id', 'must be a string or a number');
  }
  if ('metadata' in raw) {
    if (isPlainObject(raw['metadata'])) row.metadata = raw['metadata'];
    else err('metadata', 'must be an object');
  }
  const tasks = hasDecoder ? validateDecoderRow(raw, row, err) : validateEncoderRow(raw, row, err);
  return errors.length ? { tasks, errors } : { row, tasks, errors };
}

type Report = (field: string | null, message: string) => void;

function validateEncoderRow(raw: Record<string, unknown>, row: NormalizedRow, err: Report): TaskType[] {
  const tasks: TaskType[] = [];
  const text = raw['text'];
  if (!('text' in raw)) {
    err('text', 'missing required column');
    return tasks;
  }
  if (!isNonEmptyString(text)) {
    err('text', 'must be a non-empty string');
    return tasks;
  }
  row.text = text;
  if ('label' in raw && 'labels' in raw) err('label', "a row has either 'label' (single-label) or 'labels' (multi-label), not both");
  if ('label' in raw) {
    if (isNonEmptyString(raw['label'])) {
      row.label = raw['label'];
      tasks.push('classification');
    } else err('label', 'must be a non-empty string');
  }
  if ('labels' in raw) {
    const labels = raw['labels'];
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
    const entities = validateEntities(raw['entities'], text, err);
    if (entities) {
      row.entities = entities;
      tasks.push('ner');
    }
  }
  if ('relations' in raw) {
    const relations = validateRelations(raw['relations'], text, err);
    if (relations) {
      row.relations = relations;
      tasks.push('relations');
    }
  }
  if ('json_structures' in raw) {
    const structures = validateStructures(raw['json_structures'], text, err);
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

function validateEntities(value: unknown, text: string, err: Report): EntityLabel[] | undefined {
  if (!Array.isArray(value)) {
    err('entities', 'must be an array of {text, label, start?, end?} objects or [text, label] pairs');
    return undefined;
  }
  const out: EntityLabel[] = [];
  const length = Array.from(text).length;
  value.forEach((item, i) => {
    const at = `entities[${i}]`;
    let entity: EntityLabel | undefined;
    if (Array.isArray(item)) {
      if (item.length === 2 && isNonEmptyString(item[0]) && isNonEmptyString(item[1])) entity = { text: item[0], label: item[1] };
      else err(at, 'a pair must be [entity text, label], both non-empty strings');
    } else if (isPlainObject(item)) {
      const extra = Object.keys(item).filter((k) => !['text', 'label', 'start', 'end'].includes(k));
      if (extra.length) err(at, `unknown key(s): ${extra.join(', ')}`);
      if (!isNonEmptyString(item['text'])) err(`${at}.text`, 'must be a non-empty string');
      if (!isNonEmptyString(item['label'])) err(`${at}.label`, 'must be a non-empty string');
      if (isNonEmptyString(item['text']) && isNonEmptyString(item['label'])) {
        entity = { text: item['text'], label: item['label'] };
        const hasStart = item['start'] !== undefined;
        const hasEnd = item['end'] !== undefined;
        if (hasStart !== hasEnd) err(at, 'give both start and end, or neither');
        else if (hasStart) {
          const start = item['start'];
          const end = item['end'];
          if (!Number.isInteger(start) || !Number.isInteger(end) || (start as number) < 0 || (end as number) <= (start as number) || (end as number) > length) {
            err(at, `start/end must be integers with 0 <= start < end <= ${length} (code points)`);
            entity = undefined;
          } else if (codePointSlice(text, start as number, end as number) !== entity.text) {
            err(at, `text[${start}:${end}] is '${codePointSlice(text, start as number, end as number)}', not '${entity.text}' (offsets count code points)`);
            entity = undefined;
          } else {
            entity.start = start as number;
            entity.end = end as number;
          }
        }
      }
    } else err(at, 'must be an object {text, label, start?, end?} or a [text, label] pair');
    if (entity && entity.start === undefined && !text.includes(entity.text)) {
      err(`${at}.text`, `'${entity.text}' is not a verbatim substring of text`);
      entity = undefined;
    }
    if (entity) out.push(entity);
  });
  return out;
}

function validateRelations(value: unknown, text: string, err: Report): RelationLabel[] | undefined {
  if (!Array.isArray(value)) {
    err('relations', 'must be an array of {relation, head, tail} objects');
    return undefined;
  }
  const out: RelationLabel[] = [];
  value.forEach((item, i) => {
    const at = `relations[${i}]`;
    if (!isPlainObject(item)) return err(at, 'must be an object {relation, head, tail}');
    const extra = Object.keys(item).filter((k) => !['relation', 'head', 'tail'].includes(k));
    if (extra.length) err(at, `unknown key(s): ${extra.join(', ')}`);
    let ok = extra.length === 0;
    if (!isNonEmptyString(item['relation'])) {
      err(`${at}.relation`, 'must be a non-empty string');
      ok = false;
    }
    for (const side of ['head', 'tail'] as const) {
      const v = item[side];
      if (!isNonEmptyString(v)) {
        err(`${at}.${side}`, 'must be a non-empty string');
        ok = false;
      } else if (!text.includes(v)) {
        err(`${at}.${side}`, `'${v}' is not a verbatim substring of text`);
        ok = false;
      }
    }
    if (ok) out.push({ relation: item['relation'] as string, head: item['head'] as string, tail: item['tail'] as string });
  });
  return out;
}

function validateStructures(value: unknown, text: string, err: Report): StructureInstance[] | undefined {
  if (!Array.isArray(value)) {
    err('json_structures', 'must be a list of {structure_name: {field: value}} objects');
    return undefined;
  }
  const out: StructureInstance[] = [];
  let ok = true;
  value.forEach((instance, i) => {
    const at = `json_structures[${i}]`;
    if (!isPlainObject(instance) || Object.keys(instance).length === 0) {
      ok = false;
      return err(at, 'must be an object {structure_name: {field: value}}');
    }
    for (const [name, fields] of Object.entries(instance)) {
      if (!isPlainObject(fields) || Object.keys(fields).length === 0) {
        ok = false;
        err(`${at}.${name}`, 'must be an object mapping field names to values');
        continue;
      }
      for (const [field, v] of Object.entries(fields)) {
        const fat = `${at}.${name}.${field}`;
        const values = Array.isArray(v) ? v : [v];
        values.forEach((s, j) => {
          const where = Array.isArray(v) ? `${fat}[${j}]` : fat;
          if (typeof s !== 'string' || s.length === 0) {
            ok = false;
            err(where, 'must be a non-empty string (a str field) or an array of strings (a list field)');
          } else if (!text.includes(s)) {
            ok = false;
            err(where, `'${s}' is not a verbatim substring of text`);
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
      return err(at, 'must be an object {role, content}');
    }
    if (typeof m['role'] !== 'string' || !ROLES.has(m['role'])) {
      ok = false;
      err(`${at}.role`, 'must be one of system, user, assistant, tool');
    }
    const content = m['content'];
    const blocksOk =
      Array.isArray(content) && content.length > 0 && content.every((b) => isPlainObject(b) && b['type'] === 'text' && typeof b['text'] === 'string');
    if (typeof content !== 'string' && !blocksOk) {
      ok = false;
      err(`${at}.content`, 'must be a string or an array of {type: "text", text} blocks');
    }
  });
  return ok;
}

function validateDecoderRow(raw: Record<string, unknown>, row: NormalizedRow, err: Report): TaskType[] {
  if ('messages' in raw) {
    for (const c of ['prompt', 'chosen', 'rejected', 'answer']) if (c in raw) err(c, "not allowed together with 'messages'");
    const messages = raw['messages'];
    if (!validMessages('messages', messages, err)) return Array.isArray(messages) && messages.length > 0 ? ['sft'] : [];
    if (!messages.some((m) => m.role === 'assistant')) err('messages', 'needs at least one assistant message to learn from');
    else row.messages = messages;
    return ['sft'];
  }
  const prompt = raw['prompt'];
  if (Array.isArray(prompt)) {
    // a conversation so far (e.g. a worked example as earlier turns); the model answers the last user turn
    if (!validMessages('prompt', prompt, err)) return [];
    if (prompt[prompt.length - 1]?.role !== 'user') err('prompt', 'a conversation prompt must end with a user message');
    row.prompt = prompt;
  } else if (isNonEmptyString(prompt)) {
    row.prompt = prompt;
  } else {
    err('prompt', 'missing or empty (decoder rows have messages, or prompt (a string or a list of messages) with chosen/rejected or answer)');
    return [];
  }
  if ('chosen' in raw || 'rejected' in raw) {
    if ('answer' in raw) err('answer', "not allowed in a preference (chosen/rejected) row");
    for (const c of ['chosen', 'rejected'] as const) {
      if (isNonEmptyString(raw[c])) row[c] = raw[c];
      else err(c, 'must be a non-empty string');
    }
    return ['dpo'];
  }
  if ('answer' in raw) {
    if (typeof raw['answer'] === 'string') row.answer = raw['answer'];
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
            errors.push({ row: rowNumber, field: `json_structures.${name}.${field}`, message: `is a ${dtype} here but a ${seen} in earlier rows` });
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
    if (encoder && decoder.length) errors.push({ row: null, field: null, message: 'the dataset mixes encoder rows (text + labels) and decoder rows' });
    if (decoder.length > 1) errors.push({ row: null, field: null, message: `the dataset mixes decoder row kinds: ${decoder.join(', ')}` });
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
        [...this.structures].map(([name, fields]) => [name, Object.fromEntries([...fields].map(([f, d]) => [f, { dtype: d }]))]),
      ),
    };
  }
}

import type { ClassificationRoute } from './extraction/types';
import { inferencePartition as PARTITION } from './recordKeys';
import { ITEM_EXISTS, type Clause } from './ports';
import type { Services } from './context';
import { codePointSlice } from './datasets/rows';
import { NotFoundError, ValidationError, notFoundAsUndefined, type FieldError } from './errors';
import { isUuid, newUlid } from './ids';
import { getProject } from './projects';

export type InferenceTask = 'ner' | 'classification' | 'structures' | 'relations' | 'generate';

export interface InferenceInput {
  text?: string | string[];
  schema?: {
    entities?: string[] | Record<string, string>;
    classifications?: { task: string; labels: string[] }[];
    structures?: Record<string, unknown>;
    relations?: unknown[];
  };
  messages?: unknown[];
  threshold?: number;
}

export interface Feedback {
  verdict: 'correct' | 'incorrect';
  corrected_output: Record<string, unknown> | null;
  created_at: string;
}

export interface InferenceRecord {
  inference_id: string;
  /** The model string exactly as the caller sent it. */
  model_id: string;
  type: 'encoder' | 'decoder';
  tasks: InferenceTask[];
  project_id: string | null;
  training_job_id: string | null;
  endpoint: string;
  input: InferenceInput;
  output: unknown;
  /** Encoder classification tasks: the head that answered each (docs/reference/encoder.md "Pooled classifier"); absent otherwise. */
  routes?: Record<string, ClassificationRoute>;
  usage: Record<string, number>;
  latency_ms: number;
  created_at: string;
  feedback: Feedback | null;
}

export const newInferenceId = (): string => `inf_${newUlid()}`;

/**
 * Persists an inference unless the caller said `store: false` (then nothing is written, but the id
 * is still returned and tokens still billed by the caller of this function).
 */
export async function storeInference(
  svc: Services,
  teamId: string,
  record: Omit<InferenceRecord, 'feedback' | 'created_at'>,
  store: boolean,
): Promise<void> {
  if (!store) return;
  const created = svc.now();
  const full: InferenceRecord = { ...record, created_at: created.toISOString(), feedback: null };
  const expiresAt = Math.floor(created.getTime() / 1000) + svc.config.inferenceRetentionDays * 86400;
  const put = () =>
    svc.records.put({ pk: PARTITION(teamId), sk: record.inference_id, expiresAt }, full, { ifAbsent: true });
  if (!svc.hotPath) return put();
  // a long-lived server answers first and writes right after (hotPath.ts); reads here wait for it.
  // setImmediate: even building the request (marshalling, signing) waits until the answer is sent.
  svc.hotPath.writes.add(record.inference_id, new Promise<void>((next) => setImmediate(next)).then(put));
}

export interface InferenceFilter {
  limit: number;
  offset: number;
  model_id?: string | undefined;
  task?: string | undefined;
  project_id?: string | undefined;
  training_job_id?: string | undefined;
}

/** Newest first. Filters run in the store; offset/limit are applied over the filtered sequence. */
export async function listInferences(svc: Services, teamId: string, filter: InferenceFilter) {
  await svc.hotPath?.writes.drain();
  if (filter.project_id !== undefined && !isUuid(filter.project_id)) {
    // a project name filters like its id (records store the id); an unknown name matches nothing
    const project = await getProject(svc, teamId, filter.project_id).catch(notFoundAsUndefined);
    filter = { ...filter, project_id: project?.id ?? filter.project_id };
  }
  const clauses: Clause[] = [];
  for (const field of ['model_id', 'project_id', 'training_job_id'] as const) {
    const v = filter[field];
    if (v !== undefined) clauses.push({ attr: field, equals: v });
  }
  if (filter.task !== undefined) clauses.push({ attr: 'tasks', contains: filter.task });
  const wanted = filter.offset + filter.limit + 1;
  const found: InferenceRecord[] = [];
  let startKey: Record<string, unknown> | undefined;
  do {
    const page: { items: InferenceRecord[]; nextKey?: Record<string, unknown> } =
      await svc.records.query<InferenceRecord>(PARTITION(teamId), {
        newestFirst: true,
        limit: Math.min(1000, wanted * 2),
        ...(startKey ? { startKey } : {}),
        ...(clauses.length ? { filter: clauses } : {}),
      });
    found.push(...page.items);
    startKey = page.nextKey;
  } while (startKey && found.length < wanted);
  const items = found.slice(filter.offset, filter.offset + filter.limit);
  return { items, limit: filter.limit, offset: filter.offset, has_more: found.length > filter.offset + filter.limit };
}

export async function getInference(svc: Services, teamId: string, id: string): Promise<InferenceRecord> {
  await svc.hotPath?.writes.settled(id);
  const found = /^inf_[0-9A-HJKMNP-TV-Z]{26}$/.test(id)
    ? await svc.records.get<InferenceRecord>(PARTITION(teamId), id)
    : undefined;
  if (!found)
    throw new NotFoundError(`Inference '${id}' not found (never stored, stored with store:false, or expired)`);
  return found;
}

export async function submitFeedback(
  svc: Services,
  teamId: string,
  id: string,
  input: { verdict: 'correct' | 'incorrect'; corrected_output?: Record<string, unknown> | undefined },
): Promise<InferenceRecord> {
  const inference = await getInference(svc, teamId, id);
  if (input.verdict === 'incorrect' && !input.corrected_output) {
    throw ValidationError.field(['body', 'corrected_output'], 'required when verdict is "incorrect"', 'missing');
  }
  if (input.verdict === 'correct' && input.corrected_output) {
    throw ValidationError.field(
      ['body', 'corrected_output'],
      'only allowed when verdict is "incorrect"',
      'extra_forbidden',
    );
  }
  if (input.corrected_output) {
    const problems = checkCorrectedOutput(inference, input.corrected_output);
    if (problems.length) throw new ValidationError(problems);
  }
  const feedback: Feedback = {
    verdict: input.verdict,
    corrected_output: input.corrected_output ?? null,
    created_at: svc.now().toISOString(),
  };
  return svc.records.update<InferenceRecord>(PARTITION(teamId), id, { set: { feedback }, condition: ITEM_EXISTS });
}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `corrected_output` must have the shape of the inference's own output, and only its heads. */
function checkCorrectedOutput(inf: InferenceRecord, corrected: Record<string, unknown>): FieldError[] {
  const errs: FieldError[] = [];
  const at = (...loc: (string | number)[]) => ['body', 'corrected_output', ...loc];
  const bad = (loc: (string | number)[], msg: string) => errs.push({ loc, msg, type: 'value_error' });
  const allowed: Record<string, InferenceTask> = {
    entities: 'ner',
    classifications: 'classification',
    structures: 'structures',
    relations: 'relations',
    completion: 'generate',
  };
  const text = typeof inf.input.text === 'string' ? inf.input.text : undefined;
  for (const key of Object.keys(corrected)) {
    const task = allowed[key];
    if (!task) bad(at(key), `unknown key; allowed: ${Object.keys(allowed).join(', ')}`);
    else if (!inf.tasks.includes(task)) bad(at(key), `this inference ran ${inf.tasks.join(', ')}, not ${task}`);
  }
  if (errs.length) return errs;

  if ('entities' in corrected) {
    const entities = corrected.entities;
    if (!Array.isArray(entities)) bad(at('entities'), 'must be a list of {text, label, start, end}');
    else
      entities.forEach((e, i) => {
        if (
          !isObj(e) ||
          typeof e.text !== 'string' ||
          typeof e.label !== 'string' ||
          !Number.isInteger(e.start) ||
          !Number.isInteger(e.end)
        ) {
          bad(at('entities', i), 'must be {text: string, label: string, start: integer, end: integer}');
          return;
        }
        const extra = Object.keys(e).filter((k) => !['text', 'label', 'start', 'end'].includes(k));
        if (extra.length) bad(at('entities', i), `unknown key(s): ${extra.join(', ')}`);
        if (text !== undefined && codePointSlice(text, e.start as number, e.end as number) !== e.text) {
          bad(at('entities', i), `text[${e.start}:${e.end}] (code points) is not '${e.text}'`);
        }
      });
  }
  if ('classifications' in corrected) {
    const cls = corrected.classifications;
    const heads = new Map((inf.input.schema?.classifications ?? []).map((c) => [c.task, new Set(c.labels)]));
    if (!isObj(cls)) bad(at('classifications'), 'must map each classification task to a label or a list of labels');
    else
      for (const [task, value] of Object.entries(cls)) {
        const labels = heads.get(task);
        if (!labels) {
          bad(
            at('classifications', task),
            `not a classification task of this inference (${[...heads.keys()].join(', ')})`,
          );
          continue;
        }
        const given = Array.isArray(value) ? value : [value];
        given.forEach((l, i) => {
          if (typeof l !== 'string' || !labels.has(l))
            bad(
              at('classifications', task, ...(Array.isArray(value) ? [i] : [])),
              `'${String(l)}' is not one of the request's labels`,
            );
        });
      }
  }
  if ('completion' in corrected && typeof corrected.completion !== 'string') bad(at('completion'), 'must be a string');
  for (const key of ['structures', 'relations'] as const) {
    if (key in corrected && !isObj(corrected[key])) bad(at(key), 'must be an object keyed like the inference output');
  }
  return errs;
}

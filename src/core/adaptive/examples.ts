/**
 * Adaptive loop, step 1 (pure): logged encoder inferences → training examples with an uncertainty.
 *
 * - A trace with feedback is gold: `correct` confirms the model's output, `incorrect` replaces the
 *   heads it corrects.
 * - A trace without feedback is *informative* when the model was unsure (entities or labels scored
 *   near the threshold, top class barely ahead). Those are what the loop asks people to review; their
 *   own guesses are never trained on, that would reinforce the model's mistakes.
 * - A trace the model was sure about is *confident*: replayed as-is so a candidate trained on a few
 *   corrections does not forget what already worked.
 *
 * Only NER and (one-task) classification heads become rows: those are the heads whose outputs map
 * one-to-one onto dataset columns (`entities`, `label`/`labels`).
 */
import { createHash } from 'node:crypto';
import type { EntityLabel, NormalizedRow } from '../datasets/rows';
import type { InferenceRecord } from '../inferences';

export interface AdaptivePolicy {
  /** Uncertainty at or above which a trace is informative. */
  informativeAt: number;
  /** Uncertainty below which a trace is confident enough to replay. */
  confidentBelow: number;
}

export const DEFAULT_POLICY: AdaptivePolicy = { informativeAt: 0.5, confidentBelow: 0.2 };

export interface TraceExample {
  inference_id: string;
  created_at: string;
  /** The row to train or evaluate on (labels from feedback, or the model's confident output). */
  row: NormalizedRow;
  kind: 'gold' | 'informative' | 'confident' | 'neutral';
  /** 0 = sure, 1 = coin flip. */
  uncertainty: number;
  feedback_at: string | null;
}

interface ScoredEntity {
  text: string;
  label: string;
  start: number;
  end: number;
  score?: number;
}
interface ScoredLabel {
  label: string;
  score?: number;
}
type EncoderOutput = { entities?: ScoredEntity[]; classifications?: Record<string, ScoredLabel[]> };
type ClassificationSchema = { task: string; labels: string[]; multi_label?: boolean };

const clamp01 = (x: number) => Math.min(1, Math.max(0, x));

/** How close a kept prediction came to being dropped: 1 at the threshold, 0 at certainty. */
const nearThreshold = (score: number, threshold: number) =>
  clamp01(1 - (score - threshold) / Math.max(1e-6, 1 - threshold));

export function nerUncertainty(entities: ScoredEntity[], threshold: number): number {
  let u = 0;
  const seen = new Map<string, string>();
  for (const e of entities) {
    if (typeof e.score === 'number') u = Math.max(u, nearThreshold(e.score, threshold));
    // the same span under two labels: the model could not decide what it is
    const key = `${e.start}:${e.end}`;
    const other = seen.get(key);
    if (other !== undefined && other !== e.label) u = 1;
    seen.set(key, e.label);
  }
  return u;
}

export function classificationUncertainty(labels: ScoredLabel[], multiLabel: boolean, threshold: number): number {
  const scores = labels.map((l) => l.score).filter((s): s is number => typeof s === 'number');
  if (!scores.length) return multiLabel ? 0 : 1; // single-label with no answer: it abstained
  if (multiLabel) return Math.max(...scores.map((s) => nearThreshold(s, threshold)));
  // single-label scores are a softmax: a top class at 0.5 or below is a toss-up
  return clamp01((1 - Math.max(...scores)) / 0.5);
}

const plainEntities = (entities: ScoredEntity[]): EntityLabel[] =>
  entities.map((e) => ({ text: e.text, label: e.label, start: e.start, end: e.end }));

/** The single classification task a row can hold, if the trace asked for exactly one. */
function classificationTask(record: InferenceRecord): ClassificationSchema | undefined {
  const tasks = (record.input.schema?.classifications ?? []) as ClassificationSchema[];
  return tasks.length === 1 ? tasks[0] : undefined;
}

function rowFor(
  text: string,
  output: EncoderOutput,
  record: InferenceRecord,
  cls: ClassificationSchema | undefined,
): NormalizedRow | undefined {
  const row: NormalizedRow = { text };
  if (record.tasks.includes('ner') && Array.isArray(output.entities)) row.entities = plainEntities(output.entities);
  if (cls) {
    // model outputs and corrections alike are lists of {label} here (goldOutput)
    const value = output.classifications?.[cls.task];
    if (Array.isArray(value)) {
      const labels = value.map((v) => v.label).filter((l) => typeof l === 'string');
      if (cls.multi_label) row.labels = labels;
      else if (labels.length) row.label = labels[0]!;
    }
  }
  return row.entities || row.label || row.labels ? row : undefined;
}

/** Feedback's corrected heads over the model's output (heads the caller didn't correct stand). */
function goldOutput(output: EncoderOutput, corrected: Record<string, unknown> | null): EncoderOutput {
  if (!corrected) return output;
  const out: EncoderOutput = { ...output };
  if (Array.isArray(corrected.entities)) out.entities = corrected.entities as ScoredEntity[];
  if (corrected.classifications && typeof corrected.classifications === 'object') {
    const fixed: Record<string, ScoredLabel[]> = { ...(output.classifications ?? {}) };
    for (const [task, v] of Object.entries(corrected.classifications as Record<string, unknown>)) {
      fixed[task] = (Array.isArray(v) ? v : [v]).map((label) => ({ label: String(label) }));
    }
    out.classifications = fixed;
  }
  return out;
}

/** One trace → its examples (one per text of a batch; a batch's feedback can't be split per text). */
export function examplesFromTrace(record: InferenceRecord, policy: AdaptivePolicy = DEFAULT_POLICY): TraceExample[] {
  if (record.type !== 'encoder') return [];
  const cls = classificationTask(record);
  if (!record.tasks.includes('ner') && !cls) return [];
  const threshold = typeof record.input.threshold === 'number' ? record.input.threshold : 0.5;
  const texts = Array.isArray(record.input.text)
    ? record.input.text
    : typeof record.input.text === 'string'
      ? [record.input.text]
      : [];
  const outputs = (Array.isArray(record.output) ? record.output : [record.output]) as EncoderOutput[];
  const feedback = !Array.isArray(record.input.text) ? record.feedback : null;
  const examples: TraceExample[] = [];
  texts.forEach((text, i) => {
    const output = outputs[i];
    if (!output || typeof output !== 'object') return;
    const base = { inference_id: record.inference_id, created_at: record.created_at };
    if (feedback) {
      const row = rowFor(text, goldOutput(output, feedback.corrected_output), record, cls);
      if (row) examples.push({ ...base, row, kind: 'gold', uncertainty: 0, feedback_at: feedback.created_at });
      return;
    }
    let u = 0;
    if (record.tasks.includes('ner') && output.entities) u = Math.max(u, nerUncertainty(output.entities, threshold));
    if (cls && output.classifications?.[cls.task])
      u = Math.max(
        u,
        classificationUncertainty(output.classifications[cls.task]!, cls.multi_label === true, threshold),
      );
    const row = rowFor(text, output, record, cls);
    if (!row) return;
    const kind = u >= policy.informativeAt ? 'informative' : u < policy.confidentBelow ? 'confident' : 'neutral';
    examples.push({ ...base, row, kind, uncertainty: Math.round(u * 1e4) / 1e4, feedback_at: null });
  });
  return examples;
}

/** Which split a gold example belongs to: fixed per inference, so a held-out trace is never trained on later. */
export function isHeldOut(inferenceId: string, text: string, everyNth = 5): boolean {
  const h = createHash('sha256').update(`${inferenceId}\n${text}`).digest();
  return h.readUInt32BE(0) % everyNth === 0;
}

export interface AdaptiveSelection {
  train: NormalizedRow[];
  holdout: NormalizedRow[];
  /** Informative traces nobody has reviewed yet, most uncertain first. */
  review: { inference_id: string; uncertainty: number }[];
  counts: {
    traces: number;
    gold: number;
    new_gold: number;
    informative: number;
    confident: number;
    replay: number;
    train: number;
    holdout: number;
  };
}

/**
 * Splits the examples of a project's traces: gold rows into train/holdout (deterministic), confident
 * rows replayed up to the number of gold training rows, the latest label per text winning.
 */
export function selectExamples(
  traces: number,
  examples: TraceExample[],
  since: string | null,
  reviewLimit = 50,
): AdaptiveSelection {
  const byText = new Map<string, TraceExample>();
  const rank = (e: TraceExample) => (e.kind === 'gold' ? 2 : 1);
  for (const e of [...examples].sort((a, b) => a.created_at.localeCompare(b.created_at))) {
    const prev = byText.get(e.row.text!);
    if (!prev || rank(e) >= rank(prev)) byText.set(e.row.text!, e);
  }
  const unique = [...byText.values()];
  const gold = unique.filter((e) => e.kind === 'gold');
  const holdout = gold.filter((e) => isHeldOut(e.inference_id, e.row.text!));
  // at least two held-out rows when there are enough to spare: a one-row F1 says nothing
  for (const e of gold) {
    if (holdout.length >= 2 || gold.length - holdout.length <= 2) break;
    if (!holdout.includes(e)) holdout.push(e);
  }
  const trainGold = gold.filter((e) => !holdout.includes(e));
  const confident = unique
    .filter((e) => e.kind === 'confident')
    .sort((a, b) => b.created_at.localeCompare(a.created_at));
  const replay = confident.slice(0, trainGold.length);
  const informative = unique.filter((e) => e.kind === 'informative');
  return {
    train: [...trainGold, ...replay].map((e) => e.row),
    holdout: holdout.map((e) => e.row),
    review: informative
      .sort((a, b) => b.uncertainty - a.uncertainty || b.created_at.localeCompare(a.created_at))
      .slice(0, reviewLimit)
      .map((e) => ({ inference_id: e.inference_id, uncertainty: e.uncertainty })),
    counts: {
      traces,
      gold: gold.length,
      new_gold: gold.filter((e) => since === null || (e.feedback_at ?? '') > since).length,
      informative: informative.length,
      confident: confident.length,
      replay: replay.length,
      train: trainGold.length + replay.length,
      holdout: holdout.length,
    },
  };
}

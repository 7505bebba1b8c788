/**
 * Long texts (gliner2 `extract_long` semantics): overlapping word windows that fit the encoder with the
 * prompt, and the merge of their results back into document offsets; and the splitting of a request's
 * texts, which yields to the event loop so a long one does not hold other requests.
 */
import { resolveDisallow, type Span } from './decode';
import type { PromptTask, EncoderSchema } from './schema';
import { CodePoints, normalizeText, splitWords, type SplitText } from './text';
import type { PromptTokens } from './tokenize';
import {
  EncoderInputError,
  GROUP_TEXT_TOKENS,
  type ChoiceValue,
  type EncodedRecord,
  type EncoderResult,
  type FieldValue,
  type FragmentConfig,
  type InferOptions,
  type LabelScore,
  type RelationInstance,
} from './types';

/** gliner2 `extract_long`'s window: 200 words with 32 of overlap, for a 512-token encoder. */
export const REFERENCE_WINDOW = { tokens: 512, words: 200, overlap: 32 } as const;
/** The smallest `window_tokens` a model may set: room for a prompt and the GROUP_TEXT_TOKENS label groups leave a text. */
export const MIN_WINDOW_TOKENS = 2 * GROUP_TEXT_TOKENS;

/**
 * How one model reads a long text (docs/reference/encoder.md "Long texts"): `tokens`, the most the
 * encoder takes in one pass (prompt + text); `words` and `overlap`, the word windows a longer text is
 * cut into (halved while a window does not fit `tokens` with the prompt).
 */
export interface WindowPlan {
  tokens: number;
  words: number;
  overlap: number;
}

/**
 * The window of a model, from its `onnx/gliner2_config.json`: `window_tokens` when set, else
 * `max_position_embeddings` for a backbone with absolute position embeddings (BERT: a hard limit), and
 * 512 for one with relative attention only (`relative_positions`, DeBERTa-v3: no hard limit, but
 * attention's memory and time grow with the square of the window). Words scale with the tokens from
 * gliner2's 200 words per 512 tokens. A `window_tokens` an absolute-position model cannot take, or
 * under MIN_WINDOW_TOKENS, is refused when the model loads, never cut down silently.
 */
export function windowPlan(
  config: Pick<FragmentConfig, 'max_position_embeddings' | 'window_tokens' | 'relative_positions'>,
): WindowPlan {
  const maxPos = config.max_position_embeddings;
  const relative = config.relative_positions === true;
  const set = config.window_tokens;
  if (set !== undefined && set !== null) {
    if (!Number.isInteger(set) || set < MIN_WINDOW_TOKENS)
      throw new Error(
        `window_tokens must be an integer of at least ${MIN_WINDOW_TOKENS}; the model's config has ${set}`,
      );
    if (!relative && set > maxPos)
      throw new Error(
        `window_tokens ${set} exceeds max_position_embeddings ${maxPos}: this backbone has absolute position embeddings (no position past ${maxPos})`,
      );
  }
  const tokens = set ?? (relative ? REFERENCE_WINDOW.tokens : maxPos);
  const words = Math.max(8, Math.round((REFERENCE_WINDOW.words * tokens) / REFERENCE_WINDOW.tokens));
  return { tokens, words, overlap: REFERENCE_WINDOW.overlap };
}

/**
 * Word ranges `[start, end)` of `size`-word windows over `n` words, each starting `size - overlap` after
 * the last (overlap at most a quarter of the window), the last one ending at `n`: every word is in a window.
 */
export function wordWindows(n: number, size: number, overlapWanted: number): Array<[number, number]> {
  const overlap = Math.min(overlapWanted, Math.floor(size / 4));
  const out: Array<[number, number]> = [];
  for (let sw = 0; sw < n; sw += size - overlap) {
    const ew = Math.min(sw + size, n);
    out.push([sw, ew]);
    if (ew === n) break;
  }
  return out;
}

/**
 * Main-thread work between two yields to the event loop, in characters split (a 100,000-character
 * text splits in tens of milliseconds on one core). The splitting, tokenizing and record building of
 * a long text run on the event loop; without yields, four 100,000-character texts in one request held
 * every other request of the process for seconds (security review F1).
 */
export const YIELD_EVERY_CHARS = 20_000;

/** Lets the event loop run I/O and other requests (a macrotask turn: awaiting a resolved promise does not). */
export const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/**
 * Each text normalized and split (gliner2's `_normalize_text` and word splitter), yielding to the
 * event loop after every YIELD_EVERY_CHARS characters: one request may carry 400,000.
 */
export async function splitTexts(texts: string[]): Promise<Array<SplitText & { norm: string }>> {
  const out: Array<SplitText & { norm: string }> = [];
  let sinceYield = 0;
  for (const t of texts) {
    if (sinceYield >= YIELD_EVERY_CHARS) {
      sinceYield = 0;
      await yieldToEventLoop();
    }
    const norm = normalizeText(t);
    out.push({ norm, ...splitWords(norm) });
    sinceYield += norm.length;
  }
  return out;
}

/**
 * Windows of `chunkWords` words (default: the model's `window.words`, 200 at 512 tokens; overlap
 * `chunkOverlap`, default 32), halved until each fits `window.tokens` with the prompt.
 *
 * Each window's text is re-split as gliner2's `extract_long` does: the window's last word can differ
 * from the document's (a URL takes the "." appended to the window), so slicing the document's words
 * would break parity. The work stays linear: windows overlap by at most a quarter of their words, so
 * each character is split at most twice per window size tried. The loop yields to the event loop
 * before each window (at most `chunkWords` words to split, tokenize and build), so other requests
 * interleave with a long text's hundreds of windows.
 */
export async function textWindows(
  tok: PromptTokens,
  ti: number,
  original: string,
  tasks: PromptTask[],
  prefix: string[],
  opts: InferOptions,
  window: WindowPlan,
): Promise<EncodedRecord[]> {
  const cps = new CodePoints(original);
  const words = splitWords(original);
  let size = opts.chunkWords ?? window.words;
  const overlapWanted = opts.chunkOverlap ?? window.overlap;
  for (;;) {
    const out: EncodedRecord[] = [];
    let ok = true;
    for (const [sw, ew] of wordWindows(words.starts.length, size, overlapWanted)) {
      await yieldToEventLoop();
      const startChar = words.starts[sw]!;
      const text = normalizeText(cps.slice(startChar, words.ends[ew - 1]!));
      const sp = splitWords(text);
      // gliner2 runs windows with max_len = window size: the appended "." of a full window is cut
      for (const k of ['words', 'raw', 'starts', 'ends'] as const) (sp[k] as unknown[]).splice(size);
      await tok.tokenizeAll(sp.words);
      const rec = tok.build(
        { textIndex: ti, text, offset: startChar, words: sp.words, starts: sp.starts, ends: sp.ends, prefix },
        tasks,
      );
      if (rec.ids.length > window.tokens) {
        ok = false;
        break;
      }
      out.push(rec);
    }
    if (ok) return out;
    if (size <= 8) throw new EncoderInputError('text cannot be split into windows that fit the model with this schema');
    size = Math.floor(size / 2);
  }
}

/** Merges the results of a text's overlapping windows (gliner2 `merge_chunk_results`, disallow policy). */
export function mergeChunks(parts: EncoderResult[], original: CodePoints, schema: EncoderSchema): EncoderResult {
  const fix = (s: Span): Span => ({ ...s, text: original.slice(s.start, s.end) });
  const out: EncoderResult = { classifications: {}, structures: {}, relations: {} };
  if (parts.some((p) => p.entities)) {
    out.entities = {};
    for (const e of schema.entities) {
      const all = parts.flatMap((p) => p.entities?.[e.name] ?? []).map(fix);
      out.entities[e.name] = resolveDisallow(all);
    }
  }
  for (const c of schema.classifications) {
    const cands = parts.map((p) => p.classifications[c.task]).filter((x): x is LabelScore[] => !!x && x.length > 0);
    if (!cands.length) continue;
    out.classifications[c.task] = cands.reduce((a, b) => ((b[0]?.score ?? 0) > (a[0]?.score ?? 0) ? b : a));
  }
  const key = (v: unknown): string => JSON.stringify(v, (k, x) => (k === 'score' ? undefined : x));
  for (const s of schema.structures) {
    const seen = new Map<string, number>();
    const list: Array<Record<string, FieldValue>> = [];
    for (const p of parts)
      for (const inst of p.structures[s.name] ?? []) {
        const fixed: Record<string, FieldValue> = {};
        for (const [f, v] of Object.entries(inst))
          fixed[f] = Array.isArray(v)
            ? ((v as Array<Span | ChoiceValue>).map((x) => ('start' in x ? fix(x) : x)) as FieldValue)
            : v && 'start' in v
              ? fix(v)
              : v;
        const k = key(fixed);
        if (!seen.has(k)) {
          seen.set(k, list.length);
          list.push(fixed);
        }
      }
    out.structures[s.name] = list;
  }
  for (const r of schema.relations) {
    const seen = new Map<string, number>();
    const list: RelationInstance[] = [];
    for (const p of parts)
      for (const inst of p.relations[r.name] ?? []) {
        const fixed = { head: fix(inst.head), tail: fix(inst.tail) };
        const k = key(fixed);
        const at = seen.get(k);
        if (at === undefined) {
          seen.set(k, list.length);
          list.push(fixed);
        } else if (Math.max(fixed.head.score, fixed.tail.score) > Math.max(list[at]!.head.score, list[at]!.tail.score))
          list[at] = fixed;
      }
    out.relations[r.name] = list;
  }
  return out;
}

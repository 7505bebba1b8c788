/**
 * GLiNER2 span-architecture engine over the exported ONNX fragments (containers/training
 * export_onnx.py; research/gliner2.md §5). All pre/post-processing follows gliner2 2.1.0:
 * per-pre-token tokenization, `[P]/[E]/[C]/[R]/[L]` first-subword gathering, first-subword word
 * pooling, count prediction + unrolled count embedding sliced to C, sigmoid span scores,
 * confidence-first greedy de-overlap, choice prefix, single/multi-label classification.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
// Type-only: the native package loads on first use, so Lambda bundles never carry it.
import type { Tokenizer } from 'tokenizers';
import { createSessions, type SessionSet } from './sessions';
import { finalizeSpans, resolveDisallow, sigmoid, type Span } from './decode';
import { buildChoicePrefix, buildPromptTasks, SPECIAL, type ClassificationSpec, type EncoderSchema, type PromptTask } from './schema';
import { CodePoints, normalizeText, pyStrip, splitWords } from './text';

export type { Span } from './decode';

export interface FragmentConfig {
  hidden_size: number;
  max_width: number;
  max_count: number;
  counting_layer: string;
  max_position_embeddings: number;
  pad_token_id: number;
  special_tokens: Record<string, number>;
}

export type Precision = 'fp32' | 'int8';

export interface ChoiceValue {
  text: string;
  score: number;
}
export type FieldValue = Span | Span[] | ChoiceValue | ChoiceValue[] | null;
export interface RelationInstance {
  head: Span;
  tail: Span;
}
export interface LabelScore {
  label: string;
  score: number;
}

/** Raw per-text result (before API formatting). Keys present only for requested heads. */
export interface EncoderResult {
  /** label → spans (greedy non-overlap per label, ranked by score); absent when no entity types. */
  entities?: Record<string, Span[]>;
  classifications: Record<string, LabelScore[]>;
  structures: Record<string, Array<Record<string, FieldValue>>>;
  relations: Record<string, RelationInstance[]>;
}

export interface InferOptions {
  threshold?: number;
  /** Texts per encoder pass (gliner2 default 8). */
  batchSize?: number;
  /** Word windows for texts longer than the encoder's position limit. */
  chunkWords?: number;
  chunkOverlap?: number;
  /**
   * Prompt tokens per label group ("Large label sets" in docs/encoder.md). Unset: labels are split only
   * for a text that does not fit with the whole prompt when that prompt leaves less than
   * `GROUP_TEXT_TOKENS` for text. Set: any prompt longer than this is split, for every text (tests).
   */
  labelGroupTokens?: number;
}

export interface InferOutput {
  results: EncoderResult[];
  /** Encoder input tokens over all texts (and chunks). */
  inputTokens: number;
  /** Per text: how many chunks it was split into (1 = not chunked; the most over its label groups). */
  chunks: number[];
  /** Per text: how many label groups the schema was split into for it (1 = the whole prompt at once). */
  groups: number[];
}

/**
 * Room for text that label groups leave (tokens). A prompt longer than `max_position_embeddings` minus
 * this is split into label groups for the texts that do not fit with it, so a long text still gets
 * windows of at least this many tokens.
 */
export const GROUP_TEXT_TOKENS = 128;

/** A classification label's score with the classifier's raw logit (label-group runs). */
interface RawLabelScore extends LabelScore {
  logit: number;
}

/** The smallest parts a schema is split into: one entity type / classification label, or a whole structure / relation. */
type Unit =
  | { kind: 'structure'; name: string }
  | { kind: 'entity'; name: string }
  | { kind: 'relation'; name: string }
  | { kind: 'label'; task: number; label: string };

interface Record_ {
  textIndex: number;
  text: string; // normalized text the words index into (chunk text for chunks)
  offset: number; // code-point offset of `text` in the original
  words: string[];
  starts: number[];
  ends: number[];
  prefix: string[];
  ids: number[];
  wordPos: number[]; // first-subword position of each (prefix + text) word
  taskPos: number[][]; // per task: [P] then field markers
}

const TOKEN_CACHE_MAX = 50_000;

export class EncoderModel {
  readonly dir: string;
  readonly config: FragmentConfig;
  readonly precision: Precision;
  readonly bytes: number;
  private readonly tokenizer: Tokenizer;
  private readonly cache = new Map<string, number[]>();
  private constructor(
    dir: string,
    config: FragmentConfig,
    precision: Precision,
    bytes: number,
    tokenizer: Tokenizer,
    private readonly sessions: SessionSet,
    /** How spans are scored: `span_scores.onnx` (one graph to probabilities) or `span_rep.onnx` + host dot products (older exports). */
    readonly scorer: 'span_scores' | 'span_rep' = 'span_rep',
    /** count_embed_c1.onnx: the count embedding for slot 0 only (entities, C = 1). */
    private readonly hasC1 = false,
  ) {
    this.dir = dir;
    this.config = config;
    this.precision = precision;
    this.bytes = bytes;
    this.tokenizer = tokenizer;
  }

  /** Files an exported model directory must hold. */
  static requiredFiles(precision: Precision = 'fp32'): string[] {
    return [
      'tokenizer.json',
      'onnx/gliner2_config.json',
      precision === 'int8' ? 'onnx/encoder.int8.onnx' : 'onnx/encoder.onnx',
      'onnx/span_rep.onnx',
      'onnx/count_pred.onnx',
      'onnx/count_embed.onnx',
      'onnx/classifier.onnx',
    ];
  }

  static async load(dir: string, opts: { precision?: Precision; threads?: number; scorer?: 'span_scores' | 'span_rep' } = {}): Promise<EncoderModel> {
    const precision = opts.precision ?? 'fp32';
    const missing = EncoderModel.requiredFiles(precision).filter((f) => !existsSync(join(dir, f)));
    if (missing.length) throw new Error(`encoder model at ${dir} is missing ${missing.join(', ')}`);
    const config = JSON.parse(readFileSync(join(dir, 'onnx/gliner2_config.json'), 'utf8')) as FragmentConfig;
    if (config.counting_layer !== 'count_lstm' && config.counting_layer !== 'count_lstm_v2')
      throw new Error(`unsupported counting_layer ${config.counting_layer}`);
    const encFile = precision === 'int8' ? 'onnx/encoder.int8.onnx' : 'onnx/encoder.onnx';
    const files = [encFile, 'onnx/span_rep.onnx', 'onnx/count_pred.onnx', 'onnx/count_embed.onnx', 'onnx/classifier.onnx'];
    // span_scores.onnx (sift_trainer.export_scorer) when exported: no per-span MLP, no host scoring loops
    const scorer = opts.scorer !== 'span_rep' && existsSync(join(dir, 'onnx/span_scores.onnx')) && existsSync(join(dir, 'onnx/count_embed_c1.onnx')) ? 'span_scores' : 'span_rep';
    if (scorer === 'span_scores') files.splice(1, 1, 'onnx/span_scores.onnx');
    const sessions = await createSessions(
      {
        encoder: join(dir, encFile),
        ...(scorer === 'span_scores' ? { spanScores: join(dir, 'onnx/span_scores.onnx') } : { spanRep: join(dir, 'onnx/span_rep.onnx') }),
        countPred: join(dir, 'onnx/count_pred.onnx'),
        countEmbed: join(dir, 'onnx/count_embed.onnx'),
        ...(existsSync(join(dir, 'onnx/count_embed_c1.onnx')) ? { countEmbedC1: join(dir, 'onnx/count_embed_c1.onnx') } : {}),
        classifier: join(dir, 'onnx/classifier.onnx'),
      },
      { threads: opts.threads },
    );
    const bytes = files.reduce((n, f) => n + statSync(join(dir, f)).size, 0);
    const { Tokenizer: TokenizerImpl } = await import('tokenizers');
    const tokenizer = TokenizerImpl.fromFile(join(dir, 'tokenizer.json'));
    tokenizer.disableTruncation();
    tokenizer.disablePadding();
    return new EncoderModel(dir, config, precision, bytes, tokenizer, sessions, scorer, existsSync(join(dir, 'onnx/count_embed_c1.onnx')));
  }

  async release(): Promise<void> {
    await this.sessions.release();
  }

  /**
   * Subword ids of each pre-token (tokenized in isolation, no CLS/SEP), cached. Least recently
   * requested entries are evicted, never the ones just requested: a request's later steps (windows,
   * label groups) read the cache after further calls.
   */
  private async tokenizeAll(tokens: Iterable<string>): Promise<void> {
    const want = new Set(tokens);
    const todo: string[] = [];
    for (const t of want) {
      const ids = this.cache.get(t);
      if (ids === undefined) todo.push(t);
      else {
        this.cache.delete(t); // most recently used last
        this.cache.set(t, ids);
      }
    }
    if (!todo.length) return;
    const enc = await this.tokenizer.encodeBatch(todo, { addSpecialTokens: false });
    todo.forEach((t, i) => this.cache.set(t, enc[i]!.getIds()));
    for (const k of this.cache.keys()) {
      if (this.cache.size <= TOKEN_CACHE_MAX) break;
      if (!want.has(k)) this.cache.delete(k);
    }
  }

  /** Token count of the serialized input for one text (same rules as the encoder input). */
  private build(rec: Omit<Record_, 'ids' | 'wordPos' | 'taskPos'>, tasks: PromptTask[]): Record_ {
    const ids: number[] = [];
    const wordPos: number[] = [];
    const taskPos: number[][] = [];
    tasks.forEach((task, ti) => {
      if (ti > 0) ids.push(...this.cache.get(SPECIAL.SEP_STRUCT)!);
      const pos: number[] = [];
      task.tokens.forEach((tok, i) => {
        const marker = i === 1 || (i >= 4 && i < task.tokens.length - 2 && i % 2 === 0);
        if (marker) pos.push(ids.length);
        ids.push(...this.cache.get(tok)!);
      });
      taskPos.push(pos);
    });
    ids.push(...this.cache.get(SPECIAL.SEP_TEXT)!);
    for (const w of [...rec.prefix, ...rec.words]) {
      wordPos.push(ids.length);
      ids.push(...this.cache.get(w)!);
    }
    return { ...rec, ids, wordPos, taskPos };
  }

  /**
   * Runs `schema` over `texts`. A schema whose prompt cannot share the encoder with a text is split into
   * label groups that fit (`labelGroups`); each group runs on its own and the results are merged
   * (`mergeGroups`). Schemas that fit take the direct path unchanged.
   */
  async infer(texts: string[], schema: EncoderSchema, opts: InferOptions = {}): Promise<InferOutput> {
    const maxPos = this.config.max_position_embeddings;
    const forced = opts.labelGroupTokens;
    const budget = forced ?? maxPos - GROUP_TEXT_TOKENS;
    const promptLen = await this.promptTokens(schema);
    if (promptLen <= budget) return this.inferDirect(texts, schema, opts);
    let grouped: number[];
    if (forced !== undefined) grouped = texts.map((_, i) => i);
    else {
      const words = texts.map((t) => splitWords(normalizeText(t)).words);
      await this.tokenizeAll(words.flat());
      grouped = [];
      words.forEach((ws, i) => {
        const n = ws.reduce((k, w) => k + this.cache.get(w)!.length, 0);
        if (promptLen + n > maxPos) grouped.push(i);
      });
    }
    if (!grouped.length) return this.inferDirect(texts, schema, opts);

    const groupSchemas = await this.labelGroups(schema, budget);
    const inGroups = new Set(grouped);
    const direct = texts.map((_, i) => i).filter((i) => !inGroups.has(i));
    const results = new Array<EncoderResult>(texts.length);
    const chunks = new Array<number>(texts.length).fill(1);
    const groups = new Array<number>(texts.length).fill(1);
    let inputTokens = 0;
    if (direct.length) {
      const out = await this.inferDirect(direct.map((i) => texts[i]!), schema, opts);
      direct.forEach((ti, j) => {
        results[ti] = out.results[j]!;
        chunks[ti] = out.chunks[j]!;
      });
      inputTokens += out.inputTokens;
    }
    const parts: EncoderResult[][] = grouped.map(() => []);
    for (const g of groupSchemas) {
      const out = await this.inferDirect(grouped.map((i) => texts[i]!), g, opts, true);
      out.results.forEach((r, j) => parts[j]!.push(r));
      grouped.forEach((ti, j) => (chunks[ti] = Math.max(chunks[ti]!, out.chunks[j]!)));
      inputTokens += out.inputTokens;
    }
    grouped.forEach((ti, j) => {
      results[ti] = mergeGroups(parts[j]!, schema, opts.threshold ?? 0.5);
      groups[ti] = groupSchemas.length;
    });
    return { results, inputTokens, chunks, groups };
  }

  /** Tokens of a schema's prompt with no text: schemas, separators, `[SEP_TEXT]` and the choice prefix. */
  async promptTokens(schema: EncoderSchema): Promise<number> {
    const tasks = buildPromptTasks(schema);
    const prefix = buildChoicePrefix(schema);
    await this.tokenizeAll([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, ...prefix, ...tasks.flatMap((t) => t.tokens)]);
    return this.build({ textIndex: 0, text: '', offset: 0, words: [], starts: [], ends: [], prefix }, tasks).ids.length;
  }

  /**
   * Splits a schema into groups whose prompt is at most `budget` tokens, greedily in prompt order.
   * Entity types and classification labels are split one by one; a structure (its fields share the
   * count head and instance slots) and a relation stay whole. A part longer than `budget` runs alone;
   * one that cannot fit the encoder even without text is an `EncoderInputError`.
   */
  async labelGroups(schema: EncoderSchema, budget = this.config.max_position_embeddings - GROUP_TEXT_TOKENS): Promise<EncoderSchema[]> {
    const maxPos = this.config.max_position_embeddings;
    const units: Unit[] = [
      ...schema.structures.filter((s) => s.fields.length).map((s): Unit => ({ kind: 'structure', name: s.name })),
      ...schema.entities.map((e): Unit => ({ kind: 'entity', name: e.name })),
      ...schema.relations.map((r): Unit => ({ kind: 'relation', name: r.name })),
      ...schema.classifications.flatMap((c, task) => c.labels.map((label): Unit => ({ kind: 'label', task, label }))),
    ];
    // additive estimate (exact for WordPiece: the prompt string's pieces are split at spaces anyway)
    const pieces = new Set<string>([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, SPECIAL.P, SPECIAL.E, SPECIAL.L, '(', ')', 'entities']);
    const descOf = (label: string, desc: string | undefined) => (desc ? `${SPECIAL.DESCRIPTION} ${label}: ${desc}` : undefined);
    const taskHead = (c: ClassificationSpec) => (c.prompt ? `${c.task}: ${c.prompt}` : c.task);
    for (const e of schema.entities) [e.name, descOf(e.name, e.description)].forEach((x) => x && pieces.add(x));
    for (const c of schema.classifications) {
      pieces.add(taskHead(c));
      for (const l of c.labels) [l, descOf(l, c.labelDescriptions?.[l])].forEach((x) => x && pieces.add(x));
    }
    await this.tokenizeAll(pieces);
    const n = (x: string | undefined) => (x === undefined ? 0 : this.cache.get(x)!.length);
    const whole = new Map<string, number>();
    for (const u of units) {
      if (u.kind !== 'structure' && u.kind !== 'relation') continue;
      const sub = subSchema(schema, [u]);
      whole.set(`${u.kind}:${u.name}`, (await this.promptTokens(sub)) - n(SPECIAL.SEP_TEXT) + n(SPECIAL.SEP_STRUCT));
    }
    const wrapper = n('(') * 2 + n(')') * 2 + n(SPECIAL.P) + n(SPECIAL.SEP_STRUCT);
    const cost = (u: Unit, open: Set<string>): number => {
      if (u.kind === 'structure' || u.kind === 'relation') return whole.get(`${u.kind}:${u.name}`)!;
      if (u.kind === 'entity') {
        const e = schema.entities.find((x) => x.name === u.name)!;
        return (open.has('entities') ? 0 : wrapper + n('entities')) + n(SPECIAL.E) + n(e.name) + n(descOf(e.name, e.description));
      }
      const c = schema.classifications[u.task]!;
      return (open.has(`task:${u.task}`) ? 0 : wrapper + n(taskHead(c))) + n(SPECIAL.L) + n(u.label) + n(descOf(u.label, c.labelDescriptions?.[u.label]));
    };
    const key = (u: Unit) => (u.kind === 'entity' ? 'entities' : u.kind === 'label' ? `task:${u.task}` : `${u.kind}:${u.name}`);

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
      const len = await this.promptTokens(subSchema(schema, g));
      if (g.length === 1) {
        if (len + 2 > maxPos) {
          const u = g[0]!;
          const what = u.kind === 'label' ? `label '${u.label}' of classification '${schema.classifications[u.task]!.task}'` : u.kind === 'entity' ? `entity type '${u.name}'` : `${u.kind} '${u.name}'`;
          throw new EncoderInputError(`the ${what} alone serializes to ${len} tokens; the model accepts ${maxPos} tokens in all (schema + text)`);
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

  private async inferDirect(texts: string[], schema: EncoderSchema, opts: InferOptions, raw = false): Promise<InferOutput> {
    const threshold = opts.threshold ?? 0.5;
    const batchSize = Math.max(1, opts.batchSize ?? 8);
    const tasks = buildPromptTasks(schema);
    const prefix = buildChoicePrefix(schema);
    const maxPos = this.config.max_position_embeddings;

    // 1. words of every text; tokenize all pre-tokens at once
    const split = texts.map((t) => {
      const norm = normalizeText(t);
      return { norm, ...splitWords(norm) };
    });
    const pre = new Set<string>([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, ...prefix]);
    for (const t of tasks) for (const tok of t.tokens) pre.add(tok);
    for (const s of split) for (const w of s.words) pre.add(w);
    await this.tokenizeAll(pre);

    // 2. records; texts over the position limit are split into overlapping word windows
    const records: Record_[] = [];
    const chunks: number[] = [];
    const promptLen = this.build({ textIndex: 0, text: '', offset: 0, words: [], starts: [], ends: [], prefix }, tasks).ids.length;
    if (promptLen + 2 > maxPos) throw new EncoderInputError(`the schema serializes to ${promptLen} tokens; the model accepts ${maxPos} tokens in all (schema + text)`);
    for (let ti = 0; ti < texts.length; ti++) {
      const s = split[ti]!;
      const full = this.build({ textIndex: ti, text: s.norm, offset: 0, words: s.words, starts: s.starts, ends: s.ends, prefix }, tasks);
      if (full.ids.length <= maxPos) {
        records.push(full);
        chunks.push(1);
        continue;
      }
      const parts = await this.chunk(ti, texts[ti]!, tasks, prefix, opts, maxPos);
      records.push(...parts);
      chunks.push(parts.length);
    }

    // 3. run the graphs per batch and decode per record
    // batches of similar length (less padding); results go back to record order
    const order = records.map((_, i) => i).sort((a, b) => records[a]!.ids.length - records[b]!.ids.length || a - b);
    const perRecord: EncoderResult[] = new Array<EncoderResult>(records.length);
    for (const idx of paddedBatches(order.map((i) => records[i]!.ids.length), batchSize)) {
      const ids = idx.map((j) => order[j]!);
      const out = await this.runBatch(ids.map((i) => records[i]!), tasks, threshold, raw);
      ids.forEach((i, j) => (perRecord[i] = out[j]!));
    }
    const inputTokens = records.reduce((n, r) => n + r.ids.length, 0);

    // 4. merge chunks back per text
    const results: EncoderResult[] = [];
    let k = 0;
    for (let ti = 0; ti < texts.length; ti++) {
      const n = chunks[ti]!;
      const parts = perRecord.slice(k, k + n);
      const recs = records.slice(k, k + n);
      k += n;
      results.push(n === 1 ? parts[0]! : mergeChunks(parts, recs, new CodePoints(texts[ti]!), schema));
    }
    return { results, inputTokens, chunks, groups: texts.map(() => 1) };
  }

  private async chunk(ti: number, original: string, tasks: PromptTask[], prefix: string[], opts: InferOptions, maxPos: number): Promise<Record_[]> {
    const cps = new CodePoints(original);
    const words = splitWords(original);
    let size = opts.chunkWords ?? 200;
    const overlapWanted = opts.chunkOverlap ?? 32;
    for (;;) {
      const overlap = Math.min(overlapWanted, Math.floor(size / 4));
      const out: Record_[] = [];
      let ok = true;
      for (let sw = 0; sw < words.starts.length; sw += size - overlap) {
        const ew = Math.min(sw + size, words.starts.length);
        const startChar = words.starts[sw]!;
        const text = normalizeText(cps.slice(startChar, words.ends[ew - 1]!));
        const sp = splitWords(text);
        // gliner2 runs windows with max_len = window size: the appended "." of a full window is cut
        for (const k of ['words', 'raw', 'starts', 'ends'] as const) (sp[k] as unknown[]).splice(size);
        await this.tokenizeAll(sp.words);
        const rec = this.build({ textIndex: ti, text, offset: startChar, words: sp.words, starts: sp.starts, ends: sp.ends, prefix }, tasks);
        if (rec.ids.length > maxPos) {
          ok = false;
          break;
        }
        out.push(rec);
        if (ew === words.starts.length) break;
      }
      if (ok) return out;
      if (size <= 8) throw new EncoderInputError('text cannot be split into windows that fit the model with this schema');
      size = Math.floor(size / 2);
    }
  }

  /** `raw`: classification tasks return every label (sorted by score) with its logit, for `mergeGroups`. */
  private async runBatch(batch: Record_[], tasks: PromptTask[], threshold: number, raw = false): Promise<EncoderResult[]> {
    const D = this.config.hidden_size;
    const W = this.config.max_width;
    const B = batch.length;
    const S = Math.max(...batch.map((r) => r.ids.length));
    const ids = new BigInt64Array(B * S);
    const mask = new BigInt64Array(B * S);
    const pad = BigInt(this.config.pad_token_id ?? 0);
    batch.forEach((r, bi) => {
      for (let j = 0; j < S; j++) {
        ids[bi * S + j] = j < r.ids.length ? BigInt(r.ids[j]!) : pad;
        mask[bi * S + j] = j < r.ids.length ? 1n : 0n;
      }
    });
    const encOut = await this.sessions.run('encoder', {
      input_ids: { type: 'int64', data: ids, dims: [B, S] },
      attention_mask: { type: 'int64', data: mask, dims: [B, S] },
    });
    const hidden = encOut.hidden!.data ;
    const vec = (bi: number, pos: number) => hidden.subarray((bi * S + pos) * D, (bi * S + pos + 1) * D);

    // span representations for all records in one call
    const spanTasks = tasks.map((t, i) => ({ t, i })).filter((x) => x.t.kind !== 'classifications');
    const clsTasks = tasks.map((t, i) => ({ t, i })).filter((x) => x.t.kind === 'classifications');
    let spanRep: Float32Array | undefined;
    let we: Float32Array | undefined;
    const Lmax = Math.max(...batch.map((r) => r.wordPos.length));
    if (spanTasks.length) {
      we = new Float32Array(B * Lmax * D);
      batch.forEach((r, bi) => r.wordPos.forEach((p, wi) => we!.set(vec(bi, p), (bi * Lmax + wi) * D)));
      if (this.scorer === 'span_rep') {
        const si = new BigInt64Array(B * Lmax * W * 2);
        batch.forEach((r, bi) => {
          const L = r.wordPos.length;
          for (let i = 0; i < Lmax; i++)
            for (let w = 0; w < W; w++) {
              const o = ((bi * Lmax + i) * W + w) * 2;
              const valid = i + w < L;
              si[o] = valid ? BigInt(i) : 0n;
              si[o + 1] = valid ? BigInt(i + w) : 0n;
            }
        });
        const out = await this.sessions.run('spanRep', { word_embs: { type: 'float32', data: we, dims: [B, Lmax, D] }, span_idx: { type: 'int64', data: si, dims: [B, Lmax * W, 2] } });
        spanRep = out.span_rep!.data;
      }
    }

    // count prediction for every span task of every record
    const counts: number[][] = batch.map(() => []);
    if (spanTasks.length) {
      const p = new Float32Array(B * spanTasks.length * D);
      batch.forEach((r, bi) => spanTasks.forEach(({ i }, k) => p.set(vec(bi, r.taskPos[i]![0]!), (bi * spanTasks.length + k) * D)));
      const out = await this.sessions.run('countPred', { p_emb: { type: 'float32', data: p, dims: [B * spanTasks.length, D] } });
      const logits = out.count_logits!.data ;
      const K = this.config.max_count;
      batch.forEach((_, bi) =>
        spanTasks.forEach((_t, k) => {
          const row = logits.subarray((bi * spanTasks.length + k) * K, (bi * spanTasks.length + k + 1) * K);
          let best = 0;
          for (let c = 1; c < K; c++) if (row[c]! > row[best]!) best = c;
          counts[bi]![k] = best;
        }),
      );
    }

    // count embeddings: CountLSTM is pointwise per field, so all fields go in one call
    const proj = new Map<string, { data: Float32Array; M: number; off: number }>();
    const jobs: Array<{ bi: number; k: number; M: number }> = [];
    batch.forEach((_, bi) => spanTasks.forEach(({ t }, k) => (counts[bi]![k]! > 0 ? jobs.push({ bi, k, M: t.fields.length }) : undefined)));
    const fieldVec = (bi: number, k: number) => {
      const pos = batch[bi]!.taskPos[spanTasks[k]!.i]!.slice(1);
      return pos.map((p) => vec(bi, p));
    };
    const runCountEmbed = async (group: typeof jobs, oneSlot: boolean) => {
      if (!group.length) return;
      const total = group.reduce((n, j) => n + j.M, 0);
      const f = new Float32Array(total * D);
      let o = 0;
      for (const j of group) for (const v of fieldVec(j.bi, j.k)) f.set(v, (o++) * D);
      const out = await this.sessions.run(oneSlot ? 'countEmbedC1' : 'countEmbed', { field_embs: { type: 'float32', data: f, dims: [total, D] } });
      const data = out.struct_proj!.data ; // [20, total, D]
      let off = 0;
      for (const j of group) {
        proj.set(`${j.bi}:${j.k}`, { data, M: total, off });
        off += j.M;
      }
    };
    if (jobs.length) {
      // slots are causal, so the first slot alone equals slot 0 of the 20 unrolled ones
      const one = (j: (typeof jobs)[number]) => this.hasC1 && (spanTasks[j.k]!.t.kind === 'entities' || counts[j.bi]![j.k]! === 1);
      if (this.config.counting_layer === 'count_lstm') {
        await runCountEmbed(jobs.filter(one), true);
        await runCountEmbed(jobs.filter((j) => !one(j)), false);
      } else for (const j of jobs) await runCountEmbed([j], one(j));
    }

    // span_scores: every needed query (task, instance slot, field) of every record in one run → [B, Qmax, Lmax, W]
    const qIndex = new Map<string, number>();
    let scores: Float32Array | undefined;
    let Qmax = 0;
    if (this.scorer === 'span_scores' && jobs.length) {
      const perRecord = new Array<number>(B).fill(0);
      const qs: Array<{ bi: number; q: number; v: Float32Array }> = [];
      for (const j of jobs) {
        const pj = proj.get(`${j.bi}:${j.k}`)!;
        const slots = spanTasks[j.k]!.t.kind === 'entities' ? 1 : counts[j.bi]![j.k]!;
        for (let c = 0; c < slots; c++)
          for (let m = 0; m < j.M; m++) {
            const q = perRecord[j.bi]!++;
            qIndex.set(`${j.bi}:${j.k}:${c}:${m}`, q);
            qs.push({ bi: j.bi, q, v: pj.data.subarray((c * pj.M + pj.off + m) * D, (c * pj.M + pj.off + m + 1) * D) });
          }
      }
      Qmax = Math.max(...perRecord);
      const x = new Float32Array(B * Qmax * D);
      for (const { bi, q, v } of qs) x.set(v, (bi * Qmax + q) * D);
      const out = await this.sessions.run('spanScores', { word_embs: { type: 'float32', data: we!, dims: [B, Lmax, D] }, queries: { type: 'float32', data: x, dims: [B, Qmax, D] } });
      scores = out.scores!.data;
    }

    // classification logits for all classification tasks
    const clsLogits = new Map<string, Float32Array>();
    if (clsTasks.length) {
      const all: Float32Array[] = [];
      const keys: Array<{ key: string; n: number }> = [];
      batch.forEach((r, bi) =>
        clsTasks.forEach(({ i }) => {
          const pos = r.taskPos[i]!.slice(1);
          pos.forEach((p) => all.push(vec(bi, p)));
          keys.push({ key: `${bi}:${i}`, n: pos.length });
        }),
      );
      if (all.length) {
        const x = new Float32Array(all.length * D);
        all.forEach((v, j) => x.set(v, j * D));
        const out = await this.sessions.run('classifier', { label_embs: { type: 'float32', data: x, dims: [all.length, D] } });
        const lg = out.logits!.data ;
        let o = 0;
        for (const { key, n } of keys) {
          clsLogits.set(key, lg.slice(o, o + n));
          o += n;
        }
      }
    }

    // decode
    return batch.map((r, bi) => {
      const res: EncoderResult = { classifications: {}, structures: {}, relations: {} };
      const cps = new CodePoints(r.text);
      const textLen = r.words.length;
      const P = r.prefix.length;
      const L = r.wordPos.length;
      /** probabilities [L, W] (prefix rows, then text rows) for query (c, m) of task k */
      const scoresFor = (k: number, c: number, m: number): Float32Array | Float64Array => {
        if (scores) {
          const q = qIndex.get(`${bi}:${k}:${c}:${m}`)!;
          return scores.subarray((bi * Qmax + q) * Lmax * W, (bi * Qmax + q + 1) * Lmax * W);
        }
        const pj = proj.get(`${bi}:${k}`)!;
        const q = pj.data.subarray((c * pj.M + pj.off + m) * D, (c * pj.M + pj.off + m + 1) * D);
        const out = new Float64Array(L * W).fill(Number.NaN);
        for (let i = 0; i < L; i++)
          for (let w = 0; w < W && i + w < L; w++) {
            const base = ((bi * Lmax + i) * W + w) * D;
            let s = 0;
            for (let d = 0; d < D; d++) s += spanRep![base + d]! * q[d]!;
            out[i * W + w] = sigmoid(s);
          }
        return out;
      };
      const findSpans = (probs: Float32Array | Float64Array, thr: number): Span[] => {
        const spans: Span[] = [];
        for (let j = 0; j < textLen; j++)
          for (let w = 0; w < W && j + w < textLen; w++) {
            const p = probs[(P + j) * W + w]!;
            if (!(p >= thr)) continue;
            const cs = r.starts[j]!;
            const ce = r.ends[j + w]!;
            const text = pyStrip(cps.slice(cs, ce));
            if (text) spans.push({ text, score: p, start: cs + r.offset, end: ce + r.offset });
          }
        return spans;
      };
      spanTasks.forEach(({ t }, k) => {
        const C = counts[bi]![k]!;
        if (t.kind === 'entities') {
          const ents: Record<string, Span[]> = {};
          if (C > 0) {
            t.fields.forEach((name, m) => {
              const thr = t.entities?.find((e) => e.name === name)?.threshold ?? threshold;
              ents[name] = finalizeSpans(findSpans(scoresFor(k, 0, m), thr));
            });
          }
          res.entities = ents;
        } else if (t.kind === 'relations') {
          const thr = t.relation!.threshold ?? threshold;
          const inst: RelationInstance[] = [];
          for (let c = 0; c < C; c++) {
            const head = finalizeSpans(findSpans(scoresFor(k, c, 0), thr))[0];
            const tail = finalizeSpans(findSpans(scoresFor(k, c, 1), thr))[0];
            if (head && tail) inst.push({ head, tail });
          }
          res.relations[t.name] = inst;
        } else {
          const s = t.structure!;
          const inst: Array<Record<string, FieldValue>> = [];
          for (let c = 0; c < C; c++) {
            const obj: Record<string, FieldValue> = {};
            s.fields.forEach((f, m) => {
              const thr = f.threshold ?? threshold;
              const probs = scoresFor(k, c, m);
              if (f.choices && f.choices.length) {
                const idxOf = (choice: string) => r.prefix.findIndex((tok) => tok.toLowerCase() === choice.toLowerCase());
                if (f.dtype === 'list') {
                  const sel: ChoiceValue[] = [];
                  const seen = new Set<string>();
                  for (const ch of f.choices) {
                    if (seen.has(ch)) continue;
                    const idx = idxOf(ch);
                    if (idx >= 0 && idx < P) {
                      const sc = probs[idx * W]!;
                      if (sc >= thr) {
                        sel.push({ text: ch, score: sc });
                        seen.add(ch);
                      }
                    }
                  }
                  obj[f.name] = sel;
                } else {
                  let best: string | undefined;
                  let bestScore = -1;
                  for (const ch of f.choices) {
                    const idx = idxOf(ch);
                    if (idx >= 0 && idx < P) {
                      const sc = probs[idx * W]!;
                      if (sc > bestScore) {
                        bestScore = sc;
                        best = ch;
                      }
                    }
                  }
                  obj[f.name] = best && bestScore >= thr ? { text: best, score: bestScore } : null;
                }
              } else {
                const spans = finalizeSpans(findSpans(probs, thr), f.dtype);
                obj[f.name] = f.dtype === 'list' ? spans : (spans[0] ?? null);
              }
            });
            if (Object.values(obj).some((v) => v !== null && !(Array.isArray(v) && v.length === 0))) inst.push(obj);
          }
          res.structures[t.name] = inst;
        }
      });
      for (const { t, i } of clsTasks) {
        const c = t.classification!;
        const lg = clsLogits.get(`${bi}:${i}`) ?? new Float32Array(0);
        if (!lg.length) continue;
        if (raw) {
          const probs = classProbs(c, lg);
          res.classifications[t.name] = stableSortDesc(c.labels.map((label, j): RawLabelScore => ({ label, score: probs[j]!, logit: lg[j]! })));
        } else res.classifications[t.name] = decodeClassification(c, lg, threshold);
      }
      return res;
    });
  }
}

/**
 * Padded tokens a batch may cost over its real tokens. Every encoder row is padded to the longest
 * in its batch, and the encoder's cost is linear in padded tokens at these lengths: one batch of 32
 * tweets (49 tokens on average, 121 at most) computed 2.5× the tokens it needed, which is why
 * texts/s fell as the batch grew.
 */
export const MAX_PADDING = 1.2;

/**
 * Splits records sorted by length (ascending) into batches of at most `batchSize` whose padded size
 * (rows × longest) stays within `MAX_PADDING` × their real tokens. Returns positions into `lengths`.
 */
export function paddedBatches(lengths: number[], batchSize: number): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  let real = 0;
  lengths.forEach((len, i) => {
    if (cur.length && (cur.length >= batchSize || len * (cur.length + 1) > MAX_PADDING * (real + len))) {
      out.push(cur);
      cur = [];
      real = 0;
    }
    cur.push(i);
    real += len;
  });
  if (cur.length) out.push(cur);
  return out;
}

function stableSortDesc<T extends LabelScore>(xs: T[]): T[] {
  return xs.map((x, i) => ({ x, i })).sort((a, b) => b.x.score - a.x.score || a.i - b.i).map((y) => y.x);
}

/** Per-label probabilities: sigmoid (multi-label) or softmax over the task's labels (single-label). */
function classProbs(c: ClassificationSpec, lg: Float32Array): number[] {
  if (c.multiLabel) return Array.from(lg, (x) => sigmoid(x));
  const mx = Math.max(...lg);
  const ex = Array.from(lg, (x) => Math.exp(x - mx));
  const z = ex.reduce((a, b) => a + b, 0);
  return ex.map((e) => e / z);
}

/** gliner2 classification decoding from the classifier's logits (one per label, in `c.labels` order). */
function decodeClassification(c: ClassificationSpec, lg: Float32Array, threshold: number): LabelScore[] {
  const probs = classProbs(c, lg);
  let argmax = 0;
  probs.forEach((p, j) => (p > probs[argmax]! ? (argmax = j) : undefined));
  let chosen: LabelScore[];
  if (c.multiLabel) {
    const thr = c.threshold ?? threshold;
    // SPEC: every label above the threshold, and so none when none reaches it (gliner2 falls back to
    // the top label; Sift does not — a multi-label answer never contains a label below its threshold).
    chosen = stableSortDesc(c.labels.map((label, j) => ({ label, score: probs[j]! })).filter((x) => x.score >= thr));
    if (c.topK !== undefined) chosen = chosen.slice(0, c.topK);
  } else {
    chosen = [{ label: c.labels[argmax]!, score: probs[argmax]! }];
    if (c.topK !== undefined && c.topK > 1) {
      const rest = stableSortDesc(c.labels.map((label, j) => ({ label, score: probs[j]! })).filter((_, j) => j !== argmax));
      chosen = [...chosen, ...rest].slice(0, c.topK);
    }
  }
  return chosen;
}

/** The schema restricted to some of its parts (`labelGroups`); descriptions follow their labels. */
function subSchema(schema: EncoderSchema, units: Unit[]): EncoderSchema {
  const has = (kind: Unit['kind'], name: string) => units.some((u) => u.kind === kind && 'name' in u && u.name === name);
  return {
    structures: schema.structures.filter((s) => has('structure', s.name)),
    entities: schema.entities.filter((e) => has('entity', e.name)),
    relations: schema.relations.filter((r) => has('relation', r.name)),
    classifications: schema.classifications
      .map((c, task) => ({ ...c, labels: c.labels.filter((l) => units.some((u) => u.kind === 'label' && u.task === task && u.label === l)) }))
      .filter((c) => c.labels.length > 0),
  };
}

/**
 * One text's results from every label group → the result of the whole schema. Entity types,
 * structures and relations belong to exactly one group, so their results are taken as they are;
 * a classification task's labels are spread over groups, so their logits are gathered and decoded
 * together: one softmax over all labels (single-label) or every label's sigmoid (multi-label).
 */
function mergeGroups(parts: EncoderResult[], schema: EncoderSchema, threshold: number): EncoderResult {
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
    for (const p of parts) for (const x of (p.classifications[c.task] ?? []) as RawLabelScore[]) logits[at.get(x.label)!] = x.logit;
    if (logits.some((x) => Number.isNaN(x))) continue;
    out.classifications[c.task] = decodeClassification(c, logits, threshold);
  }
  return out;
}

export class EncoderInputError extends Error {}

/** Merges the results of a text's overlapping windows (gliner2 `merge_chunk_results`, disallow policy). */
function mergeChunks(parts: EncoderResult[], _recs: Record_[], original: CodePoints, schema: EncoderSchema): EncoderResult {
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
        for (const [f, v] of Object.entries(inst)) fixed[f] = Array.isArray(v) ? (v as Array<Span | ChoiceValue>).map((x) => ('start' in x ? fix(x) : x)) as FieldValue : v && 'start' in v ? fix(v) : v;
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
        } else if (Math.max(fixed.head.score, fixed.tail.score) > Math.max(list[at]!.head.score, list[at]!.tail.score)) list[at] = fixed;
      }
    out.relations[r.name] = list;
  }
  return out;
}


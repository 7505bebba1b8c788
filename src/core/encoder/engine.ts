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
import { buildChoicePrefix, buildPromptTasks, SPECIAL, type EncoderSchema, type PromptTask } from './schema';
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
}

export interface InferOutput {
  results: EncoderResult[];
  /** Encoder input tokens over all texts (and chunks). */
  inputTokens: number;
  /** Per text: how many chunks it was split into (1 = not chunked). */
  chunks: number[];
}

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
    /** Span scores via span_factors/query_fold instead of span_rep. */
    readonly factorized = false,
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

  static async load(dir: string, opts: { precision?: Precision; threads?: number; scorer?: 'factorized' | 'span_rep' } = {}): Promise<EncoderModel> {
    const precision = opts.precision ?? 'fp32';
    const missing = EncoderModel.requiredFiles(precision).filter((f) => !existsSync(join(dir, f)));
    if (missing.length) throw new Error(`encoder model at ${dir} is missing ${missing.join(', ')}`);
    const config = JSON.parse(readFileSync(join(dir, 'onnx/gliner2_config.json'), 'utf8')) as FragmentConfig;
    if (config.counting_layer !== 'count_lstm' && config.counting_layer !== 'count_lstm_v2')
      throw new Error(`unsupported counting_layer ${config.counting_layer}`);
    const encFile = precision === 'int8' ? 'onnx/encoder.int8.onnx' : 'onnx/encoder.onnx';
    const files = [encFile, 'onnx/span_rep.onnx', 'onnx/count_pred.onnx', 'onnx/count_embed.onnx', 'onnx/classifier.onnx'];
    // factorized scorer (sift_trainer.export_scorer) when exported: no per-span MLP
    const factorized = opts.scorer !== 'span_rep' && existsSync(join(dir, 'onnx/span_factors.onnx')) && existsSync(join(dir, 'onnx/query_fold.onnx'));
    if (factorized) files.splice(1, 1, 'onnx/span_factors.onnx', 'onnx/query_fold.onnx');
    const sessions = await createSessions(
      {
        encoder: join(dir, encFile),
        ...(factorized ? { spanFactors: join(dir, 'onnx/span_factors.onnx'), queryFold: join(dir, 'onnx/query_fold.onnx') } : { spanRep: join(dir, 'onnx/span_rep.onnx') }),
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
    return new EncoderModel(dir, config, precision, bytes, tokenizer, sessions, factorized, existsSync(join(dir, 'onnx/count_embed_c1.onnx')));
  }

  async release(): Promise<void> {
    await this.sessions.release();
  }

  /** Subword ids of each pre-token (tokenized in isolation, no CLS/SEP), cached. */
  private async tokenizeAll(tokens: Iterable<string>): Promise<void> {
    const todo = [...new Set([...tokens].filter((t) => !this.cache.has(t)))];
    if (!todo.length) return;
    const enc = await this.tokenizer.encodeBatch(todo, { addSpecialTokens: false });
    if (this.cache.size + todo.length > TOKEN_CACHE_MAX) this.cache.clear();
    todo.forEach((t, i) => this.cache.set(t, enc[i]!.getIds()));
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

  async infer(texts: string[], schema: EncoderSchema, opts: InferOptions = {}): Promise<InferOutput> {
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
    for (let b = 0; b < order.length; b += batchSize) {
      const idx = order.slice(b, b + batchSize);
      const out = await this.runBatch(idx.map((i) => records[i]!), tasks, threshold);
      idx.forEach((i, j) => (perRecord[i] = out[j]!));
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
    return { results, inputTokens, chunks };
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

  private async runBatch(batch: Record_[], tasks: PromptTask[], threshold: number): Promise<EncoderResult[]> {
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
    let SH: Float32Array | undefined;
    let EH: Float32Array | undefined;
    const H4 = 4 * D;
    const Lmax = Math.max(...batch.map((r) => r.wordPos.length));
    if (spanTasks.length) {
      const we = new Float32Array(B * Lmax * D);
      const si = new BigInt64Array(B * Lmax * W * 2);
      batch.forEach((r, bi) => {
        const L = r.wordPos.length;
        r.wordPos.forEach((p, wi) => we.set(vec(bi, p), (bi * Lmax + wi) * D));
        for (let i = 0; i < Lmax; i++)
          for (let w = 0; w < W; w++) {
            const o = ((bi * Lmax + i) * W + w) * 2;
            const valid = i + w < L;
            si[o] = valid ? BigInt(i) : 0n;
            si[o + 1] = valid ? BigInt(i + w) : 0n;
          }
      });
      if (this.factorized) {
        const out = await this.sessions.run('spanFactors', { word_embs: { type: 'float32', data: we, dims: [B, Lmax, D] } });
        SH = out.start_hidden!.data;
        EH = out.end_hidden!.data;
      } else {
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

    // factorized scorer: fold every needed query (task, slot, field) through the last span layer
    const qIndex = new Map<string, number>();
    let QH: Float32Array | undefined;
    let QB: Float32Array | undefined;
    if (this.factorized && jobs.length) {
      const qs: Float32Array[] = [];
      for (const j of jobs) {
        const pj = proj.get(`${j.bi}:${j.k}`)!;
        const slots = spanTasks[j.k]!.t.kind === 'entities' ? 1 : counts[j.bi]![j.k]!;
        for (let c = 0; c < slots; c++)
          for (let m = 0; m < j.M; m++) {
            qIndex.set(`${j.bi}:${j.k}:${c}:${m}`, qs.length);
            qs.push(pj.data.subarray((c * pj.M + pj.off + m) * D, (c * pj.M + pj.off + m + 1) * D));
          }
      }
      const x = new Float32Array(qs.length * D);
      qs.forEach((v, i) => x.set(v, i * D));
      const out = await this.sessions.run('queryFold', { queries: { type: 'float32', data: x, dims: [qs.length, D] } });
      QH = out.query_hidden!.data;
      QB = out.query_bias!.data;
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
      /** probabilities [textLen, W] (and prefix rows) for query (c, m) */
      // factorized: all of this record's queries in one pass over its spans
      const fact = new Map<string, Float64Array>();
      if (this.factorized && SH && EH) {
        const mine = [...qIndex.entries()].filter(([key]) => key.startsWith(`${bi}:`));
        const outs = mine.map(() => new Float64Array(L * W).fill(Number.NaN));
        const h = new Float32Array(H4);
        for (let i = 0; i < L; i++)
          for (let w = 0; w < W && i + w < L; w++) {
            const sb = (bi * Lmax + i) * H4;
            const eb = (bi * Lmax + i + w) * H4;
            for (let d = 0; d < H4; d++) {
              const v = SH[sb + d]! + EH[eb + d]!;
              h[d] = v > 0 ? v : 0;
            }
            for (let qi = 0; qi < mine.length; qi++) {
              const qb = mine[qi]![1] * H4;
              let acc = 0;
              for (let d = 0; d < H4; d++) acc += h[d]! * QH![qb + d]!;
              outs[qi]![i * W + w] = sigmoid(acc + QB![mine[qi]![1]]!);
            }
          }
        mine.forEach(([key], qi) => fact.set(key, outs[qi]!));
      }
      const scoresFor = (k: number, c: number, m: number): Float64Array => {
        const f = fact.get(`${bi}:${k}:${c}:${m}`);
        if (f) return f;
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
      const findSpans = (probs: Float64Array, thr: number): Span[] => {
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
        let probs: number[];
        if (c.multiLabel) probs = Array.from(lg, (x) => sigmoid(x));
        else {
          const mx = Math.max(...lg);
          const ex = Array.from(lg, (x) => Math.exp(x - mx));
          const z = ex.reduce((a, b) => a + b, 0);
          probs = ex.map((e) => e / z);
        }
        let argmax = 0;
        probs.forEach((p, j) => (p > probs[argmax]! ? (argmax = j) : undefined));
        let chosen: LabelScore[];
        if (c.multiLabel) {
          const thr = c.threshold ?? threshold;
          chosen = c.labels.map((label, j) => ({ label, score: probs[j]! })).filter((x) => x.score >= thr);
          if (!chosen.length) chosen = [{ label: c.labels[argmax]!, score: probs[argmax]! }];
          chosen = stableSortDesc(chosen);
          if (c.topK !== undefined) chosen = chosen.slice(0, c.topK);
        } else {
          chosen = [{ label: c.labels[argmax]!, score: probs[argmax]! }];
          if (c.topK !== undefined && c.topK > 1) {
            const rest = stableSortDesc(c.labels.map((label, j) => ({ label, score: probs[j]! })).filter((_, j) => j !== argmax));
            chosen = [...chosen, ...rest].slice(0, c.topK);
          }
        }
        res.classifications[t.name] = chosen;
      }
      return res;
    });
  }
}

function stableSortDesc(xs: LabelScore[]): LabelScore[] {
  return xs.map((x, i) => ({ x, i })).sort((a, b) => b.x.score - a.x.score || a.i - b.i).map((y) => y.x);
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


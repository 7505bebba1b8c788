/**
 * GLiNER2 span-architecture engine over the exported ONNX fragments (containers/training
 * export_onnx.py; research/gliner2.md §5). All pre/post-processing follows gliner2 2.1.0:
 * per-pre-token tokenization, `[P]/[E]/[C]/[R]/[L]` first-subword gathering, first-subword word
 * pooling, count prediction + unrolled count embedding sliced to C, sigmoid span scores,
 * confidence-first greedy de-overlap, choice prefix, single/multi-label classification.
 *
 * This file loads a model and orchestrates a request; the stages live beside it:
 * tokenize.ts (prompt building, tokenization, records) → batches.ts (length-sorted batches, bounded
 * padding) → heads.ts (the ONNX runs: encoder, count, span scores, classifier) → extract.ts (one
 * record's entities / structures / relations / classifications), with windows.ts (long texts) and
 * labelGroups.ts (prompts too long for the encoder) around them.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { paddedBatches } from './batches';
import { decodeBoundaryRecord, scoreBoundaryBatch } from './boundary';
import { decodeRecord } from './extract';
import { scoreBatch, type Scorer } from './heads';
import { mergeGroups, planLabelGroups } from './labelGroups';
import { PooledClassifier, POOLED_JSON, POOLED_ONNX, readPooledMeta } from './pooled';
import { buildChoicePrefix, buildPromptTasks, SPECIAL, type EncoderSchema, type PromptTask } from './schema';
import type { ExecutionProvider, ExecutionProviderOutcome, ProviderLog } from './executionProvider';
import { createSessions, type SessionSet } from './sessions';
import { CodePoints } from './text';
import { PromptTokens } from './tokenize';
import {
  GROUP_TEXT_TOKENS,
  EncoderInputError,
  type EncodedRecord,
  type EncoderResult,
  type FragmentConfig,
  type InferOptions,
  type InferOutput,
  type Precision,
} from './types';
import { mergeChunks, splitTexts, textWindows, windowPlan, type WindowPlan } from './windows';

export { MAX_PADDING, paddedBatches } from './batches';
export { windowPlan, type WindowPlan } from './windows';
export { EncoderInputError, GROUP_TEXT_TOKENS } from './types';
export type {
  ChoiceValue,
  ClassificationRoute,
  EncoderResult,
  FieldValue,
  FragmentConfig,
  InferOptions,
  InferOutput,
  LabelScore,
  Precision,
  RelationInstance,
  Span,
} from './types';

/**
 * What a loaded tokenizer holds in memory per byte of its tokenizer.json (`tokenizers`' tries and maps;
 * bench/serving/tokenizer.ts): 22× for mDeBERTa-v3's 250k-piece Unigram (16 MB → ~350 MB RSS), 14× for
 * the mini model's 30k WordPiece. Rounded up, so a multilingual model is not ~300 MB larger than counted.
 */
export const TOKENIZER_MEMORY_PER_JSON_BYTE = 24;

/** A loaded model's size as the runtime's LRU counts it (`SIFT_ENCODER_MAX_LOADED_BYTES`): its ONNX files and its tokenizer in memory. */
export function loadedBytes(onnxFileBytes: number, tokenizerJsonBytes: number): number {
  return onnxFileBytes + TOKENIZER_MEMORY_PER_JSON_BYTE * tokenizerJsonBytes;
}

/** A span model's head graphs (export_onnx.py) and a boundary model's (export_boundary.py), beside the encoder. */
const SPAN_FILES = ['onnx/span_rep.onnx', 'onnx/count_pred.onnx', 'onnx/count_embed.onnx', 'onnx/classifier.onnx'];
const BOUNDARY_FILES = ['onnx/classifier.onnx', 'onnx/boundary_candidates.onnx', 'onnx/boundary_explicit.onnx'];

export class EncoderModel {
  readonly dir: string;
  readonly config: FragmentConfig;
  readonly precision: Precision;
  readonly bytes: number;
  /** How a long text is windowed (windows.ts `windowPlan`, from the config); `tokens` bounds every encoder pass. */
  readonly window: WindowPlan;
  /** The execution provider its sessions asked for and the one they run on. */
  readonly executionProvider: ExecutionProviderOutcome;
  private constructor(
    dir: string,
    config: FragmentConfig,
    precision: Precision,
    bytes: number,
    private readonly tok: PromptTokens,
    private readonly sessions: SessionSet & { readonly provider: ExecutionProviderOutcome },
    /**
     * How spans are scored: `span_scores.onnx` (one graph to probabilities), `span_rep.onnx` + host dot products
     * (older exports), or a boundary model's `boundary_candidates.onnx` (boundary.ts).
     */
    readonly scorer: Scorer | 'boundary' = 'span_rep',
    /** count_embed_c1.onnx: the count embedding for slot 0 only (entities, C = 1). */
    private readonly hasC1 = false,
    /** onnx/pooled_classifier.onnx + .json (pooled.ts), when the model has them. */
    readonly pooled?: PooledClassifier,
  ) {
    this.dir = dir;
    this.config = config;
    this.precision = precision;
    this.bytes = bytes;
    this.window = windowPlan(config);
    this.executionProvider = sessions.provider;
  }

  /** Files an exported model directory must hold (a boundary model's heads are `BOUNDARY_FILES`, not these). */
  static requiredFiles(precision: Precision = 'fp32', architecture: FragmentConfig['architecture'] = 'span'): string[] {
    return [
      'tokenizer.json',
      'onnx/gliner2_config.json',
      precision === 'int8' ? 'onnx/encoder.int8.onnx' : 'onnx/encoder.onnx',
      ...(architecture === 'boundary' ? BOUNDARY_FILES : SPAN_FILES),
    ];
  }

  static async load(
    dir: string,
    opts: {
      precision?: Precision;
      threads?: number;
      scorer?: 'span_scores' | 'span_rep';
      logger?: ProviderLog;
      executionProvider?: ExecutionProvider;
    } = {},
  ): Promise<EncoderModel> {
    const precision = opts.precision ?? 'fp32';
    const configFile = join(dir, 'onnx/gliner2_config.json');
    const config = existsSync(configFile)
      ? (JSON.parse(readFileSync(configFile, 'utf8')) as FragmentConfig)
      : ({ architecture: 'span' } as FragmentConfig);
    const boundary = config.architecture === 'boundary';
    if (config.architecture !== undefined && config.architecture !== 'span' && !boundary)
      throw new Error(`unsupported architecture ${String(config.architecture)}`);
    const missing = EncoderModel.requiredFiles(precision, config.architecture).filter((f) => !existsSync(join(dir, f)));
    if (missing.length) throw new Error(`encoder model at ${dir} is missing ${missing.join(', ')}`);
    if (!boundary && (typeof config.max_width !== 'number' || typeof config.max_count !== 'number'))
      throw new Error('a span model config needs max_width and max_count');
    if (!boundary && config.counting_layer !== 'count_lstm' && config.counting_layer !== 'count_lstm_v2')
      throw new Error(`unsupported counting_layer ${config.counting_layer}`);
    const window = windowPlan(config); // a window the backbone cannot take fails the load, before any session is created
    const pooledMeta = readPooledMeta(dir, window.tokens);
    const encFile = precision === 'int8' ? 'onnx/encoder.int8.onnx' : 'onnx/encoder.onnx';
    if (boundary) {
      const relations = config.enable_relations === true;
      if (relations && !existsSync(join(dir, 'onnx/relation_mlp.onnx')))
        throw new Error(`encoder model at ${dir} is missing onnx/relation_mlp.onnx (its config enables relations)`);
      const files = [
        encFile,
        ...BOUNDARY_FILES,
        ...(relations ? ['onnx/relation_mlp.onnx'] : []),
        ...(pooledMeta ? [POOLED_ONNX, POOLED_JSON] : []),
      ];
      const sessions = await createSessions(
        {
          encoder: join(dir, encFile),
          classifier: join(dir, 'onnx/classifier.onnx'),
          boundaryCandidates: join(dir, 'onnx/boundary_candidates.onnx'),
          boundaryExplicit: join(dir, 'onnx/boundary_explicit.onnx'),
          ...(relations ? { relationMlp: join(dir, 'onnx/relation_mlp.onnx') } : {}),
          ...(pooledMeta ? { pooledClassifier: join(dir, POOLED_ONNX) } : {}),
        },
        { threads: opts.threads, logger: opts.logger, executionProvider: opts.executionProvider },
      );
      return EncoderModel.finishLoad(dir, config, precision, files, sessions, 'boundary', false, pooledMeta);
    }
    const files = [encFile, ...SPAN_FILES];
    // span_scores.onnx (sift_trainer.export.export_scorer) when exported: no per-span MLP, no host scoring loops
    const scorer =
      opts.scorer !== 'span_rep' &&
      existsSync(join(dir, 'onnx/span_scores.onnx')) &&
      existsSync(join(dir, 'onnx/count_embed_c1.onnx'))
        ? 'span_scores'
        : 'span_rep';
    if (scorer === 'span_scores') files.splice(1, 1, 'onnx/span_scores.onnx');
    if (pooledMeta) files.push(POOLED_ONNX, POOLED_JSON);
    const sessions = await createSessions(
      {
        encoder: join(dir, encFile),
        ...(scorer === 'span_scores'
          ? { spanScores: join(dir, 'onnx/span_scores.onnx') }
          : { spanRep: join(dir, 'onnx/span_rep.onnx') }),
        countPred: join(dir, 'onnx/count_pred.onnx'),
        countEmbed: join(dir, 'onnx/count_embed.onnx'),
        ...(existsSync(join(dir, 'onnx/count_embed_c1.onnx'))
          ? { countEmbedC1: join(dir, 'onnx/count_embed_c1.onnx') }
          : {}),
        classifier: join(dir, 'onnx/classifier.onnx'),
        ...(pooledMeta ? { pooledClassifier: join(dir, POOLED_ONNX) } : {}),
      },
      { threads: opts.threads, logger: opts.logger, executionProvider: opts.executionProvider },
    );
    return EncoderModel.finishLoad(
      dir,
      config,
      precision,
      files,
      sessions,
      scorer,
      existsSync(join(dir, 'onnx/count_embed_c1.onnx')),
      pooledMeta,
    );
  }

  /** The tokenizer and the counted size, once the sessions are up. */
  private static async finishLoad(
    dir: string,
    config: FragmentConfig,
    precision: Precision,
    files: string[],
    sessions: SessionSet & { readonly provider: ExecutionProviderOutcome },
    scorer: Scorer | 'boundary',
    hasC1: boolean,
    pooledMeta: ReturnType<typeof readPooledMeta>,
  ): Promise<EncoderModel> {
    const bytes = loadedBytes(
      files.reduce((n, f) => n + statSync(join(dir, f)).size, 0),
      statSync(join(dir, 'tokenizer.json')).size,
    );
    const { Tokenizer: TokenizerImpl } = await import('tokenizers');
    const tokenizer = TokenizerImpl.fromFile(join(dir, 'tokenizer.json'));
    tokenizer.disableTruncation();
    tokenizer.disablePadding();
    return new EncoderModel(
      dir,
      config,
      precision,
      bytes,
      new PromptTokens(tokenizer),
      sessions,
      scorer,
      hasC1,
      pooledMeta && new PooledClassifier(pooledMeta, tokenizer),
    );
  }

  async release(): Promise<void> {
    await this.sessions.release();
  }

  /**
   * Runs `schema` over `texts`. A schema whose prompt cannot share the encoder with a text is split into
   * label groups that fit (`labelGroups`); each group runs on its own and the results are merged
   * (`mergeGroups`). Schemas that fit take the direct path unchanged.
   */
  async infer(texts: string[], schema: EncoderSchema, opts: InferOptions = {}): Promise<InferOutput> {
    const pooledTasks = this.pooled ? schema.classifications.filter((c) => this.pooled!.covers(c)) : [];
    const routes = Object.fromEntries(
      schema.classifications.map((c) => [c.task, pooledTasks.includes(c) ? 'pooled' : 'gliner2'] as const),
    );
    if (!pooledTasks.length) return { ...(await this.inferGliner2(texts, schema, opts)), routes };
    const rest: EncoderSchema = {
      ...schema,
      classifications: schema.classifications.filter((c) => !pooledTasks.includes(c)),
    };
    const restEmpty =
      !rest.entities.length && !rest.classifications.length && !rest.structures.length && !rest.relations.length;
    // classification-only and all pooled: no GLiNER2 prompt pass at all
    const out: Omit<InferOutput, 'routes'> = restEmpty
      ? {
          results: texts.map(() => ({ classifications: {}, structures: {}, relations: {} })),
          inputTokens: 0,
          textTokens: texts.map(() => 0),
          chunks: texts.map(() => 1),
          groups: texts.map(() => 1),
        }
      : await this.inferGliner2(texts, rest, opts);
    const pooled = await this.pooled!.logits(this.sessions, this.config, texts, Math.max(1, opts.batchSize ?? 8));
    const threshold = opts.threshold ?? 0.5;
    out.results.forEach((r, i) => {
      const classifications = { ...r.classifications };
      for (const c of pooledTasks) classifications[c.task] = this.pooled!.decode(c, pooled.logits[i]!, threshold);
      // the schema's task order, as the GLiNER2 route answers
      r.classifications = Object.fromEntries(schema.classifications.map((c) => [c.task, classifications[c.task]!]));
      out.textTokens[i]! += pooled.tokens[i]!;
    });
    return { ...out, inputTokens: out.inputTokens + pooled.tokens.reduce((a, b) => a + b, 0), routes };
  }

  /** The GLiNER2 prompt route for every head of `schema`. */
  private async inferGliner2(
    texts: string[],
    schema: EncoderSchema,
    opts: InferOptions,
  ): Promise<Omit<InferOutput, 'routes'>> {
    const maxPos = this.window.tokens;
    const forced = opts.labelGroupTokens;
    const budget = forced ?? maxPos - GROUP_TEXT_TOKENS;
    const promptLen = await this.promptTokens(schema);
    if (promptLen <= budget) return this.inferDirect(texts, schema, opts);
    let grouped: number[];
    if (forced !== undefined) grouped = texts.map((_, i) => i);
    else {
      const words = (await splitTexts(texts)).map((s) => s.words);
      const pre = new Set<string>();
      for (const ws of words) for (const w of ws) pre.add(w); // not words.flat(): ~25 ms per 100,000 words
      await this.tok.tokenizeAll(pre);
      grouped = [];
      words.forEach((ws, i) => {
        const n = ws.reduce((k, w) => k + this.tok.ids(w).length, 0);
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
    const textTokens = new Array<number>(texts.length).fill(0);
    let inputTokens = 0;
    if (direct.length) {
      const out = await this.inferDirect(
        direct.map((i) => texts[i]!),
        schema,
        opts,
      );
      direct.forEach((ti, j) => {
        results[ti] = out.results[j]!;
        chunks[ti] = out.chunks[j]!;
        textTokens[ti] = out.textTokens[j]!;
      });
      inputTokens += out.inputTokens;
    }
    const parts: EncoderResult[][] = grouped.map(() => []);
    for (const g of groupSchemas) {
      const out = await this.inferDirect(
        grouped.map((i) => texts[i]!),
        g,
        opts,
        true,
      );
      out.results.forEach((r, j) => {
        parts[j]!.push(r);
      });
      grouped.forEach((ti, j) => {
        chunks[ti] = Math.max(chunks[ti]!, out.chunks[j]!);
        textTokens[ti]! += out.textTokens[j]!;
      });
      inputTokens += out.inputTokens;
    }
    grouped.forEach((ti, j) => {
      results[ti] = mergeGroups(parts[j]!, schema, opts.threshold ?? 0.5);
      groups[ti] = groupSchemas.length;
    });
    return { results, inputTokens, textTokens, chunks, groups };
  }

  /** Tokens of a schema's prompt with no text: schemas, separators, `[SEP_TEXT]` and the choice prefix. */
  promptTokens(schema: EncoderSchema): Promise<number> {
    return this.tok.promptTokens(schema);
  }

  /** The label groups `infer` would split `schema` into (labelGroups.ts). */
  labelGroups(schema: EncoderSchema, budget = this.window.tokens - GROUP_TEXT_TOKENS): Promise<EncoderSchema[]> {
    return planLabelGroups(this.tok, schema, budget, this.window.tokens);
  }

  private async inferDirect(
    texts: string[],
    schema: EncoderSchema,
    opts: InferOptions,
    raw = false,
  ): Promise<Omit<InferOutput, 'routes'>> {
    const threshold = opts.threshold ?? 0.5;
    const batchSize = Math.max(1, opts.batchSize ?? 8);
    const tasks = buildPromptTasks(schema);
    const prefix = buildChoicePrefix(schema);
    const maxPos = this.window.tokens;

    // 1. words of every text; tokenize all pre-tokens at once
    const split = await splitTexts(texts);
    const pre = new Set<string>([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, ...prefix]);
    for (const t of tasks) for (const tok of t.tokens) pre.add(tok);
    for (const s of split) for (const w of s.words) pre.add(w);
    await this.tok.tokenizeAll(pre);

    // 2. records; texts over the window (windowPlan) are split into overlapping word windows
    const records: EncodedRecord[] = [];
    const chunks: number[] = [];
    const promptLen = this.tok.build(
      { textIndex: 0, text: '', offset: 0, words: [], starts: [], ends: [], prefix },
      tasks,
    ).ids.length;
    if (promptLen + 2 > maxPos)
      throw new EncoderInputError(
        `the schema serializes to ${promptLen} tokens; the model accepts ${maxPos} tokens in all (schema + text)`,
      );
    for (let ti = 0; ti < texts.length; ti++) {
      const s = split[ti]!;
      // counted before building: a long text's record would be built only to be thrown away
      if (s.words.reduce((n, w) => n + this.tok.ids(w).length, promptLen) <= maxPos) {
        records.push(
          this.tok.build(
            { textIndex: ti, text: s.norm, offset: 0, words: s.words, starts: s.starts, ends: s.ends, prefix },
            tasks,
          ),
        );
        chunks.push(1);
        continue;
      }
      const parts = await textWindows(this.tok, ti, texts[ti]!, tasks, prefix, opts, this.window);
      records.push(...parts);
      chunks.push(parts.length);
    }

    // 3. run the graphs per batch and decode per record
    // batches of similar length (less padding); results go back to record order
    const order = records.map((_, i) => i).sort((a, b) => records[a]!.ids.length - records[b]!.ids.length || a - b);
    const perRecord: EncoderResult[] = new Array<EncoderResult>(records.length);
    for (const idx of paddedBatches(
      order.map((i) => records[i]!.ids.length),
      batchSize,
    )) {
      const ids = idx.map((j) => order[j]!);
      const out = await this.runBatch(
        ids.map((i) => records[i]!),
        tasks,
        threshold,
        raw,
      );
      ids.forEach((i, j) => {
        perRecord[i] = out[j]!;
      });
    }
    const inputTokens = records.reduce((n, r) => n + r.ids.length, 0);
    const textTokens = texts.map(() => 0);
    for (const r of records) textTokens[r.textIndex]! += r.ids.length;

    // 4. merge chunks back per text
    const results: EncoderResult[] = [];
    let k = 0;
    for (let ti = 0; ti < texts.length; ti++) {
      const n = chunks[ti]!;
      const parts = perRecord.slice(k, k + n);
      k += n;
      results.push(n === 1 ? parts[0]! : mergeChunks(parts, new CodePoints(texts[ti]!), schema));
    }
    return { results, inputTokens, textTokens, chunks, groups: texts.map(() => 1) };
  }

  /** `raw`: classification tasks return every label (sorted by score) with its logit, for `mergeGroups`. */
  private async runBatch(
    batch: EncodedRecord[],
    tasks: PromptTask[],
    threshold: number,
    raw = false,
  ): Promise<EncoderResult[]> {
    if (this.scorer === 'boundary') {
      const scores = await scoreBoundaryBatch(this.sessions, this.config, batch, tasks);
      return batch.map((r, bi) => decodeBoundaryRecord(r, bi, scores, tasks, this.config, threshold, raw));
    }
    const scores = await scoreBatch(
      { sessions: this.sessions, config: this.config, scorer: this.scorer, hasC1: this.hasC1 },
      batch,
      tasks,
    );
    return batch.map((r, bi) => decodeRecord(r, bi, scores, this.config.max_width!, threshold, raw));
  }
}

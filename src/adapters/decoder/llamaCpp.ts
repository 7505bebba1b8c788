import { createHash } from 'node:crypto';
import { createWriteStream, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { mkdir, readdir, rename, stat, unlink } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import type { BlobStore } from '../../core/ports';
import { BadRequestError, NotFoundError, ServiceUnavailableError } from '../../core/errors';
import { StopMatcher } from '../../core/decoder/stopText';
import type {
  DecoderAdapterSpec,
  DecoderBackend,
  DecoderMessage,
  DecoderPrompt,
  FinishReason,
  GenerateRequest,
  GenerationEvent,
  TokenizedPrompt,
} from '../../core/decoder/types';

export interface LlamaCppOptions {
  /** Directories searched for `<model id>/*.gguf`, in order. */
  modelDirs: string[];
  /** CPU threads per evaluation. On a busy 2-core box 1 is much faster than 2 (spin-wait contention). */
  threads?: number;
  /** Parallel sequences (slots) per model; each keeps its KV state for prefix reuse. */
  slots?: number;
  contextSize?: number;
  /** Where prefix KV snapshots of cache entries are written. */
  stateDir?: string;
  /** Requests allowed to wait for a slot; beyond it a 503 with Retry-After (before any stream). */
  maxQueue?: number;
  /** Where fine-tuned adapters (`adapter.gguf` of decoder jobs) are cached; default: under stateDir. */
  adapterDir?: string;
  /** Adapter contexts kept at once (LRU; the least recently used idle one is disposed). Default 4. */
  maxAdapterContexts?: number;
  /** Slots per adapter context (each holds its own KV cells). Default: half of `slots`, at least 1. */
  adapterSlots?: number;
  /** How long a ready adapter is served before its blob is checked again for a new version. Default 60 s. */
  adapterRecheckMs?: number;
}

interface Slot {
  seq: LlamaContextSequence;
  busy: boolean;
  lastUsed: number;
}

/** Loaded base weights, shared by the base context and every adapter context on top of them. */
interface Base {
  model: LlamaModel;
  defaultSystem: string | null;
}

/** One llama.cpp context: the base model's own, or one per fine-tuned adapter (LoRA applied). */
interface Loaded extends Base {
  /** The served model id: a catalog id, or an adapter id (training job id). */
  key: string;
  context: LlamaContext;
  slots: Slot[];
  waiters: (() => void)[];
  /** The adapter file applied to this context, for adapter contexts. */
  loraPath?: string;
  /** Generations holding this context (waiting for a slot or running); it is never disposed while > 0. */
  leases: number;
  lastUsed: number;
  /** No longer reachable by new requests (evicted or superseded); disposed once `leases` is 0. */
  detached: boolean;
  disposing?: Promise<void>;
}

/** A fine-tuned adapter made servable by `ensureAdapter`. */
interface Adapter {
  spec: DecoderAdapterSpec;
  /** Hash of the blob's identity (etag, size, mtime): a new version gets a new file and context. */
  version: string;
  filePath: string;
  checkedAt: number;
}

/** Default system prompt of SmolLM2's chat template (added when the first message is not a system one). */
const SMOLLM_SYSTEM = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face';

/**
 * Local decoder on llama.cpp through node-llama-cpp (prebuilt CPU binaries from npm; nothing is
 * downloaded or compiled). Prompts are rendered with the model's ChatML template piece by piece, so
 * cache-marker boundaries are exact token positions. Prefix reuse is real: every slot keeps its KV
 * state and a request goes to the slot sharing the longest token prefix; cache entries additionally
 * snapshot the prefix KV to a file, restored into a slot when no slot still holds that prefix.
 */
export class LlamaCppDecoder implements DecoderBackend {
  readonly name = 'llama.cpp';
  readonly cachesAutomatically = false;
  private llama?: Promise<Llama>;
  private readonly bases = new Map<string, Promise<Base>>();
  /** Contexts by served model id; an entry is removed when its context is detached. */
  private readonly contexts = new Map<string, Promise<Loaded>>();
  /** Settled, attached contexts (for the LRU and for close). */
  private readonly ready = new Map<string, Loaded>();
  /** Every context not yet disposed, attached or not. */
  private readonly live = new Set<Loaded>();
  private readonly adapters = new Map<string, Adapter>();
  private readonly ensuring = new Map<string, Promise<void>>();
  /** Adapter files whose context is being disposed: a new context on the same file waits for it. */
  private readonly disposing = new Map<string, Promise<void>>();
  private readonly stateDir: string;
  private readonly adapterDir: string;
  private readonly stateFiles = new Map<string, string>();
  private readonly paths = new Map<string, string>();
  private closed = false;
  /** Adapter files fetched from the blob store (diagnostics and tests). */
  adapterDownloads = 0;

  constructor(private readonly opts: LlamaCppOptions) {
    this.stateDir = opts.stateDir ?? join(tmpdir(), `sift-kv-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
    this.adapterDir = opts.adapterDir ?? join(this.stateDir, 'adapters');
  }

  /** The GGUF of a catalog model, if present in one of the model dirs. */
  ggufPath(model: string): string | undefined {
    const known = this.paths.get(model);
    if (known && existsSync(known)) return known;
    for (const d of this.opts.modelDirs.flatMap((dir) => [join(dir, model), join(dir, model.replace('/', '--'))])) {
      if (!existsSync(d)) continue;
      const f = readdirSync(d).filter((n) => n.endsWith('.gguf')).sort()[0];
      if (f) {
        this.paths.set(model, join(d, f));
        return join(d, f);
      }
    }
    return undefined;
  }

  async hasModel(model: string): Promise<boolean> {
    return this.adapters.has(model) || this.ggufPath(model) !== undefined;
  }

  async contextSize(model: string): Promise<number> {
    const l = await this.lease(model);
    try {
      return l.context.contextSize;
    } finally {
      this.unlease(l);
    }
  }

  /**
   * Makes `spec.id` servable as the base model with the job's llama.cpp LoRA (`adapter.gguf`)
   * applied. The file is downloaded once per blob version (etag, size, mtime) into the adapter
   * cache (temp name, then rename), so a restart or a second call reuses it; a ready adapter costs
   * nothing until `adapterRecheckMs` has passed, then one HEAD. Concurrent calls share one fetch.
   */
  async ensureAdapter(spec: DecoderAdapterSpec, blobs: BlobStore): Promise<void> {
    const known = this.adapters.get(spec.id);
    if (known && known.spec.blobPrefix === spec.blobPrefix && Date.now() - known.checkedAt < (this.opts.adapterRecheckMs ?? 60_000)) return;
    let p = this.ensuring.get(spec.id);
    if (!p) {
      p = this.fetchAdapter(spec, blobs).finally(() => this.ensuring.delete(spec.id));
      this.ensuring.set(spec.id, p);
    }
    return p;
  }

  private async fetchAdapter(spec: DecoderAdapterSpec, blobs: BlobStore): Promise<void> {
    if (!this.ggufPath(spec.baseModel)) {
      throw new ServiceUnavailableError(`Base model '${spec.baseModel}' of training job '${spec.id}' is not installed on this deployment`);
    }
    const key = `${spec.blobPrefix}adapter.gguf`;
    const head = await blobs.head(key);
    if (!head) {
      throw new ServiceUnavailableError(
        `Training job '${spec.id}' has no llama.cpp adapter (adapter.gguf) among its model files, so it cannot be served by the local decoder`,
      );
    }
    const version = createHash('sha256')
      .update([spec.blobPrefix, spec.baseModel, head.etag ?? '', String(head.size), head.lastModified?.toISOString() ?? ''].join('\u0000'))
      .digest('hex')
      .slice(0, 16);
    const known = this.adapters.get(spec.id);
    if (known && known.version === version) {
      known.checkedAt = Date.now();
      return;
    }
    const stem = spec.id.replace(/[^A-Za-z0-9._-]/g, '_');
    const filePath = join(this.adapterDir, `${stem}-${version}.gguf`);
    const have = await stat(filePath).catch(() => undefined);
    if (!have || have.size !== head.size) {
      await mkdir(this.adapterDir, { recursive: true });
      const tmp = `${filePath}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`;
      try {
        await pipeline(await blobs.stream(key), createWriteStream(tmp));
        const got = (await stat(tmp)).size;
        if (got !== head.size) throw new ServiceUnavailableError(`Adapter of training job '${spec.id}' downloaded ${got} of ${head.size} bytes; retry shortly`);
        await rename(tmp, filePath);
      } catch (err) {
        await unlink(tmp).catch(() => undefined);
        throw err;
      }
      this.adapterDownloads++;
    }
    this.adapters.set(spec.id, { spec, version, filePath, checkedAt: Date.now() });
    if (known) {
      // A new version: requests from now on get a new context; the old one goes once idle.
      const old = this.ready.get(spec.id);
      if (old) this.detach(old);
      else this.contexts.delete(spec.id);
      this.removeStaleAdapterFiles(stem, filePath);
    }
  }

  /** Served ids with an adapter context (least recently used first), and adapter contexts not yet disposed: diagnostics. */
  adapterContexts(): { attached: string[]; live: number } {
    const attached = [...this.ready.values()].filter((l) => l.loraPath !== undefined).sort((a, b) => a.lastUsed - b.lastUsed);
    return { attached: attached.map((l) => l.key), live: [...this.live].filter((l) => l.loraPath !== undefined).length };
  }

  /**
   * Files of older versions of an adapter are deleted; one a context still applies goes when that
   * context is disposed (disposeWhenIdle).
   */
  private removeStaleAdapterFiles(stem: string, keep: string): void {
    void (async () => {
      for (const name of await readdir(this.adapterDir).catch(() => [] as string[])) {
        const path = join(this.adapterDir, name);
        if (!name.startsWith(`${stem}-`) || !name.endsWith('.gguf') || path === keep) continue;
        if ([...this.live].some((l) => l.loraPath === path)) continue;
        await unlink(path).catch(() => undefined);
      }
    })();
  }

  private async getLlama(): Promise<Llama> {
    this.llama ??= import('node-llama-cpp').then(({ getLlama, LlamaLogLevel }) =>
      getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, progressLogs: false }),
    );
    return this.llama;
  }

  private loadBase(model: string): Promise<Base> {
    let p = this.bases.get(model);
    if (!p) {
      p = (async () => {
        const path = this.ggufPath(model);
        if (!path) throw new NotFoundError(`Weights for '${model}' are not in the model store (run: node scripts/fetch-decoder.mjs)`);
        const llama = await this.getLlama();
        const m = await llama.loadModel({ modelPath: path });
        const template = String((m.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template ?? '');
        return { model: m, defaultSystem: template.includes('SmolLM') ? SMOLLM_SYSTEM : null };
      })();
      p.catch(() => this.bases.delete(model));
      this.bases.set(model, p);
    }
    return p;
  }

  /** The context serving `model` (created on first use; adapter contexts share their base's weights). */
  private load(model: string): Promise<Loaded> {
    let p = this.contexts.get(model);
    if (!p) {
      const adapter = this.adapters.get(model);
      let entry: Promise<Loaded> | undefined;
      p = (async () => {
        const base = await this.loadBase(adapter ? adapter.spec.baseModel : model);
        // The same file's previous context must be gone first: disposing it unloads the LoRA weights.
        if (adapter) await this.disposing.get(adapter.filePath);
        const slots = adapter ? (this.opts.adapterSlots ?? Math.max(1, Math.floor((this.opts.slots ?? 4) / 2))) : (this.opts.slots ?? 4);
        let context: LlamaContext;
        try {
          context = await base.model.createContext({
            contextSize: Math.min(this.opts.contextSize ?? 8192, base.model.trainContextSize),
            sequences: slots,
            threads: this.opts.threads ?? defaultThreads(),
            batchSize: 512,
            ...(adapter ? { lora: { adapters: [{ filePath: adapter.filePath, scale: 1 }] } } : {}),
          });
        } catch (err) {
          if (!adapter) throw err;
          await this.unloadLora(base.model, adapter.filePath);
          throw new ServiceUnavailableError(
            `The adapter of training job '${adapter.spec.id}' could not be applied to '${adapter.spec.baseModel}': ${(err as Error).message}`,
          );
        }
        const l: Loaded = {
          ...base,
          key: model,
          context,
          slots: Array.from({ length: slots }, () => ({ seq: context.getSequence(), busy: false, lastUsed: 0 })),
          waiters: [],
          ...(adapter ? { loraPath: adapter.filePath } : {}),
          leases: 0,
          lastUsed: performance.now(),
          detached: false,
        };
        this.live.add(l);
        if (this.contexts.get(model) === entry && !this.closed) this.ready.set(model, l);
        else {
          // Superseded while it was being created (a new adapter version, or close): never served.
          l.detached = true;
          this.disposeWhenIdle(l);
        }
        return l;
      })();
      entry = p;
      p.catch(() => {
        if (this.contexts.get(model) === entry) this.contexts.delete(model);
      });
      this.contexts.set(model, p);
    }
    return p;
  }

  /**
   * Takes a hold on the context serving `model` for one generation. Taking it and checking that it
   * is still attached happen in the same tick, so an eviction can never dispose a held context.
   */
  private async lease(model: string): Promise<Loaded> {
    for (let attempt = 0; ; attempt++) {
      const l = await this.load(model);
      if (this.closed) throw new ServiceUnavailableError('The decoder is shutting down');
      if (l.detached) {
        // Evicted or superseded between creation and this request: take the current one.
        if (attempt < 4) continue;
        throw new ServiceUnavailableError(`The decoder could not keep '${model}' loaded; retry shortly`);
      }
      l.leases++;
      l.lastUsed = performance.now();
      if (l.loraPath) this.trimAdapterContexts();
      return l;
    }
  }

  private unlease(l: Loaded): void {
    l.leases--;
    l.lastUsed = performance.now();
    if (l.detached) this.disposeWhenIdle(l);
    else if (l.loraPath) this.trimAdapterContexts();
  }

  /** Keeps at most `maxAdapterContexts` adapter contexts: the least recently used idle ones go. */
  private trimAdapterContexts(): void {
    const max = this.opts.maxAdapterContexts ?? 4;
    const adapterContexts = [...this.ready.values()].filter((l) => l.loraPath !== undefined);
    let excess = adapterContexts.length - max;
    if (excess <= 0) return;
    const idle = adapterContexts.filter((l) => l.leases === 0).sort((a, b) => a.lastUsed - b.lastUsed);
    for (const l of idle) {
      if (excess-- <= 0) break;
      this.detach(l);
    }
  }

  /** New requests no longer reach `l`; it is disposed as soon as nothing holds it. */
  private detach(l: Loaded): void {
    if (l.detached) return;
    l.detached = true;
    // An attached, settled context is always what `contexts` holds for its key.
    if (this.ready.get(l.key) === l) {
      this.ready.delete(l.key);
      this.contexts.delete(l.key);
    }
    this.disposeWhenIdle(l);
  }

  private disposeWhenIdle(l: Loaded): void {
    if (l.leases > 0 || l.disposing) return;
    l.disposing = (async () => {
      await l.context.dispose().catch(() => undefined);
      if (l.loraPath) {
        await this.unloadLora(l.model, l.loraPath);
        // A superseded version's file goes with its last context.
        if (this.adapters.get(l.key)?.filePath !== l.loraPath) await unlink(l.loraPath).catch(() => undefined);
      }
      this.live.delete(l);
    })();
    if (l.loraPath) {
      const path = l.loraPath;
      const done = l.disposing.finally(() => {
        if (this.disposing.get(path) === done) this.disposing.delete(path);
      });
      this.disposing.set(path, done);
    }
  }

  /**
   * Frees the LoRA weights of a disposed context. node-llama-cpp keeps loaded adapters until the
   * model is disposed (its `_loraAdapters` cache, by file path); the native adapter supports
   * disposal, so it is removed from that cache and freed here. Without that internal map (another
   * node-llama-cpp version) the weights simply stay loaded until the base model goes.
   */
  private async unloadLora(model: LlamaModel, filePath: string): Promise<void> {
    const cache = (model as unknown as { _loraAdapters?: unknown })._loraAdapters;
    if (!(cache instanceof Map)) return;
    const path = resolve(process.cwd(), filePath);
    const lora = cache.get(path) as { dispose?: () => Promise<void> } | undefined;
    if (!lora || typeof lora.dispose !== 'function') return;
    cache.delete(path);
    await lora.dispose().catch(() => undefined);
  }

  /** ChatML pieces: template text (special tokens allowed) and caller text (never special). */
  private tokenize(l: Base, prompt: DecoderPrompt): TokenizedPrompt {
    const tokens: number[] = [];
    const breakpoints: TokenizedPrompt['breakpoints'] = [];
    const special = (t: string) => tokens.push(...(l.model.tokenize(t, true) as number[]));
    const plain = (t: string) => {
      if (t) tokens.push(...(l.model.tokenize(t, false) as number[]));
    };
    if (prompt.kind === 'text') {
      plain(prompt.text);
      return { tokens, breakpoints };
    }
    const messages: DecoderMessage[] = [...prompt.messages];
    if (l.defaultSystem && messages[0]?.role !== 'system') messages.unshift({ role: 'system', parts: [{ text: l.defaultSystem }] });
    const last = messages.length - 1;
    messages.forEach((m, i) => {
      const prefill = i === last && m.role === 'assistant' && prompt.continueFinal === true;
      special(`<|im_start|>${m.role}\n`);
      m.parts.forEach((p, j) => {
        if (j > 0) plain('\n');
        plain(p.text);
        if (p.cache) breakpoints.push({ length: tokens.length, ttlSeconds: p.cache.ttlSeconds });
      });
      if (!prefill) special('<|im_end|>\n');
    });
    if (!(messages[last]?.role === 'assistant' && prompt.continueFinal)) special('<|im_start|>assistant\n');
    return { tokens, breakpoints };
  }

  /** Tokenizing needs only the weights' vocabulary: an adapter counts with its base model. */
  async countTokens(model: string, prompt: DecoderPrompt): Promise<number> {
    return this.tokenize(await this.loadBase(this.adapters.get(model)?.spec.baseModel ?? model), prompt).tokens.length;
  }

  private async acquire(l: Loaded, tokens: Token[], signal?: AbortSignal): Promise<Slot> {
    for (;;) {
      if (signal?.aborted) throw new Error('aborted');
      if (l.disposing) throw new ServiceUnavailableError('The decoder context was unloaded; retry');
      const free = l.slots.filter((s) => !s.busy);
      if (free.length > 0) {
        let best = free[0] as Slot;
        let bestLen = -1;
        for (const s of free) {
          const len = s.seq.compareContextTokens(tokens).firstDifferentIndex;
          if (len > bestLen || (len === bestLen && s.lastUsed < best.lastUsed)) {
            best = s;
            bestLen = len;
          }
        }
        best.busy = true;
        return best;
      }
      if (l.waiters.length >= (this.opts.maxQueue ?? 64)) {
        const err = new ServiceUnavailableError('The decoder is at capacity; retry shortly');
        err.headers['retry-after'] = '1';
        throw err;
      }
      await new Promise<void>((ok) => l.waiters.push(ok));
    }
  }

  private release(l: Loaded, slot: Slot): void {
    slot.busy = false;
    slot.lastUsed = performance.now();
    l.waiters.shift()?.();
  }

  private statePath(key: string): string {
    mkdirSync(this.stateDir, { recursive: true });
    return join(this.stateDir, `${key}.kv`);
  }

  /** Cache ledger eviction hook: the KV snapshot of an expired entry goes too. */
  evict(key: string): void {
    const path = this.stateFiles.get(key);
    if (!path) return;
    this.stateFiles.delete(key);
    unlink(path).catch(() => undefined);
  }

  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (this.closed) throw new Error('decoder closed');
    const l = await this.lease(req.model);
    try {
      yield* this.run(l, req, signal);
    } finally {
      this.unlease(l);
    }
  }

  private async *run(l: Loaded, req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    const prompt = this.tokenize(l, req.prompt);
    const tokens = prompt.tokens as Token[];
    const ctxSize = l.context.contextSize;
    if (tokens.length + req.params.maxTokens > ctxSize) {
      throw new BadRequestError(
        `This model's context is ${ctxSize} tokens; the prompt has ${tokens.length} and max tokens asks for ${req.params.maxTokens} more`,
      );
    }
    const plan = req.cache.plan(prompt);
    const slot = await this.acquire(l, tokens, signal);
    const seq = slot.seq;
    const gen: Token[] = [];
    // node-llama-cpp ends the iteration itself at an end-of-generation token.
    let finish: FinishReason = 'stop';
    const stop = new StopMatcher(req.params.stop);
    let reused = 0;
    try {
      let keep = seq.compareContextTokens(tokens).firstDifferentIndex;
      const snapshot = plan.hitKey ? this.stateFiles.get(plan.hitKey) : undefined;
      if (snapshot && keep < plan.readTokens && existsSync(snapshot)) {
        await seq.clearHistory();
        await seq.loadStateFromFile(snapshot, { acceptRisk: true });
        keep = seq.compareContextTokens(tokens).firstDifferentIndex;
      }
      keep = Math.min(keep, tokens.length - 1);
      // A new cache entry snapshots the KV state exactly at its prefix, so evaluation restarts there.
      const firstWrite = plan.writes[0]?.length;
      if (firstWrite !== undefined) keep = Math.min(keep, firstWrite);
      if (seq.nextTokenIndex > keep) await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
      reused = keep;
      let at = keep;
      for (const w of plan.writes) {
        if (w.length > at) {
          await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(at, w.length));
          at = w.length;
        }
        const path = this.statePath(w.key);
        await seq.saveStateToFile(path);
        this.stateFiles.set(w.key, path);
      }
      yield {
        type: 'start',
        usage: {
          promptTokens: tokens.length,
          cacheReadTokens: plan.readTokens,
          cacheWriteTokens: plan.writeTokens,
          cacheWrite5mTokens: plan.write5mTokens,
          cacheWrite1hTokens: plan.write1hTokens,
          engineReusedTokens: reused,
        },
      };
      let emitted = 0;
      if (signal?.aborted) finish = 'cancelled';
      else if (req.params.maxTokens > 0) {
        const it = seq.evaluate(tokens.slice(at), {
          ...(req.params.temperature !== undefined ? { temperature: req.params.temperature } : {}),
          ...(req.params.topP !== undefined ? { topP: req.params.topP } : {}),
          ...(req.params.topK !== undefined ? { topK: req.params.topK } : {}),
          ...(req.params.seed !== undefined ? { seed: req.params.seed } : {}),
        });
        for await (const tok of it) {
          if (signal?.aborted) {
            finish = 'cancelled';
            break;
          }
          if (l.model.isEogToken(tok)) break;
          gen.push(tok);
          const text = l.model.detokenize(gen);
          // A multi-byte character split across tokens waits for its remaining bytes.
          const ready = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
          if (ready.length > emitted) {
            const out = stop.push(ready.slice(emitted));
            emitted = ready.length;
            if (out) yield { type: 'text', text: out };
            if (stop.matched !== null) {
              finish = 'stop_sequence';
              break;
            }
          }
          if (gen.length >= req.params.maxTokens) {
            finish = 'length';
            break;
          }
        }
        if (finish !== 'stop_sequence' && finish !== 'cancelled') {
          const text = l.model.detokenize(gen);
          const tail = stop.push(text.slice(emitted)) + stop.flush();
          if (stop.matched !== null) finish = 'stop_sequence';
          if (tail) yield { type: 'text', text: tail };
        }
      } else finish = 'length';
    } finally {
      this.release(l, slot);
    }
    yield {
      type: 'done',
      finishReason: finish,
      stopSequence: stop.matched,
      usage: {
        promptTokens: tokens.length,
        completionTokens: gen.length,
        cacheReadTokens: plan.readTokens,
        cacheWriteTokens: plan.writeTokens,
        cacheWrite5mTokens: plan.write5mTokens,
        cacheWrite1hTokens: plan.write1hTokens,
        engineReusedTokens: reused,
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.contexts.values()].map((p) => p.catch(() => undefined)));
    this.contexts.clear();
    this.ready.clear();
    for (const l of this.live) await (l.disposing ?? l.context.dispose().catch(() => undefined));
    this.live.clear();
    for (const p of this.bases.values()) {
      const b = await p.catch(() => undefined);
      await b?.model.dispose();
    }
    this.bases.clear();
    const llama = await this.llama?.catch(() => undefined);
    await llama?.dispose();
    rmSync(this.stateDir, { recursive: true, force: true });
  }
}

export function defaultThreads(): number {
  const env = Number(process.env['SIFT_DECODER_THREADS']);
  if (Number.isInteger(env) && env > 0) return env;
  return Math.max(1, Math.min(8, cpus().length - 1));
}

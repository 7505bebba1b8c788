import { existsSync, readdirSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Llama, LlamaContext, LlamaGrammar } from 'node-llama-cpp';
import { createHash } from 'node:crypto';
import { grammarSchema } from '../../../core/decoder/structured';
import type { BlobStore } from '../../../core/ports';
import { NotFoundError, ServiceUnavailableError } from '../../../core/errors';
import type { Logger } from '../../../core/logger';
import { createLogger } from '../../../http/logger';
import type {
  DecoderAdapterSpec,
  DecoderBackend,
  DecoderPrompt,
  GenerateRequest,
  GenerationEvent,
  OutputConstraint,
} from '../../../core/decoder/types';
import {
  adapterStem,
  adapterVersion,
  downloadAdapter,
  removeFile,
  removeStaleAdapterFiles,
  unloadLora,
} from './adapterFiles';
import { SMOLLM_SYSTEM, tokenizeChatMl } from './chatml';
import { generateOn } from './generation';
import { KvSnapshots } from './kvSnapshots';
import type { Adapter, Base, LlamaCppOptions, Loaded } from './types';

export type { LlamaCppOptions } from './types';

/**
 * Local decoder on llama.cpp through node-llama-cpp (prebuilt CPU binaries from npm; nothing is
 * downloaded or compiled). Prompts are rendered with the model's ChatML template piece by piece, so
 * cache-marker boundaries are exact token positions. Prefix reuse is real: every slot keeps its KV
 * state and a request goes to the slot sharing the longest token prefix; cache entries additionally
 * snapshot the prefix KV to a file, restored into a slot when no slot still holds that prefix.
 *
 * This class owns the contexts' lifecycle (load, lease, LRU of adapter contexts, dispose) and the
 * adapter registry; llamaCpp/ holds the rest: chatml.ts (prompt → tokens), slots.ts (slot choice and
 * queue), generation.ts (one streamed generation), kvSnapshots.ts, adapterFiles.ts (download, LoRA unload).
 */
export class LlamaCppDecoder implements DecoderBackend {
  readonly name = 'llama.cpp';
  readonly cachesAutomatically = false;
  readonly supportsLogprobs = true;
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
  private readonly snapshots: KvSnapshots;
  private readonly paths = new Map<string, string>();
  /** Grammars by schema hash, most recently used last (building one costs milliseconds to seconds). */
  private readonly grammars = new Map<string, Promise<LlamaGrammar>>();
  private closed = false;
  private readonly logger: Logger;
  /** Adapter files fetched from the blob store (diagnostics and tests). */
  adapterDownloads = 0;

  constructor(private readonly opts: LlamaCppOptions) {
    this.stateDir = opts.stateDir ?? join(tmpdir(), `sift-kv-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
    this.adapterDir = opts.adapterDir ?? join(this.stateDir, 'adapters');
    this.logger = opts.logger ?? createLogger();
    this.snapshots = new KvSnapshots(this.stateDir, this.logger);
  }

  /** The GGUF of a catalog model, if present in one of the model dirs. */
  ggufPath(model: string): string | undefined {
    const known = this.paths.get(model);
    if (known && existsSync(known)) return known;
    for (const d of this.opts.modelDirs.flatMap((dir) => [join(dir, model), join(dir, model.replace('/', '--'))])) {
      if (!existsSync(d)) continue;
      const f = readdirSync(d)
        .filter((n) => n.endsWith('.gguf'))
        .sort()[0];
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
    if (
      known &&
      known.spec.blobPrefix === spec.blobPrefix &&
      Date.now() - known.checkedAt < (this.opts.adapterRecheckMs ?? 60_000)
    )
      return;
    let p = this.ensuring.get(spec.id);
    if (!p) {
      p = this.fetchAdapter(spec, blobs).finally(() => this.ensuring.delete(spec.id));
      this.ensuring.set(spec.id, p);
    }
    return p;
  }

  private async fetchAdapter(spec: DecoderAdapterSpec, blobs: BlobStore): Promise<void> {
    if (!this.ggufPath(spec.baseModel)) {
      throw new ServiceUnavailableError(
        `Base model '${spec.baseModel}' of training job '${spec.id}' is not installed on this deployment`,
      );
    }
    const key = `${spec.blobPrefix}adapter.gguf`;
    const head = await blobs.head(key);
    if (!head) {
      throw new ServiceUnavailableError(
        `Training job '${spec.id}' has no llama.cpp adapter (adapter.gguf) among its model files, so it cannot be served by the local decoder`,
      );
    }
    const version = adapterVersion(spec, head);
    const known = this.adapters.get(spec.id);
    if (known && known.version === version) {
      known.checkedAt = Date.now();
      return;
    }
    const stem = adapterStem(spec.id);
    const filePath = join(this.adapterDir, `${stem}-${version}.gguf`);
    if (await downloadAdapter(blobs, key, filePath, head.size, spec.id, this.logger)) this.adapterDownloads++;
    this.adapters.set(spec.id, { spec, version, filePath, checkedAt: Date.now() });
    if (known) {
      // A new version: requests from now on get a new context; the old one goes once idle.
      const old = this.ready.get(spec.id);
      if (old) this.detach(old);
      else this.contexts.delete(spec.id);
      removeStaleAdapterFiles(
        this.adapterDir,
        stem,
        filePath,
        (path) => [...this.live].some((l) => l.loraPath === path),
        this.logger,
      );
    }
  }

  /**
   * Slots generating now and requests waiting for one, over every context not yet disposed
   * (diagnostics; tests check that an abandoned request gave its slot back).
   */
  slotUse(): { busy: number; waiting: number } {
    let busy = 0;
    let waiting = 0;
    for (const l of this.live) {
      busy += l.slots.filter((s) => s.busy).length;
      waiting += l.waiters.length;
    }
    return { busy, waiting };
  }

  /** Served ids with an adapter context (least recently used first), and adapter contexts not yet disposed: diagnostics. */
  adapterContexts(): { attached: string[]; live: number } {
    const attached = [...this.ready.values()]
      .filter((l) => l.loraPath !== undefined)
      .sort((a, b) => a.lastUsed - b.lastUsed);
    return {
      attached: attached.map((l) => l.key),
      live: [...this.live].filter((l) => l.loraPath !== undefined).length,
    };
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
        if (!path)
          throw new NotFoundError(
            `Weights for '${model}' are not in the model store (run: node scripts/fetch-decoder.mjs)`,
          );
        const llama = await this.getLlama();
        const m = await llama.loadModel({ modelPath: path });
        const template = String(
          (m.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template ?? '',
        );
        return { model: m, defaultSystem: template.includes('SmolLM') ? SMOLLM_SYSTEM : null };
      })();
      // The failure reaches every caller through `p`; this only forgets it, so the next request retries.
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
        const slots = adapter
          ? (this.opts.adapterSlots ?? Math.max(1, Math.floor((this.opts.slots ?? 4) / 2)))
          : (this.opts.slots ?? 4);
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
          await unloadLora(base.model, adapter.filePath, this.logger);
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
      // As above: callers see the failure through `p`; a later request creates the context again.
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

  private async disposeContext(l: Loaded): Promise<void> {
    try {
      await l.context.dispose();
    } catch (error) {
      // Nothing reaches the context any more either way; its memory may stay until the process ends.
      this.logger.error('llama.cpp context dispose failed', { model: l.key, error });
    }
  }

  private disposeWhenIdle(l: Loaded): void {
    if (l.leases > 0 || l.disposing) return;
    l.disposing = (async () => {
      await this.disposeContext(l);
      if (l.loraPath) {
        await unloadLora(l.model, l.loraPath, this.logger);
        // A superseded version's file goes with its last context.
        if (this.adapters.get(l.key)?.filePath !== l.loraPath) await removeFile(l.loraPath, this.logger);
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

  /** Tokenizing needs only the weights' vocabulary: an adapter counts with its base model. */
  async countTokens(model: string, prompt: DecoderPrompt): Promise<number> {
    return tokenizeChatMl(await this.loadBase(this.adapters.get(model)?.spec.baseModel ?? model), prompt).tokens.length;
  }

  /** Cache ledger eviction hook: the KV snapshot of an expired entry goes too. */
  evict(key: string): void {
    this.snapshots.evict(key);
  }

  /** The GBNF grammar of a constraint, from a small LRU keyed by the schema's hash. */
  private grammar(constraint: OutputConstraint): Promise<LlamaGrammar> {
    const schema = grammarSchema(constraint);
    const key = createHash('sha256').update(JSON.stringify(schema)).digest('hex');
    let p = this.grammars.get(key);
    if (p) this.grammars.delete(key);
    else {
      p = this.getLlama().then((llama) => llama.createGrammarForJsonSchema(schema as never));
      p.catch(() => this.grammars.delete(key));
    }
    this.grammars.set(key, p);
    for (const old of this.grammars.keys()) {
      if (this.grammars.size <= GRAMMAR_CACHE_SIZE) break;
      this.grammars.delete(old);
    }
    return p;
  }

  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (this.closed) throw new Error('decoder closed');
    const grammar = req.constraint ? await this.grammar(req.constraint) : undefined;
    const l = await this.lease(req.model);
    try {
      yield* generateOn(l, req, this.snapshots, this.opts.maxQueue ?? 64, signal, grammar);
    } finally {
      this.unlease(l);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    // A context or model that failed to load was reported to its request and holds nothing to free.
    await Promise.allSettled(this.contexts.values());
    this.contexts.clear();
    this.ready.clear();
    for (const l of this.live) await (l.disposing ?? this.disposeContext(l));
    this.live.clear();
    for (const p of this.bases.values()) {
      const [loaded] = await Promise.allSettled([p]);
      if (loaded.status === 'fulfilled') await loaded.value.model.dispose();
    }
    this.bases.clear();
    const [llama] = await Promise.allSettled([this.llama ?? Promise.resolve(undefined)]);
    if (llama.status === 'fulfilled') await llama.value?.dispose();
    this.snapshots.removeAll();
  }
}

const GRAMMAR_CACHE_SIZE = 32;

export function defaultThreads(): number {
  const env = Number(process.env.SIFT_DECODER_THREADS);
  if (Number.isInteger(env) && env > 0) return env;
  return Math.max(1, Math.min(8, cpus().length - 1));
}

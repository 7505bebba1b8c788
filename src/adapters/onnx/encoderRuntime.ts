/**
 * The encoder runtime of a process with onnxruntime (local mode, the ECS encoder service): model
 * id → exported weights in the model store → a local copy (a cache directory, SIFT_ENCODER_CACHE_DIR)
 * → shared `EncoderModel` sessions (loaded once per model directory, LRU with a memory bound).
 * The core reaches it through the EncoderRuntime port (svc.encoder).
 */
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { EncoderBatcher, type BatchedInferOptions, type BatcherOptions } from '../../encoder/batcher';
import { EncoderModel, type InferOutput, type Precision } from '../../encoder/engine';
import type { EncoderSchema } from '../../encoder/schema';
import { ServiceUnavailableError } from '../../core/errors';
import { containedPath } from '../../core/safePath';
import { TtlCache } from '../../core/hotPath';
import { createLogger, type Logger } from '../../http/logger';
import type { BlobStore, EncoderRuntime, ServedEncoder } from '../../core/ports';
import type { ExecutionProvider, ExecutionProviderOutcome } from '../../core/extraction/types';
import { missingAsUndefined } from '../fs/missingFile';

const envNumber = (name: string): number | undefined => {
  const v = process.env[name];
  return v === undefined || v === '' ? undefined : Number(v);
};

/** The batcher's defaults, overridable per process (README "Encoder batching" settings). */
export function batcherOptionsFromEnv(): BatcherOptions {
  const o: BatcherOptions = {};
  const wait = envNumber('SIFT_ENCODER_BATCH_WAIT_MS');
  const texts = envNumber('SIFT_ENCODER_BATCH_MAX_TEXTS');
  const chars = envNumber('SIFT_ENCODER_BATCH_MAX_CHARS');
  const inFlight = envNumber('SIFT_ENCODER_BATCH_IN_FLIGHT');
  const pass = envNumber('SIFT_ENCODER_BATCH_PASS_TEXTS');
  if (wait !== undefined) o.maxWaitMs = wait;
  if (texts !== undefined) o.maxBatchTexts = texts;
  if (chars !== undefined) o.maxBatchChars = chars;
  if (inFlight !== undefined) o.maxInFlight = inFlight;
  if (pass !== undefined) o.passTexts = pass;
  return o;
}

/**
 * How long a model directory checked against the store's manifest is trusted without checking again:
 * the request path then costs no store round trips (a rebuilt model is picked up this much later).
 */
const CHECKED_DIR_TTL_MS = 5000;

/**
 * Files the engine reads; the rest of a model directory (safetensors, adapters) is not fetched. Each
 * is copied to the key's path under the model's directory only if it stays inside it (containedPath:
 * `onnx/../../x` passes this filter).
 */
const WANTED = (rel: string) =>
  rel === 'tokenizer.json' || rel === 'manifest.json' || rel === 'config.json' || rel.startsWith('onnx/');

/** The fragment architecture a model's manifest names (`architecture: gliner2-boundary`); anything else is a span export. */
function manifestArchitecture(manifest: string): 'span' | 'boundary' {
  try {
    return (JSON.parse(manifest) as { architecture?: unknown }).architecture === 'gliner2-boundary'
      ? 'boundary'
      : 'span';
  } catch {
    return 'span';
  }
}

export interface EncoderRuntimeOptions {
  cacheDir?: string;
  /** Bytes of ONNX weights kept loaded at once (least recently used models are released). */
  maxLoadedBytes?: number;
  /**
   * Bytes of model copies kept in `cacheDir` (least recently used copies not loaded are deleted).
   * Each trained model adds its export (~200 MB for the mini model); unbounded, a server that serves
   * many jobs fills its disk.
   */
  maxCacheBytes?: number;
  precision?: Precision;
  threads?: number;
  /** Batching across requests (src/encoder/batcher.ts); default: `SIFT_ENCODER_BATCH_*` settings, else its defaults. */
  batching?: BatcherOptions;
  /** How long a checked local copy is trusted (ms); default 5 s. */
  checkedTtlMs?: number;
  /** Default: SIFT_ENCODER_EXECUTION_PROVIDER (src/encoder/executionProvider.ts). */
  executionProvider?: ExecutionProvider;
  /** Default: the service's JSON logger. */
  logger?: Logger;
}

export class OnnxEncoderRuntime implements EncoderRuntime<EncoderModel> {
  readonly cacheDir: string;
  private readonly maxBytes: number;
  private readonly maxCacheBytes: number;
  private readonly precision: Precision;
  private readonly threads: number | undefined;
  private readonly executionProvider: ExecutionProvider | undefined;
  private readonly loaded = new Map<string, Promise<EncoderModel>>();
  /** Model directory → where its sessions run, for readiness (never pruned: a handful of entries). */
  private readonly providers = new Map<string, ExecutionProviderOutcome>();
  private readonly fetching = new Map<string, Promise<string>>();
  /** Model prefix → its local copy, recently checked against the manifest in the store. */
  private readonly checked: TtlCache<string>;
  /** Coalesces concurrent requests' `infer` calls per model (one batcher for every request of the process). */
  readonly batcher: EncoderBatcher;
  /** The service's JSON logger: batch summaries, and the execution provider each model's sessions use. */
  private readonly logger: Logger;

  constructor(opts: EncoderRuntimeOptions = {}) {
    this.logger = opts.logger ?? createLogger();
    this.executionProvider = opts.executionProvider;
    this.batcher = new EncoderBatcher({ logger: this.logger, ...batcherOptionsFromEnv(), ...opts.batching });
    this.cacheDir = opts.cacheDir ?? process.env.SIFT_ENCODER_CACHE_DIR ?? join(tmpdir(), 'sift-encoder-cache');
    this.maxBytes = opts.maxLoadedBytes ?? Number(process.env.SIFT_ENCODER_MAX_LOADED_BYTES ?? 2 * 1024 ** 3);
    this.maxCacheBytes = opts.maxCacheBytes ?? Number(process.env.SIFT_ENCODER_CACHE_MAX_BYTES ?? 8 * 1024 ** 3);
    this.precision = opts.precision ?? (process.env.SIFT_ENCODER_PRECISION as Precision | undefined) ?? 'fp32';
    this.threads = opts.threads;
    this.checked = new TtlCache<string>(opts.checkedTtlMs ?? CHECKED_DIR_TTL_MS, 1000);
  }

  /** Copies the model's serving files from the blob store once (keyed by prefix + manifest, checked every few seconds). */
  async localDir(blobs: BlobStore, model: ServedEncoder): Promise<string> {
    const recent = this.checked.get(model.prefix);
    if (recent !== undefined && existsSync(join(recent, '.complete'))) return recent;
    const dir = await this.fetchDir(blobs, model);
    this.checked.set(model.prefix, dir);
    return dir;
  }

  private async fetchDir(blobs: BlobStore, model: ServedEncoder): Promise<string> {
    const manifestKey = `${model.prefix}manifest.json`;
    // the manifest is written last and withdrawn while a model is re-published: without it the
    // files may be half old, half new (the request path no longer HEADs it: models.ts)
    if (!(await blobs.head(manifestKey)))
      throw new ServiceUnavailableError(
        `Model '${model.requested}' is not in the model store (no ${manifestKey}); it may be being published`,
      );
    const manifest = await blobs.getText(manifestKey);
    const key = createHash('sha256').update(model.prefix).update('\0').update(manifest).digest('hex').slice(0, 24);
    const target = join(this.cacheDir, key);
    const pending = this.fetching.get(target);
    if (pending) return pending;
    const p = (async () => {
      const done = join(target, '.complete');
      if (existsSync(done)) {
        // the marker's mtime is the copy's last use: pruneCache keeps the most recently used. A
        // marker pruned meanwhile is fetched again next time; any other failure only costs LRU order.
        const now = new Date();
        await utimes(done, now, now)
          .catch(missingAsUndefined)
          .catch((err: unknown) =>
            createLogger().warn('encoder cache: could not mark a model copy as used', {
              dir: target,
              error: String(err),
            }),
          );
        return target;
      }
      const keys = (await blobs.list(model.prefix)).filter((k) => WANTED(k.slice(model.prefix.length)));
      const missing = EncoderModel.requiredFiles('fp32', manifestArchitecture(manifest)).filter(
        (f) => !keys.includes(model.prefix + f),
      );
      if (missing.length)
        throw new ServiceUnavailableError(
          `Model '${model.requested}' has no servable ONNX export in the model store (missing ${missing.join(', ')})`,
        );
      // download beside the target, then rename: concurrent processes never see half a model
      const staging = `${target}.part-${process.pid}-${Date.now()}`;
      for (const k of keys) {
        const file = containedPath(staging, k.slice(model.prefix.length), `model store key ${k}`);
        await mkdir(dirname(file), { recursive: true });
        await pipeline(await blobs.stream(k), createWriteStream(file));
      }
      await writeFile(join(staging, '.complete'), new Date().toISOString());
      await rm(target, { recursive: true, force: true });
      await rename(staging, target).catch(async (err) => {
        await rm(staging, { recursive: true, force: true });
        if (!existsSync(done)) throw err;
      });
      await this.pruneCache(target).catch((err: unknown) =>
        createLogger().warn('encoder cache prune failed', { error: String(err) }),
      );
      return target;
    })();
    this.fetching.set(target, p);
    try {
      return await p;
    } finally {
      this.fetching.delete(target);
    }
  }

  /**
   * Deletes the least recently used complete copies until the cache fits `maxCacheBytes`; never the
   * copy just fetched, one whose sessions are loaded, or one being fetched. A deleted copy that is
   * asked for again is fetched again (`localDir` checks its `.complete` marker).
   */
  async pruneCache(keep: string): Promise<void> {
    const names = (await readdir(this.cacheDir).catch(missingAsUndefined)) ?? []; // no cache directory yet: nothing to prune
    const inUse = new Set([
      keep,
      ...this.fetching.keys(),
      ...[...this.loaded.keys()].map((k) => k.slice(0, k.lastIndexOf('#'))),
    ]);
    const copies = [];
    for (const name of names) {
      const dir = join(this.cacheDir, name);
      const marker = await stat(join(dir, '.complete')).catch(missingAsUndefined);
      if (!marker) continue; // no marker: a staging directory or a foreign file, not ours to judge
      copies.push({ dir, lastUsed: marker.mtimeMs, bytes: await bytesUnder(dir) });
    }
    let total = copies.reduce((n, c) => n + c.bytes, 0);
    for (const c of copies.sort((a, b) => a.lastUsed - b.lastUsed)) {
      if (total <= this.maxCacheBytes) break;
      if (inUse.has(c.dir)) continue;
      await rm(c.dir, { recursive: true, force: true });
      total -= c.bytes;
    }
  }

  /** Shared sessions for a model directory (loaded once; LRU-evicted over the memory bound). */
  async model(dir: string, precision: Precision = this.precision): Promise<EncoderModel> {
    const usePrecision = precision === 'int8' && !existsSync(join(dir, 'onnx/encoder.int8.onnx')) ? 'fp32' : precision;
    const key = `${dir}#${usePrecision}`;
    let p = this.loaded.get(key);
    if (p) {
      this.loaded.delete(key);
      this.loaded.set(key, p); // most recently used last
      return p;
    }
    p = EncoderModel.load(dir, {
      precision: usePrecision,
      logger: this.logger,
      ...(this.executionProvider ? { executionProvider: this.executionProvider } : {}),
      ...(this.threads ? { threads: this.threads } : {}),
    });
    this.loaded.set(key, p);
    // a load that failed is forgotten (the next request tries again); its error reaches the caller below
    p.catch(() => this.loaded.delete(key));
    const m = await p;
    this.providers.set(dir, m.executionProvider);
    await this.evict(key);
    return m;
  }

  private async evict(keep: string): Promise<void> {
    // a load that failed holds no memory (its error went to the request that started it)
    const sizes = await Promise.all(
      [...this.loaded.entries()].map(async ([k, p]) => [k, (await p.catch(() => undefined))?.bytes ?? 0] as const),
    );
    let total = sizes.reduce((n, [, b]) => n + b, 0);
    for (const [k, b] of sizes) {
      if (total <= this.maxBytes) break;
      if (k === keep) continue;
      const p = this.loaded.get(k);
      this.loaded.delete(k);
      total -= b;
      // sessions in use by a running request finish first: release after a grace period
      void p?.then((m) =>
        setTimeout(
          () =>
            void m
              .release()
              .catch((err: unknown) =>
                createLogger().warn('encoder: releasing an evicted model failed', { model: k, error: String(err) }),
              ),
          30_000,
        ).unref(),
      );
    }
  }

  /** A request's extraction: `model.infer`, batched with concurrent requests for the same model and schema. */
  infer(
    model: EncoderModel,
    texts: string[],
    schema: EncoderSchema,
    opts: BatchedInferOptions = {},
  ): Promise<InferOutput> {
    return this.batcher.infer(model, texts, schema, opts);
  }

  loadedModels(): string[] {
    return [...this.loaded.keys()];
  }

  executionProviders(): ReadonlyMap<string, ExecutionProviderOutcome> {
    return this.providers;
  }

  async close(): Promise<void> {
    this.batcher.close();
    const all = [...this.loaded.values()];
    this.loaded.clear();
    // a load that failed has nothing to release
    await Promise.all(all.map(async (p) => (await p.catch(() => undefined))?.release()));
  }
}

async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    // a file removed while we count adds nothing
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name)).catch(missingAsUndefined))?.size ?? 0;
  }
  return total;
}

/** Reads a model's manifest (tests, diagnostics). */
export async function readManifest(dir: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as Record<string, unknown>;
}

/**
 * Serving side of the encoder engine: model id → exported weights in the model store → a local
 * copy → shared `EncoderModel` sessions (loaded once per model directory, LRU with a memory bound).
 */
import { baseModelManifestKey } from '../modelLayout';
import { createHash } from 'node:crypto';
import { createWriteStream, existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Services } from '../context';
import { resolveServingTarget } from '../deployments';
import { ServiceUnavailableError, ValidationError } from '../errors';
import { TtlCache } from '../hotPath';
import { missingWeightsError } from '../modelBuild';
import { createLogger } from '../../http/logger';
import { batcherOptionsFromEnv, EncoderBatcher, type BatchedInferOptions, type BatcherOptions } from './batcher';
import { EncoderModel, type InferOutput, type Precision } from './engine';
import type { EncoderSchema } from './schema';

export interface ResolvedEncoder {
  requested: string;
  /** The catalog model at the root of the weights. */
  baseModel: string;
  /** Blob-store prefix of the model directory (`…/onnx/`, `tokenizer.json`, `manifest.json`). */
  prefix: string;
  projectId: string | null;
  trainingJobId: string | null;
}

const loc = ['body', 'model_id'];

/**
 * SPEC model identifiers for extraction (deployments.ts): a catalog encoder id, a deployed training
 * job id, or a project name/id; the weights are those the deployment pins.
 */
export async function resolveEncoderModel(svc: Services, teamId: string, model: string): Promise<ResolvedEncoder> {
  const target = await resolveServingTarget(svc, teamId, model);
  if (target.model.type !== 'encoder') {
    const what = target.kind === 'catalog' ? `'${model}' is a decoder model` : target.projectId ? `project '${model}' serves a decoder model` : `training job '${model}' trained a decoder model`;
    throw ValidationError.field(loc, `${what}: extraction needs an encoder; for generation send task: "generate" with messages`);
  }
  if (target.kind === 'catalog') {
    if (!(await svc.blobs.head(baseModelManifestKey(model)))) {
      throw missingWeightsError(svc, model, `Model '${model}' is in the catalog but its weights are not in the model store on this deployment (GET /base-models shows available: false)`);
    }
    return { requested: model, baseModel: model, prefix: `models/${model}/`, projectId: null, trainingJobId: null };
  }
  return { requested: model, baseModel: target.model.id, prefix: target.job.deployment.blob_prefix, projectId: target.projectId, trainingJobId: target.job.id };
}

/**
 * How long a model directory checked against the store's manifest is trusted without checking again:
 * the request path then costs no store round trips (a rebuilt model is picked up this much later).
 */
const CHECKED_DIR_TTL_MS = 5000;

/** Files the engine reads; the rest of a model directory (safetensors, adapters) is not fetched. */
const WANTED = (rel: string) => rel === 'tokenizer.json' || rel === 'manifest.json' || rel === 'config.json' || rel.startsWith('onnx/');

export interface EncoderRuntimeOptions {
  cacheDir?: string;
  /** Bytes of ONNX weights kept loaded at once (least recently used models are released). */
  maxLoadedBytes?: number;
  precision?: Precision;
  threads?: number;
  /** Batching across requests (batcher.ts); default: `SIFT_ENCODER_BATCH_*` settings, else its defaults. */
  batching?: BatcherOptions;
}

export class EncoderRuntime {
  readonly cacheDir: string;
  private readonly maxBytes: number;
  private readonly precision: Precision;
  private readonly threads: number | undefined;
  private readonly loaded = new Map<string, Promise<EncoderModel>>();
  private readonly fetching = new Map<string, Promise<string>>();
  /** Model prefix → its local copy, recently checked against the manifest in the store. */
  private readonly checked = new TtlCache<string>(CHECKED_DIR_TTL_MS, 1000);
  /** Coalesces concurrent requests' `infer` calls per model (one batcher for every request of the process). */
  readonly batcher: EncoderBatcher;

  constructor(opts: EncoderRuntimeOptions = {}) {
    this.batcher = new EncoderBatcher({ logger: createLogger(), ...batcherOptionsFromEnv(), ...opts.batching });
    this.cacheDir = opts.cacheDir ?? process.env['SIFT_ENCODER_CACHE_DIR'] ?? join(tmpdir(), 'sift-encoder-cache');
    this.maxBytes = opts.maxLoadedBytes ?? Number(process.env['SIFT_ENCODER_MAX_LOADED_BYTES'] ?? 2 * 1024 ** 3);
    this.precision = opts.precision ?? ((process.env['SIFT_ENCODER_PRECISION'] as Precision | undefined) ?? 'fp32');
    this.threads = opts.threads;
  }

  /** Copies the model's serving files from the blob store once (keyed by prefix + manifest, checked every few seconds). */
  async localDir(svc: Services, model: ResolvedEncoder): Promise<string> {
    const recent = this.checked.get(model.prefix);
    if (recent !== undefined && existsSync(join(recent, '.complete'))) return recent;
    const dir = await this.fetchDir(svc, model);
    this.checked.set(model.prefix, dir);
    return dir;
  }

  private async fetchDir(svc: Services, model: ResolvedEncoder): Promise<string> {
    const manifestKey = `${model.prefix}manifest.json`;
    const manifest = (await svc.blobs.head(manifestKey)) ? await svc.blobs.getText(manifestKey) : '';
    const key = createHash('sha256').update(model.prefix).update('\0').update(manifest).digest('hex').slice(0, 24);
    const target = join(this.cacheDir, key);
    const pending = this.fetching.get(target);
    if (pending) return pending;
    const p = (async () => {
      const done = join(target, '.complete');
      if (existsSync(done)) return target;
      const keys = (await svc.blobs.list(model.prefix)).filter((k) => WANTED(k.slice(model.prefix.length)));
      const missing = EncoderModel.requiredFiles('fp32').filter((f) => !keys.includes(model.prefix + f));
      if (missing.length) throw new ServiceUnavailableError(`Model '${model.requested}' has no servable ONNX export in the model store (missing ${missing.join(', ')})`);
      // download beside the target, then rename: concurrent processes never see half a model
      const staging = `${target}.part-${process.pid}-${Date.now()}`;
      for (const k of keys) {
        const file = join(staging, k.slice(model.prefix.length));
        await mkdir(dirname(file), { recursive: true });
        await pipeline(await svc.blobs.stream(k), createWriteStream(file));
      }
      await writeFile(join(staging, '.complete'), new Date().toISOString());
      await rm(target, { recursive: true, force: true });
      await rename(staging, target).catch(async (err) => {
        await rm(staging, { recursive: true, force: true });
        if (!existsSync(done)) throw err;
      });
      return target;
    })();
    this.fetching.set(target, p);
    try {
      return await p;
    } finally {
      this.fetching.delete(target);
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
    p = EncoderModel.load(dir, { precision: usePrecision, ...(this.threads ? { threads: this.threads } : {}) });
    this.loaded.set(key, p);
    p.catch(() => this.loaded.delete(key));
    const m = await p;
    await this.evict(key);
    return m;
  }

  private async evict(keep: string): Promise<void> {
    const sizes = await Promise.all([...this.loaded.entries()].map(async ([k, p]) => [k, (await p.catch(() => undefined))?.bytes ?? 0] as const));
    let total = sizes.reduce((n, [, b]) => n + b, 0);
    for (const [k, b] of sizes) {
      if (total <= this.maxBytes) break;
      if (k === keep) continue;
      const p = this.loaded.get(k);
      this.loaded.delete(k);
      total -= b;
      // sessions in use by a running request finish first: release after a grace period
      void p?.then((m) => setTimeout(() => void m.release().catch(() => {}), 30_000).unref());
    }
  }

  /** A request's extraction: `model.infer`, batched with concurrent requests for the same model and schema. */
  infer(model: EncoderModel, texts: string[], schema: EncoderSchema, opts: BatchedInferOptions = {}): Promise<InferOutput> {
    return this.batcher.infer(model, texts, schema, opts);
  }

  loadedModels(): string[] {
    return [...this.loaded.keys()];
  }

  async close(): Promise<void> {
    this.batcher.close();
    const all = [...this.loaded.values()];
    this.loaded.clear();
    await Promise.all(all.map(async (p) => (await p.catch(() => undefined))?.release()));
  }
}

const runtimes = new WeakMap<Services, EncoderRuntime>();
/** One runtime per service container (sessions shared by every request of the process). */
export function encoderRuntime(svc: Services): EncoderRuntime {
  let r = runtimes.get(svc);
  if (!r) {
    r = new EncoderRuntime();
    runtimes.set(svc, r);
  }
  return r;
}
export async function closeEncoderRuntime(svc: Services): Promise<void> {
  await runtimes.get(svc)?.close();
  runtimes.delete(svc);
}

/** Reads a model's manifest (tests, diagnostics). */
export async function readManifest(dir: string): Promise<Record<string, unknown>> {
  return JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')) as Record<string, unknown>;
}

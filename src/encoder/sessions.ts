/**
 * The five ONNX fragments behind one small interface: in-process onnxruntime-node sessions, or the
 * same sessions in a worker thread (`SIFT_ORT_WORKER=1`, and automatically under Jest, whose VM
 * realm's typed arrays onnxruntime-common's `instanceof` checks reject).
 */
import { dirname } from 'node:path';
import { Worker } from 'node:worker_threads';
// Type-only: onnxruntime-node (native, ~290 MB) loads on first use; Lambda bundles never carry it.
import type * as Ort from 'onnxruntime-node';
import {
  executionProviderFromEnv,
  ortProviders,
  withProviderFallback,
  type ExecutionProvider,
  type ExecutionProviderOutcome,
  type ProviderLog,
} from './executionProvider';

export type SessionName =
  | 'encoder'
  | 'spanRep'
  | 'spanScores'
  | 'countPred'
  | 'countEmbed'
  | 'countEmbedC1'
  | 'classifier'
  | 'boundaryCandidates'
  | 'boundaryExplicit'
  | 'relationMlp'
  | 'pooledClassifier';
export interface Feed {
  type: 'int64' | 'float32';
  data: BigInt64Array | Float32Array;
  dims: number[];
}
export interface Output {
  data: Float32Array;
  dims: readonly number[];
}
export interface SessionSet {
  run(name: SessionName, feeds: Record<string, Feed>): Promise<Record<string, Output>>;
  release(): Promise<void>;
}

export interface SessionOptions {
  threads?: number | undefined;
  /** Default: SIFT_ENCODER_EXECUTION_PROVIDER (executionProvider.ts); `cuda` falls back to CPU where it can't load. */
  executionProvider?: ExecutionProvider | undefined;
  /** Where the provider in use (and any fallback) is reported (the runtime passes the service's logger); none: not reported. */
  logger?: ProviderLog | undefined;
}

function ortOptions(o: SessionOptions, provider: ExecutionProvider): Ort.InferenceSession.SessionOptions {
  const threads = o.threads ?? Number(process.env.SIFT_ENCODER_THREADS ?? 0);
  return {
    executionProviders: ortProviders(provider),
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    // spinning worker threads starve everything else on a shared, busy CPU
    extra: {
      session: {
        intra_op: { allow_spinning: process.env.SIFT_ENCODER_SPIN === '1' ? '1' : '0' },
        inter_op: { allow_spinning: '0' },
      },
    },
  };
}

class InProcess implements SessionSet {
  constructor(
    private readonly ort: typeof Ort,
    private readonly s: Record<SessionName, Ort.InferenceSession>,
  ) {}
  async run(name: SessionName, feeds: Record<string, Feed>): Promise<Record<string, Output>> {
    const f: Record<string, Ort.Tensor> = {};
    for (const [k, v] of Object.entries(feeds)) f[k] = new this.ort.Tensor(v.type, v.data, v.dims);
    const out = await this.s[name].run(f);
    const res: Record<string, Output> = {};
    for (const [k, t] of Object.entries(out)) res[k] = { data: t.data as Float32Array, dims: t.dims };
    return res;
  }
  async release(): Promise<void> {
    await Promise.all(Object.values(this.s).map((x) => x.release()));
  }
}

class InWorker implements SessionSet {
  private next = 0;
  private readonly pending = new Map<number, { ok: (v: Record<string, Output>) => void; fail: (e: Error) => void }>();
  private constructor(private readonly w: Worker) {
    w.on('message', (m: { id: number; res?: Record<string, Output>; error?: string }) => {
      const p = this.pending.get(m.id);
      if (!p) return;
      this.settle(m.id);
      if (m.error) p.fail(new Error(m.error));
      else p.ok(m.res!);
    });
    w.on('error', (e) => {
      for (const p of this.pending.values()) p.fail(e);
      this.pending.clear();
    });
    // After the listeners: adding a 'message' listener refs the worker's port again (Node's
    // worker_threads docs, port.ref()), and a ref'd idle worker keeps its process from ever exiting.
    w.unref();
  }
  /** The worker holds the process open only while a call is in flight: an idle, unreleased set never does. */
  private send(id: number, msg: object, ok: (v: Record<string, Output>) => void, fail: (e: Error) => void): void {
    if (this.pending.size === 0) this.w.ref();
    this.pending.set(id, { ok, fail });
    this.w.postMessage(msg);
  }
  private settle(id: number): void {
    this.pending.delete(id);
    if (this.pending.size === 0) this.w.unref();
  }
  static async create(
    files: Partial<Record<SessionName, string>>,
    options: Ort.InferenceSession.SessionOptions,
  ): Promise<InWorker> {
    const w = new Worker(new URL('./ortWorker.mjs', import.meta.url), { workerData: { files, options } });
    try {
      await new Promise<void>((ok, fail) => {
        w.once('message', (m: { ready: boolean; error?: string }) => (m.ready ? ok() : fail(new Error(m.error))));
        w.once('error', fail);
      });
    } catch (err) {
      await w.terminate(); // sessions it did create go with it
      throw err;
    }
    return new InWorker(w);
  }
  run(name: SessionName, feeds: Record<string, Feed>): Promise<Record<string, Output>> {
    const id = this.next++;
    return new Promise((ok, fail) => this.send(id, { id, name, feeds }, ok, fail));
  }
  async release(): Promise<void> {
    const id = this.next++;
    // it fails only when the worker died (its 'error' event): terminate() below ends it, and its sessions, either way
    await new Promise((ok, fail) => this.send(id, { id, release: true }, ok, fail)).catch(() => undefined);
    await this.w.terminate();
  }
}

const useWorker = () => process.env.SIFT_ORT_WORKER === '1' || process.env.JEST_WORKER_ID !== undefined;

async function createInProcess(
  files: Partial<Record<SessionName, string>>,
  options: Ort.InferenceSession.SessionOptions,
): Promise<SessionSet> {
  const ort = await import('onnxruntime-node');
  const names = Object.keys(files) as SessionName[];
  const settled = await Promise.allSettled(names.map((n) => ort.InferenceSession.create(files[n]!, options)));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await Promise.all(settled.map((r) => (r.status === 'fulfilled' ? r.value.release() : undefined)));
    throw failed.reason;
  }
  const loaded = settled.map((r) => (r as PromiseFulfilledResult<Ort.InferenceSession>).value);
  return new InProcess(
    ort,
    Object.fromEntries(names.map((n, i) => [n, loaded[i]!])) as Record<SessionName, Ort.InferenceSession>,
  );
}

const silentLog: ProviderLog = { info: () => {}, warn: () => {} };

/** The model's fragments as sessions on the configured execution provider (CPU when it can't load), and which one they got. */
export async function createSessions(
  files: Partial<Record<SessionName, string>>,
  o: SessionOptions = {},
): Promise<SessionSet & { readonly provider: ExecutionProviderOutcome }> {
  const wanted = o.executionProvider ?? executionProviderFromEnv();
  const create = (p: ExecutionProvider) =>
    useWorker() ? InWorker.create(files, ortOptions(o, p)) : createInProcess(files, ortOptions(o, p));
  const first = Object.values(files)[0];
  const context = { fragments: Object.keys(files).length, ...(first ? { model_dir: dirname(dirname(first)) } : {}) };
  const { value, provider } = await withProviderFallback(wanted, create, o.logger ?? silentLog, context);
  return Object.assign(value, { provider });
}

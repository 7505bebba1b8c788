/**
 * Batching across requests ("Batching across requests" in docs/reference/encoder.md): concurrent extraction
 * requests for the same loaded model and the same schema + options are coalesced into one engine
 * call (`EncoderModel.infer` with every request's texts), and each request gets its own slice of the
 * output back — results, chunk/group counts and its own input tokens for billing.
 *
 * The engine runs one schema per call (the prompt and every head are shared by the batch), so only
 * requests with an identical schema and threshold share a batch; others queue beside them and take
 * turns. Per model, at most `maxInFlight` engine calls run at once: on a CPU the sessions already use
 * every core, and requests arriving meanwhile form the next batch. An idle model waits at most
 * `maxWaitMs` for batch-mates before it starts. A batch that fails is re-run one request at a time,
 * so a bad request fails alone; a request whose signal aborts leaves its queue (or drops its share
 * of a running batch) at once.
 */
import type { RuntimeExtractOptions } from '../core/extraction/types';
import type { EncoderModel, InferOptions, InferOutput } from './engine';
import type { EncoderSchema } from './schema';

/** Where the batch summary goes (the service's logger, passed in by its runtime). */
export interface BatchLog {
  info(message: string, extra?: Record<string, unknown>): void;
}

export interface BatcherOptions {
  /** How long the first request to an idle model waits for batch-mates (ms). 0: start at once. */
  maxWaitMs?: number;
  /** Texts per engine call (a request with more runs alone). */
  maxBatchTexts?: number;
  /**
   * Records (texts or windows) per encoder pass inside an engine call (`InferOptions.batchSize`). 32:
   * fewer session runs per call, ~16 % more requests/s at 32 clients than 8 on a quiet box (docs/experiments/encoder.md
   * "Quiet machine"); padding and the padded tokens of a pass stay bounded (batches.ts), so long
   * windows still run 8 at a time.
   */
  passTexts?: number;
  /** Characters per engine call over all its texts (a request with more runs alone). */
  maxBatchChars?: number;
  /** Engine calls running at once per model. */
  maxInFlight?: number;
  /** Where the periodic batch-size summary goes; none: no summary. */
  logger?: BatchLog | undefined;
  /** How often the summary is logged while batches run (ms). */
  summaryEveryMs?: number;
}

/** Options a request may send (the core's RuntimeExtractOptions); everything but `signal` must match for requests to share a batch. */
export type BatchedInferOptions = RuntimeExtractOptions;

export interface BatchStats {
  /** Engine calls made (re-runs after a failed batch included). */
  batches: number;
  requests: number;
  texts: number;
  /** Requests per engine call → how many calls had that many. */
  requestsPerBatch: Record<number, number>;
  maxRequestsInBatch: number;
  /** Batches that failed and were re-run one request at a time. */
  splitAfterFailure: number;
  /** Requests that left because their signal aborted. */
  aborted: number;
  /** Total ms requests spent queued, and engine ms over all calls (means: divide by requests / batches). */
  queuedMs: number;
  runMs: number;
}

interface Entry {
  texts: string[];
  schema: EncoderSchema;
  chars: number;
  opts: InferOptions;
  enqueued: number;
  settled: boolean;
  resolve: (out: InferOutput) => void;
  reject: (err: unknown) => void;
  cleanup: () => void;
}

/** One model's queues: one per batch key (schema + options), served oldest first. */
interface ModelQueue {
  groups: Map<string, Entry[]>;
  inFlight: number;
  timer: NodeJS.Timeout | undefined;
}

const emptyStats = (): BatchStats => ({
  batches: 0,
  requests: 0,
  texts: 0,
  requestsPerBatch: {},
  maxRequestsInBatch: 0,
  splitAfterFailure: 0,
  aborted: 0,
  queuedMs: 0,
  runMs: 0,
});

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The request was aborted', 'AbortError');
}

export class EncoderBatcher {
  readonly maxWaitMs: number;
  readonly maxBatchTexts: number;
  readonly maxBatchChars: number;
  readonly maxInFlight: number;
  readonly passTexts: number;
  private readonly queues = new Map<EncoderModel, ModelQueue>();
  private totals = emptyStats();
  private sinceSummary = emptyStats();
  private readonly summary: NodeJS.Timeout | undefined;

  constructor(opts: BatcherOptions = {}) {
    this.maxWaitMs = Math.max(0, opts.maxWaitMs ?? 2);
    this.maxBatchTexts = Math.max(1, Math.floor(opts.maxBatchTexts ?? 32));
    this.maxBatchChars = Math.max(1, Math.floor(opts.maxBatchChars ?? 64_000));
    this.maxInFlight = Math.max(1, Math.floor(opts.maxInFlight ?? 1));
    this.passTexts = Math.max(1, Math.floor(opts.passTexts ?? 32));
    const logger = opts.logger;
    if (logger) {
      this.summary = setInterval(() => {
        const s = this.sinceSummary;
        if (!s.batches) return;
        this.sinceSummary = emptyStats();
        logger.info('encoder batches', {
          batches: s.batches,
          requests: s.requests,
          texts: s.texts,
          requests_per_batch: s.requestsPerBatch,
          max_requests_in_batch: s.maxRequestsInBatch,
          mean_queued_ms: Math.round(s.queuedMs / Math.max(1, s.requests)),
          mean_run_ms: Math.round(s.runMs / s.batches),
          split_after_failure: s.splitAfterFailure,
          aborted: s.aborted,
        });
      }, opts.summaryEveryMs ?? 60_000);
      this.summary.unref();
    }
  }

  /** Counters since this batcher started (benchmarks, tests, diagnostics). */
  stats(): BatchStats {
    return structuredClone(this.totals);
  }

  /**
   * `model.infer(texts, schema, opts)` for one request, run in a batch with the concurrent requests
   * that share its model, schema and options. Same output as calling the engine alone.
   */
  infer(
    model: EncoderModel,
    texts: string[],
    schema: EncoderSchema,
    opts: BatchedInferOptions = {},
  ): Promise<InferOutput> {
    const { signal, ...rest } = opts;
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const engineOpts: InferOptions = { ...rest, threshold: rest.threshold ?? 0.5 };
    const key = JSON.stringify([
      schema,
      engineOpts.threshold,
      engineOpts.chunkWords,
      engineOpts.chunkOverlap,
      engineOpts.labelGroupTokens,
    ]);
    return new Promise<InferOutput>((resolve, reject) => {
      const entry: Entry = {
        texts,
        schema,
        chars: texts.reduce((n, t) => n + t.length, 0),
        opts: engineOpts,
        enqueued: performance.now(),
        settled: false,
        resolve: (out) => {
          if (entry.settled) return;
          entry.settled = true;
          entry.cleanup();
          resolve(out);
        },
        reject: (err) => {
          if (entry.settled) return;
          entry.settled = true;
          entry.cleanup();
          reject(err);
        },
        cleanup: () => {},
      };
      if (signal) {
        const onAbort = () => {
          this.count((s) => s.aborted++);
          this.dequeue(model, key, entry);
          entry.reject(abortReason(signal));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        entry.cleanup = () => signal.removeEventListener('abort', onAbort);
      }
      const q = this.queueOf(model);
      const group = q.groups.get(key);
      if (group) group.push(entry);
      else q.groups.set(key, [entry]);
      this.schedule(model, q);
    });
  }

  /** Rejects every queued request and stops the summary; running batches finish. */
  close(): void {
    if (this.summary) clearInterval(this.summary);
    for (const q of this.queues.values()) {
      if (q.timer) clearTimeout(q.timer);
      for (const group of q.groups.values())
        for (const e of group) e.reject(new Error('the encoder runtime is closed'));
    }
    this.queues.clear();
  }

  private queueOf(model: EncoderModel): ModelQueue {
    let q = this.queues.get(model);
    if (!q) {
      q = { groups: new Map(), inFlight: 0, timer: undefined };
      this.queues.set(model, q);
    }
    return q;
  }

  private dequeue(model: EncoderModel, key: string, entry: Entry): void {
    const q = this.queues.get(model);
    const group = q?.groups.get(key);
    if (!q || !group) return;
    const i = group.indexOf(entry);
    if (i < 0) return;
    group.splice(i, 1);
    if (!group.length) q.groups.delete(key);
    this.forgetIfIdle(model, q);
  }

  private forgetIfIdle(model: EncoderModel, q: ModelQueue): void {
    if (q.inFlight || q.groups.size) return;
    if (q.timer) clearTimeout(q.timer);
    // after close() a newer queue may stand for this model
    if (this.queues.get(model) === q) this.queues.delete(model);
  }

  /**
   * Starts batches while a slot is free. An idle model gives the first request `maxWaitMs` to gather
   * batch-mates (a full batch starts at once); requests queued while a batch ran start when it ends.
   */
  private schedule(model: EncoderModel, q: ModelQueue, waited = false): void {
    while (q.inFlight < this.maxInFlight && q.groups.size) {
      const key = this.oldestGroup(q);
      const group = q.groups.get(key)!;
      const full =
        group.reduce((n, e) => n + e.texts.length, 0) >= this.maxBatchTexts ||
        group.reduce((n, e) => n + e.chars, 0) >= this.maxBatchChars;
      if (!waited && !full && this.maxWaitMs > 0 && q.inFlight === 0) {
        if (!q.timer)
          q.timer = setTimeout(() => {
            q.timer = undefined;
            this.schedule(model, q, true);
          }, this.maxWaitMs);
        return;
      }
      if (q.timer) {
        clearTimeout(q.timer);
        q.timer = undefined;
      }
      const batch = this.take(group);
      if (!group.length) q.groups.delete(key);
      q.inFlight++;
      void this.run(model, batch).finally(() => {
        q.inFlight--;
        // requests that queued meanwhile have waited already: no further delay
        this.schedule(model, q, true);
        this.forgetIfIdle(model, q);
      });
    }
  }

  /** The group whose first request has waited longest (fair across schemas). */
  private oldestGroup(q: ModelQueue): string {
    let best: string | undefined;
    let at = Infinity;
    for (const [key, group] of q.groups) {
      if (group[0]!.enqueued < at) {
        at = group[0]!.enqueued;
        best = key;
      }
    }
    return best!;
  }

  /** Takes requests first come first served up to the bounds; the first one always goes. */
  private take(group: Entry[]): Entry[] {
    let texts = 0;
    let chars = 0;
    let n = 0;
    while (n < group.length) {
      const e = group[n]!;
      if (n > 0 && (texts + e.texts.length > this.maxBatchTexts || chars + e.chars > this.maxBatchChars)) break;
      texts += e.texts.length;
      chars += e.chars;
      n++;
    }
    return group.splice(0, n);
  }

  private async run(model: EncoderModel, batch: Entry[]): Promise<void> {
    const live = batch.filter((e) => !e.settled);
    if (!live.length) return;
    const started = performance.now();
    const texts = live.flatMap((e) => e.texts);
    try {
      // one engine call; records are sorted by length inside it, `passTexts` per encoder pass
      const out = await model.infer(texts, live[0]!.schema, { ...live[0]!.opts, batchSize: this.passTexts });
      this.record(live, started);
      let k = 0;
      for (const e of live) {
        const n = e.texts.length;
        const textTokens = out.textTokens.slice(k, k + n);
        e.resolve({
          results: out.results.slice(k, k + n),
          inputTokens: textTokens.reduce((a, b) => a + b, 0),
          textTokens,
          chunks: out.chunks.slice(k, k + n),
          groups: out.groups.slice(k, k + n),
          routes: out.routes,
        });
        k += n;
      }
    } catch (err) {
      this.record(live, started);
      if (live.length === 1) {
        live[0]!.reject(err);
        return;
      }
      // one request's input may have failed the batch: each runs alone and gets its own answer
      this.count((s) => s.splitAfterFailure++);
      for (const e of live) if (!e.settled) await this.run(model, [e]);
    }
  }

  private record(live: Entry[], started: number): void {
    const now = performance.now();
    this.count((s) => {
      s.batches++;
      s.requests += live.length;
      s.texts += live.reduce((n, e) => n + e.texts.length, 0);
      s.requestsPerBatch[live.length] = (s.requestsPerBatch[live.length] ?? 0) + 1;
      s.maxRequestsInBatch = Math.max(s.maxRequestsInBatch, live.length);
      s.queuedMs += live.reduce((n, e) => n + (started - e.enqueued), 0);
      s.runMs += now - started;
    });
  }

  private count(f: (s: BatchStats) => void): void {
    f(this.totals);
    f(this.sinceSummary);
  }
}

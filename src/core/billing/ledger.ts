/**
 * The usage pipeline of one process. Events are grouped per team into batches (usageBatch.ts):
 * one batch per team in flight, so the sequence numbers that make writes idempotent reach each
 * item in order, and concurrent requests of a team share one write (group commit).
 *
 * A failed batch is retried with bounded backoff; one that still fails is handed to the spool
 * (spool.ts) with a WARN line and a metric, and this writer takes a new id (the kept batch must
 * not be overtaken by a later, higher sequence number on the same items). The writer also takes a
 * new id at each UTC midnight: its id names its day, which bounds its attributes (usageBatch.ts).
 *
 * A kept batch that can no longer be applied safely (its writer's attributes were pruned from an
 * item: usageBatch.ts) is written to the stale-usage record for reconciliation, with an ERROR line
 * and the `UsageBatchesStale` metric.
 */
import { newUuid } from '../ids';
import type { Logger, RecordStore, UsageSink, UsageSpool } from '../ports';
import { staleUsageItem } from '../recordKeys';
import {
  applyBatch,
  buildBatch,
  newWriterId,
  type UsageBatch,
  type UsageBatchItem,
  type UsageEvent,
} from './usageBatch';
import type { UsageMetrics } from './usageMetrics';

export type { UsageSink } from '../ports';

export interface LedgerOptions {
  records: RecordStore;
  spool: UsageSpool;
  metrics: UsageMetrics;
  logger: Logger;
  /**
   * `write-through`: `add` waits for the write (Lambda, whose process may freeze after a response).
   * `background`: request counts are written every second, billed usage at once without
   * making the response wait (long-lived local and ECS processes).
   */
  mode: 'write-through' | 'background';
  /** Days the per-request rows are kept. */
  retentionDays: number;
  /** The clock (tests); default the system's. */
  now?: () => Date;
}

const MAX_EVENTS_PER_BATCH = 500;
const FLUSH_EVERY_MS = 1000;
/** Delays between attempts of one batch before it is spooled. */
const RETRY_DELAYS_MS = [25, 100, 400];

const freshWriter = (now: Date) => newWriterId(now, newUuid().replaceAll('-', ''));

export class UsageLedger implements UsageSink {
  private readonly now: () => Date;
  private writer: string;
  private seq = 0;
  private readonly pending = new Map<string, UsageEvent[]>();
  private readonly chains = new Map<string, Promise<void>>();
  /** Batches neither written nor spooled (the spool itself failed): retried on each flush. */
  private stranded: UsageBatch[] = [];
  private readonly timer?: NodeJS.Timeout;

  constructor(private readonly o: LedgerOptions) {
    this.now = o.now ?? (() => new Date());
    this.writer = freshWriter(this.now());
    if (o.mode === 'background') {
      this.timer = setInterval(
        () =>
          void this.flush().catch((error: unknown) => o.logger.error('usage flush failed', { error: error as Error })),
        FLUSH_EVERY_MS,
      );
      this.timer.unref();
    }
  }

  add(event: UsageEvent): Promise<void> {
    if (event.billed) this.o.metrics.billed(event.billed);
    const list = this.pending.get(event.team_id) ?? [];
    list.push(event);
    this.pending.set(event.team_id, list);
    if (this.o.mode === 'write-through') return this.commit(event.team_id);
    if (event.billed) void this.commit(event.team_id);
    return Promise.resolve();
  }

  settled(teamId: string): Promise<void> {
    return this.commit(teamId);
  }

  async flush(): Promise<void> {
    await Promise.all([...this.pending.keys()].map((team) => this.commit(team)));
    await Promise.all([...this.chains.values()]);
    const stranded = this.stranded;
    this.stranded = [];
    for (const b of stranded) await this.keep(b);
    const { applied, kept } = await this.o.spool.replay((b) => this.applyKept(b));
    if (applied) this.o.logger.info('replayed spooled usage', { applied, kept });
  }

  async applyKept(batch: UsageBatch): Promise<void> {
    const { stale } = await applyBatch(this.o.records, batch, { now: this.now() });
    if (stale.length) await this.keepStale(batch, stale);
  }

  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.flush();
  }

  /** Writes the team's pending events after the team's batch in flight, if any. Never rejects. */
  private commit(teamId: string): Promise<void> {
    const prev = this.chains.get(teamId) ?? Promise.resolve();
    const next = prev.then(async () => {
      for (;;) {
        const events = this.pending.get(teamId);
        if (!events?.length) return;
        const take = events.splice(0, MAX_EVENTS_PER_BATCH);
        if (events.length === 0) this.pending.delete(teamId);
        const now = this.now();
        const expiresAt = Math.floor(now.getTime() / 1000) + this.o.retentionDays * 86_400;
        if (!this.writer.startsWith(newWriterId(now, ''))) this.retire(now);
        await this.write(buildBatch(this.writer, ++this.seq, teamId, take, expiresAt));
      }
    });
    this.chains.set(teamId, next);
    void next.finally(() => {
      if (this.chains.get(teamId) === next) this.chains.delete(teamId);
    });
    return next;
  }

  private async write(batch: UsageBatch): Promise<void> {
    const delays = RETRY_DELAYS_MS;
    let lastError: unknown;
    for (let attempt = 0; attempt <= delays.length; attempt++) {
      try {
        await this.applyKept(batch);
        return;
      } catch (err) {
        lastError = err;
        if (attempt < delays.length) await new Promise((r) => setTimeout(r, delays[attempt]));
      }
    }
    // A later batch of this writer must not carry a higher sequence number to the same items
    // before this one is replayed.
    this.retire(this.now());
    this.o.logger.warn('usage write failed after retries; kept for replay', {
      team_id: batch.team_id,
      events: batch.requests.length,
      error: lastError as Error,
    });
    await this.keep(batch);
  }

  private retire(now: Date): void {
    this.writer = freshWriter(now);
    this.seq = 0;
  }

  /**
   * Never applied blindly, never dropped: the refused items go to the stale-usage record (one item
   * per batch; a second report of the same batch rewrites it) before the batch counts as handled.
   */
  private async keepStale(batch: UsageBatch, stale: UsageBatchItem[]): Promise<void> {
    const at = this.now().toISOString();
    await this.o.records.put(staleUsageItem(batch.team_id, batch.writer, batch.seq), {
      team_id: batch.team_id,
      writer: batch.writer,
      seq: batch.seq,
      items: stale,
      reported_at: at,
    });
    this.o.metrics.stale(1);
    this.o.logger.error(
      'usage batch too old to apply safely (its writer was pruned from the items named); kept for reconciliation',
      {
        team_id: batch.team_id,
        writer: batch.writer,
        seq: batch.seq,
        items: stale.map((it) => it.sk),
      },
    );
  }

  private async keep(batch: UsageBatch): Promise<void> {
    try {
      await this.o.spool.append(batch);
      this.o.metrics.spooled(1);
    } catch (error) {
      // the whole batch in the log line: the last place it can be recovered from
      this.o.logger.error('usage could not be written nor spooled; retrying on the next flush', {
        batch,
        error: error as Error,
      });
      this.stranded.push(batch);
    }
  }
}

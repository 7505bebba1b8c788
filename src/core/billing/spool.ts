/**
 * Where usage batches that could not be written go, so usage (money) is never dropped:
 * locally an append-only JSONL file (fsync'd) replayed on each flush and at start; on AWS the work
 * queue, whose worker applies them (SQS retries, then its DLQ, which is alarmed).
 */
import type { UsageSpool, WorkQueue } from '../ports';
import type { UsageBatch } from './usageBatch';

export type { UsageSpool } from '../ports';

/** AWS: a batch goes to the work queue as a `usage.apply` message (src/core/worker.ts applies it). */
export class QueueUsageSpool implements UsageSpool {
  constructor(private readonly queue: WorkQueue) {}

  async append(batch: UsageBatch): Promise<void> {
    await this.queue.send({ type: 'usage.apply', batch });
  }

  async replay(): Promise<{ applied: number; kept: number }> {
    return { applied: 0, kept: 0 };
  }
}

import { windowOf } from '../../core/rateLimits';
import type { LimitRule, RateLimiter, RecordStore, WindowState } from '../../core/ports';

/** Fixed-window counters shared by every Lambda: one counter item per bucket and window (expiring). */
export class DynamoRateLimiter implements RateLimiter {
  constructor(private readonly records: RecordStore) {}

  async hit(bucket: string, rule: LimitRule, now: Date): Promise<WindowState> {
    const { start, resetSeconds } = windowOf(rule, now);
    const item = await this.records.update<{ count: number }>(`RATE#${bucket}#${rule.windowSeconds}`, String(start), {
      add: { count: 1 },
      set: { expiresAt: start + rule.windowSeconds * 2 },
    });
    return { count: item.count, resetSeconds };
  }
}

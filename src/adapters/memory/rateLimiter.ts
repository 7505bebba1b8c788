import { windowOf } from '../../core/rateLimits';
import type { LimitRule, RateLimiter, WindowState } from '../../core/ports';

/** Fixed-window counters of one process (local mode, an ECS task). */
export class MemoryRateLimiter implements RateLimiter {
  private readonly windows = new Map<string, { start: number; count: number }>();
  private sweptAt = 0;

  async hit(bucket: string, rule: LimitRule, now: Date): Promise<WindowState> {
    const { start, resetSeconds } = windowOf(rule, now);
    const key = `${bucket}|${rule.windowSeconds}`;
    const current = this.windows.get(key);
    const state = current && current.start === start ? current : { start, count: 0 };
    state.count += 1;
    this.windows.set(key, state);
    this.sweep(now.getTime() / 1000);
    return { count: state.count, resetSeconds };
  }

  /** Drops finished windows now and then, so the map stays as small as the set of active callers. */
  private sweep(nowSeconds: number): void {
    if (nowSeconds - this.sweptAt < 60) return;
    this.sweptAt = nowSeconds;
    for (const [key, w] of this.windows) {
      const windowSeconds = Number(key.slice(key.lastIndexOf('|') + 1));
      if (w.start + windowSeconds <= nowSeconds) this.windows.delete(key);
    }
  }
}

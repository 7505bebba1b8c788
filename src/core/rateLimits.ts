import { RateLimitError } from './errors';
import { EDGE_LIMIT, LIMIT_CLASSES, type LimitClass, type LimitRule } from './limits';

// the numbers are data (limits.ts) so lib/ can read them; callers keep importing them from here
export { EDGE_LIMIT, LIMIT_CLASSES, type LimitClass, type LimitRule };

export interface WindowState {
  count: number;
  /** Seconds until the window resets. */
  resetSeconds: number;
}

/**
 * The rate-limiter port (re-exported by ports.ts): fixed-window counters. In-memory for one process
 * (local, ECS task: adapters/memory); DynamoDB across Lambdas (adapters/dynamodb).
 */
export interface RateLimiter {
  hit(bucket: string, rule: LimitRule, now: Date): Promise<WindowState>;
}

/** The fixed window `now` falls in: its start (epoch seconds) and the seconds until it resets. */
export function windowOf(rule: LimitRule, now: Date) {
  const nowSeconds = now.getTime() / 1000;
  const start = Math.floor(nowSeconds / rule.windowSeconds) * rule.windowSeconds;
  return { start, resetSeconds: Math.max(1, Math.ceil(start + rule.windowSeconds - nowSeconds)) };
}

export interface RateLimitHeaders {
  'x-ratelimit-limit': string;
  'x-ratelimit-remaining': string;
  'x-ratelimit-reset': string;
}

/**
 * Counts one request against every rule of its class. Throws a 429 carrying Retry-After when any
 * window is exhausted; otherwise returns the headers for the tightest window.
 */
export async function enforceLimits(
  limiter: RateLimiter,
  scope: string,
  cls: LimitClass,
  now: Date,
): Promise<RateLimitHeaders> {
  let tightest: { rule: LimitRule; state: WindowState } | undefined;
  for (const rule of LIMIT_CLASSES[cls]) {
    const state = await limiter.hit(`${cls}:${scope}`, rule, now);
    if (state.count > rule.limit) {
      throw withHeaders(
        new RateLimitError(
          `Rate limit exceeded: ${rule.limit} requests per ${rule.windowSeconds} s for this endpoint; retry after ${state.resetSeconds} s`,
          state.resetSeconds,
        ),
        headersFor(rule, state),
      );
    }
    if (!tightest || rule.limit - state.count < tightest.rule.limit - tightest.state.count) tightest = { rule, state };
  }
  const chosen = tightest as { rule: LimitRule; state: WindowState };
  return headersFor(chosen.rule, chosen.state);
}

export async function enforceEdgeLimit(limiter: RateLimiter, ip: string, now: Date): Promise<RateLimitHeaders> {
  const state = await limiter.hit(`edge:${ip}`, EDGE_LIMIT, now);
  if (state.count > EDGE_LIMIT.limit) {
    throw withHeaders(
      new RateLimitError(
        `Too many requests from this address; retry after ${state.resetSeconds} s`,
        state.resetSeconds,
      ),
      headersFor(EDGE_LIMIT, state),
    );
  }
  return headersFor(EDGE_LIMIT, state);
}

function headersFor(rule: LimitRule, state: WindowState): RateLimitHeaders {
  return {
    'x-ratelimit-limit': String(rule.limit),
    'x-ratelimit-remaining': String(Math.max(0, rule.limit - state.count)),
    'x-ratelimit-reset': String(state.resetSeconds),
  };
}

function withHeaders(err: RateLimitError, headers: RateLimitHeaders): RateLimitError {
  Object.assign(err.headers, headers);
  return err;
}

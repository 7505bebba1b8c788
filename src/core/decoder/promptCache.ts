import { createHash } from 'node:crypto';
import type { CachePlan, TokenizedPrompt } from './types';

/** docs/reference/decisions.md#prompt-caching rule 7: at most 4 markers are applied per request. */
export const MAX_CACHE_MARKERS = 4;
/** docs/reference/decisions.md#prompt-caching: an entry expires after 5 minutes of inactivity unless a `ttl` is given. */
export const DEFAULT_CACHE_TTL_SECONDS = 300;
/** Longest `ttl` accepted (Anthropic offers 1h; we allow up to a day). */
export const MAX_CACHE_TTL_SECONDS = 24 * 3600;

/** `"5m"`, `"1h"`, `"300s"`, `"30m"` → seconds; undefined for anything else. */
export function parseTtl(ttl: string): number | undefined {
  const m = /^(\d{1,6})(s|m|h)$/.exec(ttl.trim());
  if (!m) return undefined;
  const seconds = Number(m[1]) * (m[2] === 'h' ? 3600 : m[2] === 'm' ? 60 : 1);
  return seconds > 0 && seconds <= MAX_CACHE_TTL_SECONDS ? seconds : undefined;
}

interface Entry {
  key: string;
  length: number;
  ttlSeconds: number;
  expiresAt: number;
}

export interface PromptCacheOptions {
  /** Prefixes shorter than this are silently not cached (docs/reference/decisions.md#prompt-caching, minimum prefix). */
  minTokens: (model: string) => number;
  now?: () => number;
  /** Called when an entry expires or is evicted, so a backend can drop the KV state it keeps. */
  onEvict?: (key: string) => void;
  maxEntries?: number;
}

/**
 * The prompt-cache ledger: which prefixes are cached, for how long, and what a request reads and
 * writes. Keys hash the model and the exact prefix tokens, so only an exact prefix match hits.
 * Entries are per team (a team never reads another team's cache) and per process: on AWS each
 * gateway task keeps its own ledger next to its engine.
 */
export class PromptCache {
  private readonly entries = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly maxEntries: number;

  constructor(private readonly opts: PromptCacheOptions) {
    this.now = opts.now ?? Date.now;
    this.maxEntries = opts.maxEntries ?? 256;
  }

  static key(scope: string, model: string, tokens: readonly number[], length: number): string {
    const h = createHash('sha256');
    h.update(`${scope}\u0000${model}\u0000`);
    h.update(Buffer.from(new Uint32Array(tokens.slice(0, length)).buffer));
    return `pc_${h.digest('hex').slice(0, 40)}`;
  }

  private alive(key: string, at: number): Entry | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= at) {
      this.drop(key);
      return undefined;
    }
    return e;
  }

  private drop(key: string): void {
    if (this.entries.delete(key)) this.opts.onEvict?.(key);
  }

  /** Expired entries go now (also called on every plan). */
  sweep(): void {
    const at = this.now();
    for (const [key, e] of this.entries) if (e.expiresAt <= at) this.drop(key);
  }

  has(key: string): boolean {
    return this.alive(key, this.now()) !== undefined;
  }

  get size(): number {
    return this.entries.size;
  }

  /**
   * Reads: the longest marked prefix that is cached (its TTL is refreshed). Writes: every marked
   * prefix beyond it. Billing split follows Anthropic: 1h-TTL writes up to the last 1h marker,
   * 5m (shorter TTL) writes after it.
   */
  plan(scope: string, model: string, prompt: TokenizedPrompt): CachePlan {
    this.sweep();
    const at = this.now();
    const min = this.opts.minTokens(model);
    // A prefix must leave at least one token to evaluate, and be long enough to be worth caching.
    const marks = prompt.breakpoints
      .filter((b) => b.length >= min && b.length < prompt.tokens.length)
      .map((b) => ({ ...b, key: PromptCache.key(scope, model, prompt.tokens, b.length) }));
    let readTokens = 0;
    let hitKey: string | undefined;
    for (const m of marks) {
      const e = this.alive(m.key, at);
      if (e && m.length > readTokens) {
        readTokens = m.length;
        hitKey = m.key;
        e.expiresAt = at + e.ttlSeconds * 1000;
      }
    }
    const byLength = new Map<number, (typeof marks)[number]>();
    for (const m of marks)
      if (m.length > readTokens) {
        const prev = byLength.get(m.length);
        if (!prev || m.ttlSeconds > prev.ttlSeconds) byLength.set(m.length, m);
      }
    const writes = [...byLength.values()].sort((a, b) => a.length - b.length);
    const last = writes.at(-1)?.length ?? readTokens;
    const last1h = writes.filter((w) => w.ttlSeconds >= 3600).at(-1)?.length ?? readTokens;
    for (const w of writes) {
      this.entries.set(w.key, {
        key: w.key,
        length: w.length,
        ttlSeconds: w.ttlSeconds,
        expiresAt: at + w.ttlSeconds * 1000,
      });
    }
    this.evictOverflow();
    return {
      readTokens,
      ...(hitKey ? { hitKey } : {}),
      writes: writes.map((w) => ({ length: w.length, key: w.key, ttlSeconds: w.ttlSeconds })),
      writeTokens: last - readTokens,
      write1hTokens: last1h - readTokens,
      write5mTokens: last - last1h,
    };
  }

  private evictOverflow(): void {
    if (this.entries.size <= this.maxEntries) return;
    const oldest = [...this.entries.values()].sort((a, b) => a.expiresAt - b.expiresAt);
    for (const e of oldest.slice(0, this.entries.size - this.maxEntries)) this.drop(e.key);
  }

  clear(): void {
    for (const key of [...this.entries.keys()]) this.drop(key);
  }
}

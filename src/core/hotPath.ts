/**
 * What a long-lived server process (local mode, the ECS gateway) keeps to stay off the store on the
 * inference path: the principals of recently seen keys and their teams for a few seconds, which
 * catalog models' weights were found in the model store, and stored inferences written just after
 * the response instead of before it. Lambdas don't use it (API Gateway
 * caches their authorizer; each invocation may be the last).
 *
 * The trade-offs, all bounded: a key revoked through another process keeps working here for at most
 * `ttlMs` (revoking through this process takes effect at once, as on AWS the authorizer's own 60 s
 * cache already allows); a stored inference becomes readable a few milliseconds after its response —
 * reads through this process wait for it — and a crash in that window loses it, as it loses the
 * usage counters buffered for the same second. Catalog weights (and imported models' registrations) removed from
 * the store are noticed up to `ttlMs` late; weights published are seen at once (only their presence is kept).
 */
import type { BaseModel } from './catalog';
import type { Principal, Team } from './identity';

export class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  get(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit) return undefined;
    if (hit.until <= Date.now()) {
      this.entries.delete(key);
      return undefined;
    }
    return hit.value;
  }

  set(key: string, value: V): void {
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value as string); // oldest first
    this.entries.set(key, { value, until: Date.now() + this.ttlMs });
  }

  deleteWhere(match: (value: V) => boolean): void {
    for (const [key, entry] of this.entries) if (match(entry.value)) this.entries.delete(key);
  }
}

/** Writes that finish after the response: tracked so reads in this process, and shutdown, can wait. */
export class PendingWrites {
  private readonly pending = new Map<string, Promise<void>>();

  constructor(private readonly onError: (id: string, error: unknown) => void) {}

  add(id: string, write: Promise<void>): void {
    const tracked = write.catch((error: unknown) => this.onError(id, error)).finally(() => this.pending.delete(id));
    this.pending.set(id, tracked);
  }

  /** Resolves once the write of `id` (if one is in flight) has landed or failed. */
  async settled(id: string): Promise<void> {
    await this.pending.get(id);
  }

  async drain(): Promise<void> {
    while (this.pending.size) await Promise.all([...this.pending.values()]);
  }
}

export interface HotPath {
  principals: TtlCache<Principal>;
  teams: TtlCache<Team>;
  /** Manifest keys of catalog models whose weights were found in the model store (models.ts ensureEncoderWeights). */
  storedWeights: TtlCache<true>;
  /** Imported models found registered in the model store, by id (modelRegistry.ts; a miss is asked again). */
  importedModels: TtlCache<BaseModel>;
  writes: PendingWrites;
}

export function createHotPath(onWriteError: (id: string, error: unknown) => void, ttlMs = 5000): HotPath {
  return {
    principals: new TtlCache(ttlMs),
    teams: new TtlCache(ttlMs),
    storedWeights: new TtlCache(ttlMs, 1000),
    importedModels: new TtlCache(ttlMs, 1000),
    writes: new PendingWrites(onWriteError),
  };
}

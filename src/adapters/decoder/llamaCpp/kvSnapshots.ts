/** Prefix KV snapshots of prompt-cache entries, one file per entry under the state dir. */
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { LlamaContextSequence } from 'node-llama-cpp';
import type { Logger } from '../../../core/logger';
import { removeFile } from './adapterFiles';

export class KvSnapshots {
  private readonly files = new Map<string, string>();

  constructor(
    private readonly stateDir: string,
    private readonly logger: Logger,
  ) {}

  /** The snapshot file of a cache entry, if one was written. */
  get(key: string): string | undefined {
    return this.files.get(key);
  }

  /** Writes the sequence's KV state as the snapshot of cache entry `key`. */
  async save(seq: LlamaContextSequence, key: string): Promise<void> {
    const path = this.path(key);
    await seq.saveStateToFile(path);
    this.files.set(key, path);
  }

  private path(key: string): string {
    mkdirSync(this.stateDir, { recursive: true });
    return join(this.stateDir, `${key}.kv`);
  }

  /** Cache ledger eviction hook: the KV snapshot of an expired entry goes too. */
  evict(key: string): void {
    const path = this.files.get(key);
    if (!path) return;
    this.files.delete(key);
    // The entry is already gone from the ledger; a file left behind only costs disk until close.
    void removeFile(path, this.logger);
  }

  /** Deletes every snapshot (the decoder is closing). */
  removeAll(): void {
    rmSync(this.stateDir, { recursive: true, force: true });
  }
}

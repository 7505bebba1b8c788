/** Slot scheduling within one context: the free slot sharing the longest token prefix, else a bounded wait. */
import type { Token } from 'node-llama-cpp';
import { ServiceUnavailableError } from '../../../core/errors';
import type { Loaded, Slot } from './types';

/** Takes a free slot of `l` (longest shared prefix, then least recently used); waits when all are busy, up to `maxQueue` waiters. */
export async function acquireSlot(l: Loaded, tokens: Token[], maxQueue: number, signal?: AbortSignal): Promise<Slot> {
  for (;;) {
    if (signal?.aborted) throw new Error('aborted');
    if (l.disposing) throw new ServiceUnavailableError('The decoder context was unloaded; retry');
    const free = l.slots.filter((s) => !s.busy);
    if (free.length > 0) {
      let best = free[0] as Slot;
      let bestLen = -1;
      for (const s of free) {
        const len = s.seq.compareContextTokens(tokens).firstDifferentIndex;
        if (len > bestLen || (len === bestLen && s.lastUsed < best.lastUsed)) {
          best = s;
          bestLen = len;
        }
      }
      best.busy = true;
      return best;
    }
    if (l.waiters.length >= maxQueue) {
      const err = new ServiceUnavailableError('The decoder is at capacity; retry shortly');
      err.headers['retry-after'] = '1';
      throw err;
    }
    await new Promise<void>((ok) => l.waiters.push(ok));
  }
}

export function releaseSlot(l: Loaded, slot: Slot): void {
  slot.busy = false;
  slot.lastUsed = performance.now();
  l.waiters.shift()?.();
}

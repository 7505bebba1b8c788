/**
 * Slot scheduling within one context: the free slot sharing the longest token prefix with a
 * request of the same scope (team), else a bounded wait. Another scope's KV state never counts as
 * shared: it is cleared when the slot changes hands (generation.ts), so neither the reuse nor its
 * speed-up crosses teams.
 */
import type { Token } from 'node-llama-cpp';
import { ServiceUnavailableError } from '../../../core/errors';
import type { Loaded, Slot } from './types';

/** The tokens of `slot` that a request of `scope` may reuse: its common prefix, only within the scope. */
export function reusablePrefix(slot: Slot, scope: string, tokens: Token[]): number {
  return slot.scope === scope ? slot.seq.compareContextTokens(tokens).firstDifferentIndex : 0;
}

/**
 * Takes a free slot of `l` (longest prefix shared within `scope`, then least recently used); waits
 * when all are busy, up to `maxQueue` waiters. A caller that goes away while waiting leaves the queue.
 */
export async function acquireSlot(
  l: Loaded,
  tokens: Token[],
  scope: string,
  maxQueue: number,
  signal?: AbortSignal,
): Promise<Slot> {
  for (;;) {
    if (signal?.aborted) throw cancelledBeforeSlot();
    if (l.disposing) throw new ServiceUnavailableError('The decoder context was unloaded; retry');
    const free = l.slots.filter((s) => !s.busy);
    if (free.length > 0) {
      let best = free[0] as Slot;
      let bestLen = -1;
      for (const s of free) {
        const len = reusablePrefix(s, scope, tokens);
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
    await waitForRelease(l, signal);
  }
}

function waitForRelease(l: Loaded, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      const at = l.waiters.indexOf(wake);
      if (at >= 0) l.waiters.splice(at, 1);
      reject(cancelledBeforeSlot());
    };
    const wake = () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    l.waiters.push(wake);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** The caller went away before any work: nothing was computed, nothing is billed. */
const cancelledBeforeSlot = () =>
  new ServiceUnavailableError('The request was cancelled before a decoder slot was free');

export function releaseSlot(l: Loaded, slot: Slot): void {
  slot.busy = false;
  slot.lastUsed = performance.now();
  l.waiters.shift()?.();
}

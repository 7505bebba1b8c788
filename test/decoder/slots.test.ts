/**
 * Slot choice and the wait queue of the llama.cpp backend (src/adapters/decoder/llamaCpp/slots.ts),
 * on stand-in sequences that compare tokens as llama.cpp does: prefix reuse never crosses a scope
 * (team), and a caller who leaves while queued leaves the queue (#25 F7, F8).
 */
import type { Token } from 'node-llama-cpp';
import { acquireSlot, releaseSlot, reusablePrefix } from '../../src/adapters/decoder/llamaCpp/slots';
import type { Loaded, Slot } from '../../src/adapters/decoder/llamaCpp/types';
import { ServiceUnavailableError } from '../../src/core/errors';

/** A slot whose sequence holds `held` tokens for `scope`. */
function slot(held: number[], scope: string | undefined, lastUsed: number): Slot {
  const seq = {
    compareContextTokens: (tokens: Token[]) => {
      let i = 0;
      while (i < held.length && i < tokens.length && held[i] === tokens[i]) i++;
      return { firstDifferentIndex: i };
    },
  };
  return { seq: seq as unknown as Slot['seq'], busy: false, lastUsed, scope };
}

const loaded = (slots: Slot[]): Loaded => ({ slots, waiters: [] }) as unknown as Loaded;
const prompt = (n: number) => Array.from({ length: n }, (_, i) => i) as Token[];

describe('slot choice', () => {
  it("never prefers another team's slot for its shared prefix: that prefix counts as nothing", async () => {
    const teamA = slot(prompt(500), 'team-a', 2);
    const empty = slot([], undefined, 1);
    const l = loaded([teamA, empty]);
    expect(reusablePrefix(teamA, 'team-b', prompt(600))).toBe(0);
    expect(reusablePrefix(teamA, 'team-a', prompt(600))).toBe(500);
    expect(await acquireSlot(l, prompt(600), 'team-b', 4)).toBe(empty);
    releaseSlot(l, empty);
    expect(await acquireSlot(l, prompt(600), 'team-a', 4)).toBe(teamA);
  });

  it('among slots it cannot reuse, takes the least recently used', async () => {
    const older = slot(prompt(10), 'team-a', 1);
    const newer = slot(prompt(10), 'team-c', 5);
    expect(await acquireSlot(loaded([newer, older]), prompt(20), 'team-b', 4)).toBe(older);
  });
});

describe('the wait queue', () => {
  it('a caller who leaves while waiting leaves the queue at once; the next release wakes the one still waiting', async () => {
    const only = slot([], undefined, 0);
    const l = loaded([only]);
    await acquireSlot(l, prompt(5), 'team-a', 4);
    const leaving = new AbortController();
    const gone = acquireSlot(l, prompt(5), 'team-b', 4, leaving.signal);
    const staying = acquireSlot(l, prompt(5), 'team-c', 4);
    expect(l.waiters).toHaveLength(2);
    leaving.abort();
    await expect(gone).rejects.toBeInstanceOf(ServiceUnavailableError);
    expect(l.waiters).toHaveLength(1);
    releaseSlot(l, only);
    expect(await staying).toBe(only);
    expect(l.waiters).toHaveLength(0);
  });

  it('a full queue answers 503 with retry-after', async () => {
    const l = loaded([slot([], undefined, 0)]);
    await acquireSlot(l, prompt(5), 'team-a', 1);
    void acquireSlot(l, prompt(5), 'team-a', 1);
    const err = await acquireSlot(l, prompt(5), 'team-a', 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as ServiceUnavailableError).headers['retry-after']).toBe('1');
  });
});

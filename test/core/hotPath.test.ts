/** The per-process caches and write-behind of long-lived servers. */
import { jest } from '@jest/globals';
import { PendingWrites, TtlCache } from '../../src/core/hotPath';

describe('TtlCache', () => {
  afterEach(() => jest.useRealTimers());

  it('forgets entries after the TTL, evicts the oldest when full, and deletes by predicate', () => {
    jest.useFakeTimers({ now: 1_000_000 });
    const c = new TtlCache<{ team: string }>(5000, 2);
    c.set('a', { team: 't1' });
    jest.setSystemTime(1_004_999);
    expect(c.get('a')).toEqual({ team: 't1' });
    jest.setSystemTime(1_005_000);
    expect(c.get('a')).toBeUndefined();
    c.set('b', { team: 't1' });
    c.set('c', { team: 't2' });
    c.set('d', { team: 't2' });
    expect(c.get('b')).toBeUndefined(); // oldest went when a third came
    c.deleteWhere((v) => v.team === 't2');
    expect([c.get('c'), c.get('d')]).toEqual([undefined, undefined]);
  });
});

describe('PendingWrites', () => {
  it('lets a read wait for its write, drains everything, and reports failures without throwing', async () => {
    const failures: string[] = [];
    const w = new PendingWrites((id) => failures.push(id));
    let landed = false;
    const land = (r: () => void) => {
      landed = true;
      r();
    };
    w.add('ok', new Promise<void>((r) => setTimeout(() => land(r), 20)));
    w.add('bad', Promise.reject(new Error('store down')));
    await w.settled('ok');
    expect(landed).toBe(true);
    await w.settled('never-written'); // nothing in flight: resolves at once
    await w.drain();
    expect(failures).toEqual(['bad']);
  });
});

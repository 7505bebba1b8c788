import { PromptCache, parseTtl } from '../../src/core/decoder/promptCache';
import { StopMatcher } from '../../src/core/decoder/stopText';

describe('StopMatcher', () => {
  const run = (stops: string[], pieces: string[]) => {
    const m = new StopMatcher(stops);
    let out = '';
    for (const p of pieces) {
      out += m.push(p);
      if (m.matched !== null) break;
    }
    return { out: out + m.flush(), matched: m.matched };
  };

  it('never emits a stop string split across pieces', () => {
    expect(run(['END'], ['Hello E', 'N', 'D more'])).toEqual({ out: 'Hello ', matched: 'END' });
    expect(run(['\n\n'], ['a\n', '\nb'])).toEqual({ out: 'a', matched: '\n\n' });
  });

  it('releases held-back text that turned out not to be a stop', () => {
    expect(run(['END'], ['Hello E', 'ND'].slice(0, 1))).toEqual({ out: 'Hello E', matched: null });
    expect(run(['END'], ['EN', 'x'])).toEqual({ out: 'ENx', matched: null });
  });

  it('picks the earliest of several stops', () => {
    expect(run(['b', 'a'], ['xxab'])).toEqual({ out: 'xx', matched: 'a' });
  });
});

describe('PromptCache', () => {
  const tokens = Array.from({ length: 100 }, (_, i) => i);
  const cache = (now: { t: number }, evicted: string[] = []) =>
    new PromptCache({ minTokens: () => 10, now: () => now.t, onEvict: (k) => evicted.push(k) });

  it('writes at markers, then reads the longest exact prefix; ≥ minimum only', () => {
    const now = { t: 0 };
    const c = cache(now);
    const first = c.plan('team', 'm', {
      tokens,
      breakpoints: [
        { length: 5, ttlSeconds: 300 },
        { length: 40, ttlSeconds: 300 },
      ],
    });
    expect(first).toMatchObject({ readTokens: 0, writeTokens: 40, write5mTokens: 40, write1hTokens: 0 });
    const second = c.plan('team', 'm', {
      tokens,
      breakpoints: [
        { length: 40, ttlSeconds: 300 },
        { length: 60, ttlSeconds: 300 },
      ],
    });
    expect(second).toMatchObject({ readTokens: 40, writeTokens: 20 });
    const changed = [...tokens];
    changed[3] = 999;
    expect(c.plan('team', 'm', { tokens: changed, breakpoints: [{ length: 40, ttlSeconds: 300 }] }).readTokens).toBe(0);
    expect(c.plan('other-team', 'm', { tokens, breakpoints: [{ length: 40, ttlSeconds: 300 }] }).readTokens).toBe(0);
  });

  it('expires after the ttl of inactivity, a hit refreshes it', () => {
    const now = { t: 0 };
    const evicted: string[] = [];
    const c = cache(now, evicted);
    const bp = { tokens, breakpoints: [{ length: 50, ttlSeconds: 300 }] };
    c.plan('t', 'm', bp);
    now.t = 299_000;
    expect(c.plan('t', 'm', bp).readTokens).toBe(50);
    now.t = 598_000;
    expect(c.plan('t', 'm', bp).readTokens).toBe(50);
    now.t = 898_001;
    expect(c.plan('t', 'm', bp).readTokens).toBe(0);
    expect(evicted).toHaveLength(1);
  });

  it('splits writes by ttl like Anthropic (1h before 5m)', () => {
    const c = cache({ t: 0 });
    const plan = c.plan('t', 'm', {
      tokens,
      breakpoints: [
        { length: 30, ttlSeconds: 3600 },
        { length: 70, ttlSeconds: 300 },
      ],
    });
    expect(plan).toMatchObject({ writeTokens: 70, write1hTokens: 30, write5mTokens: 40 });
  });

  it('parses ttl durations', () => {
    expect(parseTtl('5m')).toBe(300);
    expect(parseTtl('1h')).toBe(3600);
    expect(parseTtl('30s')).toBe(30);
    expect(parseTtl('25h')).toBeUndefined();
    expect(parseTtl('soon')).toBeUndefined();
  });
});

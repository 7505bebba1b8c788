/**
 * The chunk merge's overlap resolution (src/encoder/decode.ts `resolveDisallow`, gliner2
 * `resolve_overlaps(policy="disallow")`): the same spans as gliner2's algorithm (the quadratic port
 * below, which the engine ran before) on generated span sets full of exact ties, in a number of steps
 * linear in the spans. Before, a 100,000-character text of `a.` (tens of thousands of merged spans)
 * copied a selection per span and ran the server out of memory (bench:hostile-text).
 */
import fc from 'fast-check';
import { resolveDisallow } from '../../src/encoder/decode';

interface Item {
  score: number;
  start: number;
  end: number;
}

/** gliner2 2.1.0 `resolve_overlaps` "disallow" as the engine ran it: every selection a fresh copy. */
function copyingResolveDisallow<T extends Item>(items: T[]): T[] {
  if (!items.length) return [];
  const rank = (a: { item: T; idx: number }, b: { item: T; idx: number }) =>
    b.item.score - a.item.score || a.item.start - b.item.start || a.item.end - b.item.end || a.idx - b.idx;
  const ranked = items.map((item, idx) => ({ item, idx })).sort(rank);
  const seen = new Set<string>();
  const distinct = ranked.filter((r) => {
    const k = `${r.item.start}:${r.item.end}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
  const byEnd = [...distinct].sort(
    (a, b) => a.item.end - b.item.end || a.item.start - b.item.start || b.item.score - a.item.score || a.idx - b.idx,
  );
  const ends = byEnd.map((r) => r.item.end);
  const pred = byEnd.map((r, index) => {
    let lo = 0;
    let hi = index;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (r.item.start < ends[mid]!) hi = mid;
      else lo = mid + 1;
    }
    return lo - 1;
  });
  const best: Array<{ score: number; sel: number[] }> = [{ score: 0, sel: [] }];
  const selKey = (sel: number[]) => sel.map((i) => byEnd[i]!).sort(rank);
  const cmpSel = (a: number[], b: number[]) => {
    const ka = selKey(a);
    const kb = selKey(b);
    for (let i = 0; i < Math.min(ka.length, kb.length); i++) {
      const c = rank(ka[i]!, kb[i]!);
      if (c) return c;
    }
    return ka.length - kb.length;
  };
  byEnd.forEach((r, index) => {
    const prev = best[pred[index]! + 1]!;
    const withItem = { score: prev.score + r.item.score, sel: [...prev.sel, index] };
    const without = best[index]!;
    if (withItem.score > without.score) best.push(withItem);
    else if (withItem.score < without.score) best.push(without);
    else if (withItem.sel.length !== without.sel.length)
      best.push(withItem.sel.length > without.sel.length ? withItem : without);
    else best.push(cmpSel(withItem.sel, without.sel) < 0 ? withItem : without);
  });
  return best[best.length - 1]!.sel.map((i) => byEnd[i]!)
    .sort(rank)
    .map((r) => r.item);
}

/** Spans over a short range with dyadic scores (sums are exact: ties between selections are common). */
const spans = (maxStart: number, maxWidth: number, maxItems: number) =>
  fc.array(
    fc
      .record({
        score: fc.constantFrom(0, 0.25, 0.5, 0.75, 1, 0.375),
        start: fc.nat({ max: maxStart }),
        width: fc.integer({ min: 1, max: maxWidth }),
        id: fc.nat(),
      })
      .map(({ score, start, width, id }) => ({ score, start, end: start + width, id })),
    { maxLength: maxItems },
  );

describe('resolveDisallow', () => {
  it('selects what gliner2 selects, ties included (fast-check)', () => {
    fc.assert(
      fc.property(spans(20, 4, 30), (items) => {
        expect(resolveDisallow(items)).toEqual(copyingResolveDisallow(items));
      }),
      { seed: 25_101, numRuns: 5000 },
    );
    fc.assert(
      fc.property(spans(200, 8, 300), (items) => {
        expect(resolveDisallow(items)).toEqual(copyingResolveDisallow(items));
      }),
      { seed: 25_102, numRuns: 300 },
    );
  });

  it('selects what gliner2 selects on spans with model-like scores', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            score: fc.double({ min: 0, max: 1, noNaN: true }),
            start: fc.nat({ max: 100 }),
            width: fc.integer({ min: 1, max: 6 }),
          }),
          { maxLength: 120 },
        ),
        (raw) => {
          const items = raw.map(({ score, start, width }) => ({ score, start, end: start + width }));
          expect(resolveDisallow(items)).toEqual(copyingResolveDisallow(items));
        },
      ),
      { seed: 25_103, numRuns: 1000 },
    );
  });

  // The shapes a long hostile text's windows merge into: tens of thousands of spans, many tied.
  const N = 30_000;
  const SHAPES: Array<[string, Item[]]> = [
    [
      'disjoint spans of one score',
      Array.from({ length: N }, (_, i) => ({ score: 0.9, start: 2 * i, end: 2 * i + 1 })),
    ],
    [
      'a chain of overlapping spans of one score',
      Array.from({ length: N }, (_, i) => ({ score: 0.5, start: i, end: i + 2 })),
    ],
    [
      'pairs whose halves tie with the whole',
      Array.from({ length: N / 3 }, (_, i) => [
        { score: 0.5, start: 3 * i, end: 3 * i + 2 },
        { score: 0.25, start: 3 * i, end: 3 * i + 1 },
        { score: 0.25, start: 3 * i + 1, end: 3 * i + 2 },
      ]).flat(),
    ],
    [
      'spans of every width up to 8 at every start',
      Array.from({ length: N / 8 }, (_, s) =>
        Array.from({ length: 8 }, (_, w) => ({ score: 0.5 + ((s * 7 + w) % 5) / 16, start: s, end: s + w + 1 })),
      ).flat(),
    ],
  ];
  for (const [name, items] of SHAPES)
    it(`${name}: at most 8 steps per span`, () => {
      const stats = { steps: 0 };
      const kept = resolveDisallow(items, stats);
      expect(kept.length).toBeGreaterThan(0);
      expect(stats.steps).toBeGreaterThanOrEqual(items.length);
      expect(stats.steps).toBeLessThanOrEqual(8 * items.length);
    });
});

/** Span decoding helpers with gliner2 2.1.0 semantics (`finalize_spans`, `resolve_overlaps`). */

import type { Span } from '../core/extraction/types';

export type { Span } from '../core/extraction/types';

/** `finalize_spans(overlap_policy=None)`: stable sort by score desc, greedy non-overlap. */
export function finalizeSpans(spans: Span[], dtype: 'str' | 'list' = 'list'): Span[] {
  const ranked = spans
    .map((s, i) => ({ s, i }))
    .sort((a, b) => b.s.score - a.s.score || a.i - b.i)
    .map((x) => x.s);
  const kept: Span[] = [];
  for (const c of ranked) {
    if (kept.some((e) => c.start < e.end && e.start < c.end)) continue;
    kept.push(c);
    if (dtype === 'str') break;
  }
  return kept;
}

/** One selection of the interval schedule as a shared list (newest item first): extending one is O(1), not a copy. */
interface Selection {
  index: number;
  rest: Selection | null;
  size: number;
}

/**
 * `resolve_overlaps(policy="disallow")`: max-total-score non-overlapping set, ranked by score.
 * gliner2 copies the selection at every step (`previous_selection + (index,)`), which is quadratic in
 * time and memory: a long text whose windows yield tens of thousands of spans (100,000 characters of
 * `a.`) ran the process out of memory. Here selections share their tails, and a tie between two
 * selections of equal score and size — gliner2 compares them sorted by rank — is decided by the
 * best-ranked item in one but not the other, found by walking both lists until they meet.
 * `stats.steps` counts the items visited, for the tests.
 */
export function resolveDisallow<T extends { score: number; start: number; end: number }>(
  items: T[],
  stats?: { steps: number },
): T[] {
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
    // bisect_right(ends, start, 0, index) - 1
    let lo = 0;
    let hi = index;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (r.item.start < ends[mid]!) hi = mid;
      else lo = mid + 1;
    }
    return lo - 1;
  });
  let steps = byEnd.length;
  /**
   * gliner2's `selection_key(a) < selection_key(b)` for selections of equal size: their items sorted
   * by rank first differ where the best-ranked item of the symmetric difference is; `a` wins if that
   * item is its own. Both lists are in decreasing index order, so a merge walk finds the difference.
   */
  const firstWins = (a: Selection | null, b: Selection | null): boolean => {
    let best: { row: (typeof byEnd)[number]; inA: boolean } | undefined;
    const consider = (index: number, inA: boolean) => {
      const row = byEnd[index]!;
      if (!best || rank(row, best.row) < 0) best = { row, inA };
    };
    while (a !== b) {
      steps++;
      if (b === null || (a !== null && a.index > b.index)) {
        consider(a!.index, true);
        a = a!.rest;
      } else if (a === null || b.index > a.index) {
        consider(b.index, false);
        b = b.rest;
      } else {
        a = a.rest;
        b = b.rest;
      }
    }
    return best?.inA ?? false;
  };
  const best: Array<{ score: number; sel: Selection | null }> = [{ score: 0, sel: null }];
  const size = (sel: Selection | null) => sel?.size ?? 0;
  byEnd.forEach((r, index) => {
    const prev = best[pred[index]! + 1]!;
    const withItem = { score: prev.score + r.item.score, sel: { index, rest: prev.sel, size: size(prev.sel) + 1 } };
    const without = best[index]!;
    if (withItem.score > without.score) best.push(withItem);
    else if (withItem.score < without.score) best.push(without);
    else if (withItem.sel.size !== size(without.sel))
      best.push(withItem.sel.size > size(without.sel) ? withItem : without);
    else best.push(firstWins(withItem.sel, without.sel) ? withItem : without);
  });
  const chosen: Array<(typeof byEnd)[number]> = [];
  for (let sel = best[best.length - 1]!.sel; sel; sel = sel.rest) chosen.push(byEnd[sel.index]!);
  if (stats) stats.steps += steps + chosen.length;
  return chosen.sort(rank).map((r) => r.item);
}

/** gliner2's `_find_choice_idx`: the first prefix word equal to the choice, case-insensitively (-1: none). */
export function choiceIndex(prefix: string[], choice: string): number {
  const lower = choice.toLowerCase();
  return prefix.findIndex((w) => w.toLowerCase() === lower);
}

export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

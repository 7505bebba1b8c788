/** Span decoding helpers with gliner2 2.1.0 semantics (`finalize_spans`, `resolve_overlaps`). */

export interface Span {
  text: string;
  score: number;
  /** Code-point offsets into the original text, end exclusive. */
  start: number;
  end: number;
}

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

/** `resolve_overlaps(policy="disallow")`: max-total-score non-overlapping set, ranked by score. */
export function resolveDisallow<T extends { score: number; start: number; end: number }>(items: T[]): T[] {
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
  const byEnd = [...distinct].sort((a, b) => a.item.end - b.item.end || a.item.start - b.item.start || b.item.score - a.item.score || a.idx - b.idx);
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
    else if (withItem.sel.length !== without.sel.length) best.push(withItem.sel.length > without.sel.length ? withItem : without);
    else best.push(cmpSel(withItem.sel, without.sel) < 0 ? withItem : without);
  });
  return best[best.length - 1]!.sel.map((i) => byEnd[i]!).sort(rank).map((r) => r.item);
}

export function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

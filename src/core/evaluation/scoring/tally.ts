/**
 * Counting helpers shared by every head: safe dictionaries (labels are user data, so `__proto__`
 * must be an ordinary key), tp/fp/fn tallies, a multiset counter and tuple keys.
 */
import type { Breakdown, Tally, TallyMap } from './types';

export function getOwn<T>(m: Record<string, T>, k: string): T | undefined {
  return Object.hasOwn(m, k) ? m[k] : undefined;
}
export function setOwn<T>(m: Record<string, T>, k: string, v: T): T {
  Object.defineProperty(m, k, { value: v, enumerable: true, writable: true, configurable: true });
  return v;
}
export function tallyOf(m: TallyMap, k: string): Tally {
  return getOwn(m, k) ?? setOwn(m, k, { tp: 0, fp: 0, fn: 0 });
}
export function add(m: TallyMap, k: string, tp: number, fp: number, fn: number): void {
  const t = tallyOf(m, k);
  t.tp += tp;
  t.fp += fp;
  t.fn += fn;
}
export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);
export const cut = (s: string, n: number) => Array.from(s).slice(0, n).join('');

export class Counter {
  readonly m = new Map<string, number>();
  add(k: string, n = 1) {
    this.m.set(k, (this.m.get(k) ?? 0) + n);
  }
  get(k: string) {
    return this.m.get(k) ?? 0;
  }
  total() {
    let n = 0;
    for (const v of this.m.values()) n += v;
    return n;
  }
}

/** A set key for a tuple of strings / numbers. */
export const key = (...parts: (string | number)[]) => JSON.stringify(parts);

/** Sums two tally maps into a new one. */
export function mergeTallies(a: TallyMap, b: TallyMap): TallyMap {
  const out: TallyMap = {};
  for (const m of [a, b]) for (const [k, t] of Object.entries(m)) add(out, k, t.tp, t.fp, t.fn);
  return out;
}

const round6 = (x: number) => Math.round(x * 1e6) / 1e6;

/** P/R/F1 of one tally; 0/0 → 0. */
export function prf(t: Tally): Breakdown {
  const p = t.tp + t.fp ? t.tp / (t.tp + t.fp) : 0;
  const r = t.tp + t.fn ? t.tp / (t.tp + t.fn) : 0;
  const f = p + r ? (2 * p * r) / (p + r) : 0;
  return { f1: round6(f), precision: round6(p), recall: round6(r), support: t.tp + t.fn, tp: t.tp, fp: t.fp, fn: t.fn };
}

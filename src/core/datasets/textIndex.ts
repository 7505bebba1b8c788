/**
 * One row's text, indexed once for every check the row rules make on it (src/core/datasets/rows.ts):
 * code-point offsets, and which of many strings occur in it.
 *
 * Offsets count code points (Python's semantics). Splitting the text into code points per entity
 * made a row of n characters and k entities cost O(n × k); `CodePointIndex` scans it once.
 *
 * The "verbatim substring" rules (entities without offsets, relation heads and tails, structure
 * values) asked `text.includes(value)` once per value: O(text × values) on adversarial strings,
 * seconds for one 1 MiB row (bench/serving/row-validator.ts). `occurringIn` puts the values into one
 * Aho–Corasick automaton over UTF-16 code units, so "occurs" means exactly what `includes` means
 * (lone surrogates included), in O(text + values) steps.
 */

/** Work done, for tests and the benchmark: the proof that a row's text is indexed once, not once per value. */
export const textWork = { codePointScans: 0, substringScans: 0, unitsScanned: 0 };

/** Code-point offsets of one text, computed on first use; O(1) per offset after that. */
export class CodePointIndex {
  /** UTF-16 offset of each code point (and of the end); null while the text has no surrogate pair (offsets are equal). */
  private offsets: Uint32Array | null | undefined;
  private count = 0;

  constructor(readonly text: string) {}

  /** The text's length in code points. */
  get length(): number {
    this.build();
    return this.count;
  }

  /** The UTF-16 offset of code point `i` (0 ≤ i ≤ length). */
  unitOffset(i: number): number {
    this.build();
    return this.offsets ? this.offsets[i]! : i;
  }

  /** `text[start:end]` in code points equals `value`, in O(value's length). */
  sliceEquals(start: number, end: number, value: string): boolean {
    const from = this.unitOffset(start);
    return this.unitOffset(end) - from === value.length && this.text.startsWith(value, from);
  }

  /** `text[start:end]` in code points, cut after `max` code points (an echo in an error message needs no more). */
  slice(start: number, end: number, max = Infinity): string {
    return this.text.slice(this.unitOffset(start), this.unitOffset(Math.min(end, start + max)));
  }

  private build(): void {
    if (this.offsets !== undefined) return;
    textWork.codePointScans += 1;
    const t = this.text;
    let pairs = 0;
    for (let i = 0; i < t.length; i += 1) {
      if (isPairAt(t, i)) {
        pairs += 1;
        i += 1;
      }
    }
    this.count = t.length - pairs;
    if (pairs === 0) {
      this.offsets = null;
      return;
    }
    const offsets = new Uint32Array(this.count + 1);
    let cp = 0;
    for (let i = 0; i < t.length; i += 1) {
      offsets[cp++] = i;
      if (isPairAt(t, i)) i += 1;
    }
    offsets[cp] = t.length;
    this.offsets = offsets;
  }
}

/** A high surrogate followed by a low one: one code point in two units (a lone surrogate is one code point, as in Array.from). */
function isPairAt(t: string, i: number): boolean {
  const hi = t.charCodeAt(i);
  if (hi < 0xd800 || hi > 0xdbff) return false;
  const lo = t.charCodeAt(i + 1);
  return lo >= 0xdc00 && lo <= 0xdfff;
}

/** Below this many text × needle units, plain `includes` is bounded and cheaper than building an automaton. */
const SMALL_PRODUCT = 1 << 14;

/**
 * Which of `needles` occur in `text`, exactly as `text.includes(needle)` decides, found in one pass
 * over the text. Empty needles are left out.
 */
export function occurringIn(text: string, needles: Iterable<string>): Set<string> {
  const distinct = [...new Set(needles)].filter((n) => n.length > 0);
  const found = new Set<string>();
  if (distinct.length === 0) return found;
  let needleUnits = 0;
  for (const n of distinct) needleUnits += n.length;
  if (text.length * needleUnits <= SMALL_PRODUCT) {
    for (const n of distinct) if (text.includes(n)) found.add(n);
    return found;
  }
  textWork.substringScans += 1;

  // The trie: node 0 is the root; `edge` maps (node, code unit) to a child.
  const edge = new Map<number, number>();
  const key = (node: number, unit: number) => node * 0x10000 + unit;
  const ends: number[] = [-1]; // the needle ending at a node, or -1
  const firstChild: number[] = [-1];
  const nextSibling: number[] = [-1];
  const unitOf: number[] = [0];
  distinct.forEach((needle, index) => {
    let node = 0;
    for (let i = 0; i < needle.length; i += 1) {
      const unit = needle.charCodeAt(i);
      let child = edge.get(key(node, unit));
      if (child === undefined) {
        child = ends.length;
        ends.push(-1);
        firstChild.push(-1);
        unitOf.push(unit);
        nextSibling.push(firstChild[node]!);
        firstChild[node] = child;
        edge.set(key(node, unit), child);
      }
      node = child;
    }
    ends[node] = index;
  });

  // Failure links (longest proper suffix that is a trie path) and output links (the nearest node on
  // the failure chain where a needle ends), breadth first.
  const fail = new Int32Array(ends.length);
  const output = new Int32Array(ends.length).fill(-1);
  const queue = new Int32Array(ends.length);
  let head = 0;
  let tail = 0;
  for (let c = firstChild[0]!; c !== -1; c = nextSibling[c]!) queue[tail++] = c;
  while (head < tail) {
    const node = queue[head++]!;
    for (let c = firstChild[node]!; c !== -1; c = nextSibling[c]!) {
      const unit = unitOf[c]!;
      let f = fail[node]!;
      while (f !== 0 && !edge.has(key(f, unit))) f = fail[f]!;
      const next = edge.get(key(f, unit));
      const link = next !== undefined && next !== c ? next : 0;
      fail[c] = link;
      output[c] = ends[link]! !== -1 ? link : output[link]!;
      queue[tail++] = c;
    }
  }

  // One pass over the text. Each node's output chain is walked once: a node already reported had
  // its whole chain reported then.
  const reported = new Uint8Array(ends.length);
  let state = 0;
  for (let i = 0; i < text.length && found.size < distinct.length; i += 1) {
    const unit = text.charCodeAt(i);
    while (state !== 0 && !edge.has(key(state, unit))) state = fail[state]!;
    state = edge.get(key(state, unit)) ?? 0;
    let hit = ends[state]! !== -1 ? state : output[state]!;
    while (hit > 0 && !reported[hit]) {
      reported[hit] = 1;
      found.add(distinct[ends[hit]!]!);
      hit = output[hit]!;
    }
    textWork.unitsScanned += 1;
  }
  return found;
}

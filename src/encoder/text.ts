/**
 * Word splitting and string helpers with Python semantics (gliner2 2.1.0
 * `processing/word_splitter.py` WhitespaceTokenSplitter, `str.strip`, code-point offsets).
 */

/** Python `str.isspace()` characters (JS `\s` differs: it adds U+FEFF and lacks U+001C–U+001F, U+0085). */
const PY_SPACE = '\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PY_SPACE_SET = new RegExp(`[${PY_SPACE}]`, 'u');
/** Python `\w` (str.isalnum() or "_") + combining marks (category M) + ZWNJ/ZWJ, as gliner2 builds `_WORD`; one code point. */
const WORD_CHAR = /^[\p{L}\p{N}\p{M}_\u200c\u200d]$/iu;

export interface SplitText {
  /** Lower-cased word values (Python `str.lower()` ≈ JS `toLowerCase()` for these purposes). */
  words: string[];
  /** Original-case word values. */
  raw: string[];
  /** Code-point offsets into the text, end exclusive. */
  starts: number[];
  ends: number[];
}

/** Work done by one `splitWords` call: every loop iteration of the scanner counts one step. */
export interface SplitStats {
  steps: number;
}

/*
 * The splitter is gliner2's regex, alternatives tried in this order at each position (re.VERBOSE |
 * re.IGNORECASE; with JS's `iu` flags, the reference in test/encoder/splitterOracle.ts):
 *
 *   (?:https?://\S+|www\.\S+) | [a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,} | @[a-z0-9_]+ | WORD+(?:[-_]WORD+)* | \S
 *
 * Run as a backtracking regex it is quadratic: on a run of `.`, `%`, `+`, `-` (or `a.a.a…`) with no
 * `@`, the e-mail alternative scans to the end of the run from every position before failing (one
 * request of 100,000 dots held the event loop for 108 s). `splitWords` gives the same matches in
 * linear time from per-position facts computed once, right to left (each lookup below is O(1)):
 *   - an e-mail's local part `[a-z0-9._%+-]+` excludes `@`, so the only place its backtracking can
 *     meet `@` is the end of the maximal local-part run: `localEnd[i]`;
 *   - after `@` the domain `[a-z0-9.-]+` is greedy and backtracks from the end of its run to the last
 *     `.` followed by two or more letters; that dot is the same for every start in one run (`lastDot`),
 *     and the match ends where those letters end (`alphaEnd`);
 *   - the other alternatives never backtrack into a different result: the URL and `\S+` take the
 *     whole non-space run (`nonSpaceEnd`), a mention the whole `[a-z0-9_]` run, a word its run plus
 *     `-`-joined runs (`_` is already a word character), and nothing follows them in the pattern.
 *
 * Case-insensitive classes follow JS `iu` (simple case folding): `[a-z]` and the literals also match
 * U+017F ſ (as s) and U+212A K (as k), as Python's re.IGNORECASE does. Python differs on U+0130 İ and
 * U+0131 ı, which its `[a-z]` matches (as i) and JS's does not; that matters only inside e-mails and
 * @mentions (both are letters, so they are still word characters), no parity fixture has one, and
 * the splitter keeps JS's behaviour. Lone surrogates are single code points, as in a `u` regex.
 */

// Class bits per code point.
const SPACE = 1;
/** `[a-z0-9._%+-]`, an e-mail's local part. */
const LOCAL = 2;
/** `[a-z0-9.-]`, an e-mail's domain. */
const DOMAIN = 4;
/** `[a-z]` */
const ALPHA = 8;
/** `[a-z0-9_]`, an @mention. */
const MENTION = 16;
/** WORD_CHAR */
const WORD = 32;
const KNOWN = 128;

const AT = 0x40;
const DOT = 0x2e;
const HYPHEN = 0x2d;
const COLON = 0x3a;
const SLASH = 0x2f;
/** U+017F LATIN SMALL LETTER LONG S folds to s; U+212A KELVIN SIGN folds to k. */
const LONG_S = 0x17f;
const KELVIN = 0x212a;

const PY_SPACE_CODES = new Set([0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000]);
const isPySpace = (cp: number) =>
  (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || (cp >= 0x2000 && cp <= 0x200a) || PY_SPACE_CODES.has(cp);

/** Class bits of the BMP, filled on first sight of each code point. */
const bmpClasses = new Uint8Array(0x10000);

function computeClass(cp: number): number {
  if (isPySpace(cp)) return SPACE;
  const lower = cp | 0x20;
  if ((lower >= 0x61 && lower <= 0x7a) || cp === LONG_S || cp === KELVIN)
    return LOCAL | DOMAIN | ALPHA | MENTION | WORD;
  if (cp >= 0x30 && cp <= 0x39) return LOCAL | DOMAIN | MENTION | WORD;
  if (cp === 0x5f) return LOCAL | MENTION | WORD; // _
  if (cp === DOT || cp === HYPHEN) return LOCAL | DOMAIN;
  if (cp === 0x25 || cp === 0x2b) return LOCAL; // % +
  if (cp < 0x80) return 0;
  return WORD_CHAR.test(String.fromCodePoint(cp)) ? WORD : 0;
}

/** Exported for the tests, which check it against the reference regex's classes on every code point. */
export function classOf(cp: number): number {
  if (cp > 0xffff) return computeClass(cp);
  let c = bmpClasses[cp]!;
  if (c === 0) bmpClasses[cp] = c = computeClass(cp) | KNOWN;
  return c & ~KNOWN;
}
export const CLASS_BITS = { SPACE, LOCAL, DOMAIN, ALPHA, MENTION, WORD } as const;

/** Whether `cp` matches the ASCII letter `lower` under `iu` (simple case folding). */
export function foldsTo(cp: number, lower: number): boolean {
  return cp === lower || cp === lower - 0x20 || (lower === 0x73 && cp === LONG_S) || (lower === 0x6b && cp === KELVIN);
}

const [H, T, P, S, W] = [0x68, 0x74, 0x70, 0x73, 0x77];

/**
 * gliner2's word splitter in linear time (see above): words with their lower-cased and original
 * values and code-point offsets. `stats.steps` counts every loop iteration, for the linearity tests.
 */
export function splitWords(text: string, stats?: SplitStats): SplitText {
  let steps = 0;
  // 1. code points, their UTF-16 offsets and classes
  const cps = new Int32Array(text.length);
  const utf16At = new Int32Array(text.length + 1);
  const cls = new Uint8Array(text.length);
  let n = 0;
  for (let i = 0; i < text.length; n++) {
    steps++;
    const cp = text.codePointAt(i)!;
    cps[n] = cp;
    utf16At[n] = i;
    cls[n] = classOf(cp);
    i += cp > 0xffff ? 2 : 1;
  }
  utf16At[n] = text.length;

  // 2. right to left: where each run of a class that starts at i ends (i itself when cp[i] is not in it)
  const nonSpaceEnd = new Int32Array(n + 1);
  const localEnd = new Int32Array(n + 1);
  const domainEnd = new Int32Array(n + 1);
  const alphaEnd = new Int32Array(n + 1);
  const mentionEnd = new Int32Array(n + 1);
  const wordEnd = new Int32Array(n + 1);
  /** In a domain run, the last `.` followed by two or more letters at or after i (-1: none). */
  const lastDot = new Int32Array(n + 1);
  nonSpaceEnd[n] = localEnd[n] = domainEnd[n] = alphaEnd[n] = mentionEnd[n] = wordEnd[n] = n;
  lastDot[n] = -1;
  for (let i = n - 1; i >= 0; i--) {
    steps++;
    const c = cls[i]!;
    nonSpaceEnd[i] = c & SPACE ? i : nonSpaceEnd[i + 1]!;
    localEnd[i] = c & LOCAL ? localEnd[i + 1]! : i;
    domainEnd[i] = c & DOMAIN ? domainEnd[i + 1]! : i;
    alphaEnd[i] = c & ALPHA ? alphaEnd[i + 1]! : i;
    mentionEnd[i] = c & MENTION ? mentionEnd[i + 1]! : i;
    wordEnd[i] = c & WORD ? wordEnd[i + 1]! : i;
    if (!(c & DOMAIN)) lastDot[i] = -1;
    else if (lastDot[i + 1]! >= 0)
      lastDot[i] = lastDot[i + 1]!; // only set inside this run
    else lastDot[i] = cps[i] === DOT && alphaEnd[i + 1]! - (i + 1) >= 2 ? i : -1;
  }

  const letterAt = (p: number, lower: number): boolean => {
    steps++;
    return p < n && foldsTo(cps[p]!, lower);
  };
  const charAt = (p: number, cp: number): boolean => {
    steps++;
    return p < n && cps[p] === cp;
  };
  /** End of `https?://\S+` or `www\.\S+` at i, or -1. */
  const urlEnd = (i: number): number => {
    let rest = -1;
    if (letterAt(i, H) && letterAt(i + 1, T) && letterAt(i + 2, T) && letterAt(i + 3, P)) {
      // after an s, the s-less branch would need ':' where the s is: no backtracking to try
      const colon = letterAt(i + 4, S) ? i + 5 : i + 4;
      if (charAt(colon, COLON) && charAt(colon + 1, SLASH) && charAt(colon + 2, SLASH)) rest = colon + 3;
    } else if (letterAt(i, W) && letterAt(i + 1, W) && letterAt(i + 2, W) && charAt(i + 3, DOT)) rest = i + 4;
    return rest >= 0 && rest < n && !(cls[rest]! & SPACE) ? nonSpaceEnd[rest]! : -1;
  };

  /** End of `[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,}` at i, or -1. */
  const emailEnd = (i: number): number => {
    const at = localEnd[i]!;
    if (at === i || at >= n || cps[at] !== AT) return -1;
    const dot = lastDot[at + 1]!; // the domain needs a character before its last dot
    return dot > at + 1 ? alphaEnd[dot + 1]! : -1;
  };

  // 3. left to right, the first alternative that matches at i, as the regex's scan does
  const out: SplitText = { words: [], raw: [], starts: [], ends: [] };
  for (let i = 0; i < n; ) {
    steps++;
    const c = cls[i]!;
    if (c & SPACE) {
      i++;
      continue;
    }
    let end = urlEnd(i);
    if (end < 0) end = emailEnd(i);
    if (end < 0 && cps[i] === AT && i + 1 < n && cls[i + 1]! & MENTION) end = mentionEnd[i + 1]!;
    if (end < 0 && c & WORD) {
      end = wordEnd[i]!;
      while (end + 1 < n && cps[end] === HYPHEN && cls[end + 1]! & WORD) {
        steps++;
        end = wordEnd[end + 1]!;
      }
    }
    if (end < 0) end = i + 1;
    const raw = text.slice(utf16At[i]!, utf16At[end]!);
    out.raw.push(raw);
    out.words.push(pyLower(raw));
    out.starts.push(i);
    out.ends.push(end);
    i = end;
  }
  if (stats) stats.steps += steps;
  return out;
}

/** Python `str.lower()`; JS differs only for U+0130 (both give "i̇") — kept as JS's. */
export function pyLower(s: string): string {
  return s.toLowerCase();
}

/** Python `str.strip()` (no argument). */
export function pyStrip(s: string): string {
  let a = 0;
  let b = s.length;
  while (a < b && PY_SPACE_SET.test(s[a]!)) a++;
  while (b > a && PY_SPACE_SET.test(s[b - 1]!)) b--;
  return s.slice(a, b);
}

/** gliner2 `_normalize_text`: empty → ".", else append "." unless it ends with . ! ? */
export function normalizeText(text: string): string {
  if (!text) return '.';
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

/** Code-point array view of a string with slicing by code-point offsets. */
export class CodePoints {
  readonly cps: string[];
  constructor(text: string) {
    this.cps = Array.from(text);
  }
  get length(): number {
    return this.cps.length;
  }
  slice(start: number, end: number): string {
    return this.cps.slice(start, end).join('');
  }
}

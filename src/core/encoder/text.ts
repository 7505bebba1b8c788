/**
 * Word splitting and string helpers with Python semantics (gliner2 2.1.0
 * `processing/word_splitter.py` WhitespaceTokenSplitter, `str.strip`, code-point offsets).
 */

/** Python `str.isspace()` characters (JS `\s` differs: it adds U+FEFF and lacks U+001C–U+001F, U+0085). */
const PY_SPACE = '\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
const PY_SPACE_SET = new RegExp(`[${PY_SPACE}]`, 'u');
/** Python `\w` (str.isalnum() or "_") + combining marks (category M) + ZWNJ/ZWJ, as gliner2 builds `_WORD`. */
const WORD = '[\\p{L}\\p{N}\\p{M}_\\u200c\\u200d]';
const NOT_SPACE = `[^${PY_SPACE}]`;
/** The splitter pattern, alternative order as in Python (re.VERBOSE | re.IGNORECASE). */
export const WORD_PATTERN = new RegExp(
  `(?:https?://${NOT_SPACE}+|www\\.${NOT_SPACE}+)` +
    `|[a-z0-9._%+\\-]+@[a-z0-9.\\-]+\\.[a-z]{2,}` +
    `|@[a-z0-9_]+` +
    `|${WORD}+(?:[\\-_]${WORD}+)*` +
    `|${NOT_SPACE}`,
  'giu',
);

export interface SplitText {
  /** Lower-cased word values (Python `str.lower()` ≈ JS `toLowerCase()` for these purposes). */
  words: string[];
  /** Original-case word values. */
  raw: string[];
  /** Code-point offsets into the text, end exclusive. */
  starts: number[];
  ends: number[];
}

/** Maps UTF-16 indices to code-point indices for `text` (length text.length + 1). */
export function utf16ToCodePoint(text: string): Int32Array {
  const map = new Int32Array(text.length + 1);
  let cp = 0;
  for (let i = 0; i < text.length; i++) {
    map[i] = cp;
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        map[i + 1] = cp;
        i++;
      }
    }
    cp++;
  }
  map[text.length] = cp;
  return map;
}

export function splitWords(text: string): SplitText {
  const map = utf16ToCodePoint(text);
  const out: SplitText = { words: [], raw: [], starts: [], ends: [] };
  WORD_PATTERN.lastIndex = 0;
  for (const m of text.matchAll(WORD_PATTERN)) {
    const s = m.index;
    const e = s + m[0].length;
    out.raw.push(m[0]);
    out.words.push(pyLower(m[0]));
    out.starts.push(map[s]!);
    out.ends.push(map[e]!);
  }
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
  return /[.!?]$/.test(text) ? text : text + '.';
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

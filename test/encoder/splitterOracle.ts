/**
 * The reference for `splitWords` (src/encoder/text.ts): gliner2 2.1.0's splitter regex as the
 * encoder ran it before the linear scanner, kept only as the oracle of the splitter tests and of
 * bench/serving/hostile-text.ts. Quadratic on runs of `.`/`%`/`+`/`-` with no `@`: never use it on input.
 */
import type { SplitText } from '../../src/encoder/text';

/** Python `str.isspace()` characters. */
const PY_SPACE = '\\t\\n\\v\\f\\r \\x1c-\\x1f\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';
/** Python `\w` + combining marks + ZWNJ/ZWJ, as gliner2 builds `_WORD`. */
export const WORD = '[\\p{L}\\p{N}\\p{M}_\\u200c\\u200d]';
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
/** The single-character classes of the pattern, one code point each, for checking the scanner's class table. */
export const ORACLE_CLASSES = {
  SPACE: new RegExp(`^[${PY_SPACE}]$`, 'iu'),
  LOCAL: /^[a-z0-9._%+-]$/iu,
  DOMAIN: /^[a-z0-9.-]$/iu,
  ALPHA: /^[a-z]$/iu,
  MENTION: /^[a-z0-9_]$/iu,
  WORD: new RegExp(`^${WORD}$`, 'iu'),
} as const;

/** Maps UTF-16 indices to code-point indices for `text` (length text.length + 1). */
function utf16ToCodePoint(text: string): Int32Array {
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

/** The splitter as it was: the regex over the whole text. */
export function regexSplitWords(text: string): SplitText {
  const map = utf16ToCodePoint(text);
  const out: SplitText = { words: [], raw: [], starts: [], ends: [] };
  for (const m of text.matchAll(WORD_PATTERN)) {
    const s = m.index;
    const e = s + m[0].length;
    out.raw.push(m[0]);
    out.words.push(m[0].toLowerCase());
    out.starts.push(map[s]!);
    out.ends.push(map[e]!);
  }
  return out;
}

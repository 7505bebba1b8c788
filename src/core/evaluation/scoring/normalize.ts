/** Whitespace and value normalising, the same as the trainer's metrics.py. */

/** Python's `str.isspace()` characters, spelled out so both languages split the same way. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: isspace() counts U+001C-U+001F (the information separators) as whitespace
const WHITESPACE = /[\t\n\v\f\r \u001c-\u001f\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+/u;

/** Collapse whitespace runs to one space and trim. */
export function normalizeSpace(s: string): string {
  return s
    .split(WHITESPACE)
    .filter((x) => x.length > 0)
    .join(' ');
}

/** `normalizeSpace` + lower-case: structure values and relation arguments. */
export function normalizeValue(s: string): string {
  return normalizeSpace(s).toLowerCase();
}

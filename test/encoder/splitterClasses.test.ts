/**
 * The word splitter's character classes (src/encoder/text.ts `classOf`, `foldsTo`) are the
 * one-character classes and literals of gliner2's pattern under JS's `iu` flags
 * (test/encoder/splitterOracle.ts), on every code point: U+017F ſ and U+212A K case-fold into
 * [a-z], lone surrogates are code points of their own, \p{L}\p{N}\p{M} as the regex reads them.
 */
import { CLASS_BITS, classOf, foldsTo } from '../../src/encoder/text';
import { ORACLE_CLASSES } from './splitterOracle';

describe('splitWords character classes', () => {
  /** Every code point once; an "x" after each high surrogate keeps it from pairing with the next. */
  const ALL = (() => {
    const parts: string[] = [];
    for (let from = 0; from <= 0x10ffff; from += 0x1000) {
      const cps: number[] = [];
      for (let cp = from; cp < from + 0x1000; cp++) cps.push(cp);
      parts.push(String.fromCodePoint(...cps).replace(/([\ud800-\udbff])/gu, '$1x'));
    }
    return parts.join('');
  })();
  /** The code points a one-code-point regex matches, found by one global scan of ALL. */
  const matching = (re: RegExp): Set<number> =>
    new Set([...ALL.matchAll(new RegExp(re.source.slice(1, -1), `${re.flags}g`))].map((m) => m[0].codePointAt(0)!));

  it('match the regex classes on every code point', () => {
    const wrong: string[] = [];
    const classes = Object.entries(ORACLE_CLASSES).map(([name, re]) => ({
      name,
      want: matching(re),
      bit: CLASS_BITS[name as keyof typeof CLASS_BITS],
    }));
    for (let cp = 0; cp <= 0x10ffff; cp++) {
      const got = classOf(cp);
      for (const { name, want, bit } of classes)
        if (want.has(cp) !== ((got & bit) !== 0)) wrong.push(`U+${cp.toString(16)} ${name}`);
    }
    expect(wrong).toEqual([]);
    expect(classOf(0x17f) & CLASS_BITS.ALPHA).toBeTruthy();
    expect(classOf(0xd800)).toBe(0);
  });

  it('fold the URL literals as `iu` does', () => {
    const wrong: string[] = [];
    for (const letter of 'hptsw') {
      const want = matching(new RegExp(`^${letter}$`, 'iu'));
      for (let cp = 0; cp <= 0x10ffff; cp++)
        if (want.has(cp) !== foldsTo(cp, letter.charCodeAt(0))) wrong.push(`${letter} U+${cp.toString(16)}`);
    }
    expect(wrong).toEqual([]);
    expect(foldsTo(0x17f, 's'.charCodeAt(0))).toBe(true);
  });
});

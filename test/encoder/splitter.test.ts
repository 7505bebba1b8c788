/**
 * The encoder's word splitter (src/encoder/text.ts `splitWords`): the same words (raw, lower,
 * code-point starts/ends) as gliner2's regex (test/encoder/splitterOracle.ts) on every input, in a
 * number of steps linear in the text (security review F1: the regex is quadratic on runs of
 * `.`/`%`/`+`/`-`, and one request of 100,000 dots held the event loop for 108 s).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import fc from 'fast-check';
import { splitWords, type SplitStats } from '../../src/encoder/text';
import { regexSplitWords } from './splitterOracle';

const expectSameSplit = (text: string) => expect(splitWords(text)).toEqual(regexSplitWords(text));

/** The texts of the Python parity fixtures (sift_trainer/build/fixtures.py CASES). */
function fixtureTexts(): string[] {
  const src = readFileSync(join(process.cwd(), 'containers/training/sift_trainer/build/fixtures.py'), 'utf8');
  return [...src.matchAll(/"text": ("(?:[^"\\]|\\.)*")/g)].map((m) => JSON.parse(m[1]!) as string);
}

/** The adversarial texts of bench/parity/encoder-corpus.ts (its corpus reads ../shared/data; these are inline there). */
const ADVERSARIAL = [
  'Tim Cook 😀 met 👩‍👩‍👧 Satya Nadella in Zürich 🇨🇭 on Monday',
  'José Álvarez from Société Générale visited São Paulo and Kraków.',
  '東京で山田太郎はソニーの社長に会った。北京 is in China.',
  'Ünïcödé naïve café — “quoted” text… with İstanbul and straße',
  'Contact me at jane.doe@example.com or @janedoe, see https://example.com/a?b=c',
  '',
  '   ',
  '!!!',
  'a',
];

/** Pieces that reach every alternative and every class boundary of the pattern. */
const PIECES = [
  '.',
  '%',
  '+',
  '-',
  '_',
  '@',
  ':',
  '/',
  'h',
  't',
  'p',
  's',
  'w',
  'H',
  'T',
  'P',
  'S',
  'W',
  'a',
  'Z',
  'k',
  'x',
  '0',
  '9',
  'http://',
  'https://',
  'HTTPS:/',
  'www.',
  'wWw.',
  '.com',
  '.c',
  '@ab',
  'a@b',
  '-_',
  '--',
  // Python str.isspace() of each kind, and U+FEFF (JS \s, not a Python space)
  ' ',
  '\t',
  '\n',
  '\v',
  '\f',
  '\r',
  '\x1c',
  '\x1f',
  '\x85',
  '\xa0',
  '\u1680',
  '\u2000',
  '\u200a',
  '\u2028',
  '\u2029',
  '\u202f',
  '\u205f',
  '\u3000',
  '\ufeff',
  // combining marks, joiners, letters and digits beyond ASCII, case-folding oddities
  '\u0301',
  '\u0345',
  '\u200c',
  '\u200d',
  'é',
  'ß',
  '東',
  '١',
  'Ⅻ',
  '\u017f',
  '\u212a',
  '\u0130',
  '\u0131',
  // astral characters and lone surrogates
  '😀',
  '👩‍👩‍👧',
  '🇨🇭',
  '𝐀',
  '𐍈',
  '\ud800',
  '\udc00',
  '\udbff',
];
const textOf = (maxPieces: number) =>
  fc.array(fc.constantFrom(...PIECES), { maxLength: maxPieces }).map((xs) => xs.join(''));

describe('splitWords equals the regex', () => {
  it('on the texts of the encoder parity fixtures', () => {
    const texts = [...fixtureTexts(), ...ADVERSARIAL];
    expect(texts.length).toBeGreaterThanOrEqual(16);
    for (const t of texts) {
      expectSameSplit(t);
      expectSameSplit(t.endsWith('.') ? t : `${t}.`); // as normalizeText leaves it
    }
  });

  const sharedData = process.env.SIFT_SHARED_DATA ?? join(process.cwd(), '..', 'shared', 'data');
  (existsSync(sharedData) ? it : it.skip)(
    'on the texts of bench/parity/encoder-corpus.ts (../shared/data)',
    async () => {
      const { parityCases } = await import('../../bench/parity/encoder-corpus');
      const texts = parityCases().flatMap((c) => c.texts);
      expect(texts.length).toBeGreaterThan(200);
      for (const t of texts) expectSameSplit(t);
    },
  );

  it('on e-mails, URLs, mentions and joins at their edges', () => {
    for (const t of [
      'a.b@c.d.ef.g x@y.comm. a@b.c.de- a@.xx a@b.xx. a@b..cc @a@b.cc a@@b.cc .a@b.cc- a%+@b-c.dd',
      'ab@cd.ef.gh.i x@y.z1a.bc x@y.a1 x@-.ab x@a.b-cd.ef x@a.bc-d -@a.bc _@a.bc',
      'http://x https:// http:/x httpS://x htTp://x.y httpſ://x www. www.x wwwx www..x wWw.Ab ftp://x hhttp://x',
      'foo-bar_baz--q -x- a_-b a-_b _a_ a- -a é\u0301-x 東京-大阪 a\u200db\u200c-c',
      '@ab_c @_ @- @@x @é x@ @a-b',
      'Kelvin: \u212a@\u212a.\u212a\u212a \u017fomeone@x.\u017f\u017f http\u017f://x WWW.x',
      'I\u0307stanbul \u0130@x.ab a@\u0131.ab a@b.\u0130\u0131',
      '\ud800 \udc00\ud800 \udc00a \ud83d\ude00@x.cc a\ud800-b',
    ])
      expectSameSplit(t);
  });

  it('on generated short texts (fast-check)', () => {
    fc.assert(
      fc.property(textOf(40), (t) => {
        expect(splitWords(t)).toEqual(regexSplitWords(t));
      }),
      { seed: 25_001, numRuns: 4000 },
    );
  });

  it('on generated longer texts (fast-check)', () => {
    fc.assert(
      fc.property(textOf(400), (t) => {
        expect(splitWords(t)).toEqual(regexSplitWords(t));
      }),
      { seed: 25_002, numRuns: 300 },
    );
  });
});

describe('splitWords runs in linear time', () => {
  // Every loop iteration of the scanner is a step. The regex took ~n²/2 character visits on the
  // first three texts (the e-mail alternative scans the rest of the run from every position).
  const N = 100_000;
  const HOSTILE: Array<[string, string]> = [
    ['100,000 dots', '.'.repeat(N)],
    ['a. × 50,000', 'a.'.repeat(N / 2)],
    ['%+-. × 25,000', '%+-.'.repeat(N / 4)],
    ['one 100,000-letter word', 'a'.repeat(N)],
    ['a local part before @ with no domain dot', `${'a.'.repeat(N / 2 - 2)}@abc`],
    ['a domain of dots and letters', `a@${'b.'.repeat(N / 2 - 1)}`],
    ['@ × 100,000', '@'.repeat(N)],
    ['http:/ × 16,666', 'http:/'.repeat(Math.floor(N / 6))],
    ['www × 33,333', 'www'.repeat(Math.floor(N / 3))],
    ['a- × 50,000', 'a-'.repeat(N / 2)],
    ['x@y.cc + dots', `x@y.cc${'.'.repeat(N - 6)}`],
  ];
  for (const [name, text] of HOSTILE)
    it(`${name}: at most 8 steps per character`, () => {
      const stats: SplitStats = { steps: 0 };
      const out = splitWords(text, stats);
      expect(stats.steps).toBeGreaterThanOrEqual(text.length);
      expect(stats.steps).toBeLessThanOrEqual(8 * text.length);
      expect(out.ends.at(-1)).toBe(text.length);
    });

  it('at most 8 steps per code point on generated texts (fast-check)', () => {
    fc.assert(
      fc.property(textOf(400), (t) => {
        const stats: SplitStats = { steps: 0 };
        splitWords(t, stats);
        expect(stats.steps).toBeLessThanOrEqual(8 * [...t].length + 8);
      }),
      { seed: 25_003, numRuns: 300 },
    );
  });
});

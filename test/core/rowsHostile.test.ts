/**
 * The row validator against hostile rows (issue #25 row 3, security review F4 and F13): linear in the
 * row's size, bounded output, reserved names refused. Mechanisms are asserted, not durations
 * (bench/serving/row-validator.ts prints those).
 */
import { jest } from '@jest/globals';
import fc from 'fast-check';
import { echo, ROW_LIMITS, validateRow, validationWork } from '../../src/core/datasets/rows';
import { occurringIn } from '../../src/core/datasets/textIndex';
import { mergeVocabularies } from '../../src/core/evaluation/workflow';

/** The security review's row: a 100,000-character text and 1,000 entities whose offsets span all of it. */
const reviewRow = () => ({
  text: 'x'.repeat(100_000),
  entities: Array.from({ length: 1000 }, () => ({ text: 'x', label: 'l', start: 0, end: 100_000 })),
});

/** Bytes of the errors as the report stores them. */
const reportBytes = (errors: unknown[]) => Buffer.byteLength(JSON.stringify(errors));

afterEach(() => jest.restoreAllMocks());

describe('a row with many wrong offsets (the review: 148 KB → 100 MB of errors)', () => {
  it('reports at most 20 errors and a summary, each echo cut to 200 characters with the full length', () => {
    const row = reviewRow();
    expect(Buffer.byteLength(JSON.stringify(row))).toBeGreaterThan(140_000);
    const { errors, row: normalized } = validateRow(row, 7);
    expect(normalized).toBeUndefined();
    expect(errors).toHaveLength(ROW_LIMITS.errorsPerRow + 1);
    for (const e of errors.slice(0, 20)) {
      expect(e).toEqual({
        row: 7,
        field: expect.stringMatching(/^entities\[\d+\]$/),
        message: expect.stringMatching(
          /^text\[0:100000\] is 'x{200}…' \(100,000 characters\), not 'x' \(offsets count code points\)$/,
        ),
      });
    }
    expect(errors.map((e) => e.field).slice(0, 3)).toEqual(['entities[0]', 'entities[1]', 'entities[2]']);
    expect(errors[20]).toEqual({ row: 7, field: null, message: '… and 980 more errors in this row' });
    // was 100,057,000 characters
    expect(reportBytes(errors)).toBeLessThan(8_000);
  });

  it('splits the text into code points once for the row, not once per entity', () => {
    const row = reviewRow();
    const arrayFrom = jest.spyOn(Array, 'from');
    const before = validationWork.codePointScans;
    validateRow(row, 1);
    // the old rule ran Array.from(text) for the length and again for each entity's slice
    expect(arrayFrom.mock.calls.filter(([arg]) => arg === row.text)).toHaveLength(0);
    expect(validationWork.codePointScans - before).toBe(1);
  });

  it('a 1 MiB row: over 5,000 entities is one error naming the column; 5,000 wrong offsets are capped like any others', () => {
    const text = 'y'.repeat(524_000);
    const tooMany = {
      text,
      entities: Array.from({ length: 10_900 }, () => ({ text: 'y', label: 'l', start: 0, end: 524_000 })),
    };
    expect(Buffer.byteLength(JSON.stringify(tooMany))).toBeGreaterThan(1_000_000);
    expect(validateRow(tooMany, 3).errors).toEqual([
      { row: 3, field: 'entities', message: 'has 10,900 items; a row may have at most 5,000' },
    ]);

    const atCap = {
      text,
      entities: Array.from({ length: ROW_LIMITS.entities }, (_, i) => ({
        text: 'y',
        label: 'l',
        start: i,
        end: 524_000 - i,
      })),
    };
    const before = validationWork.codePointScans;
    const { errors } = validateRow(atCap, 4);
    expect(validationWork.codePointScans - before).toBe(1);
    expect(errors).toHaveLength(21);
    expect(errors[20]!.message).toBe('… and 4,980 more errors in this row');
    expect(reportBytes(errors)).toBeLessThan(8_000);
  });

  it('relations and json_structures are capped per row too, naming the column', () => {
    const relations = Array.from({ length: ROW_LIMITS.relations + 1 }, () => ({ relation: 'r', head: 'a', tail: 'a' }));
    expect(validateRow({ text: 'a', relations }, 1).errors).toEqual([
      { row: 1, field: 'relations', message: 'has 5,001 items; a row may have at most 5,000' },
    ]);
    const json_structures = Array.from({ length: ROW_LIMITS.structures + 1 }, () => ({ s: { f: 'a' } }));
    expect(validateRow({ text: 'a', json_structures }, 1).errors).toEqual([
      { row: 1, field: 'json_structures', message: 'has 1,001 items; a row may have at most 1,000' },
    ]);
  });
});

describe('verbatim-substring rules: one scan of the text for the whole row', () => {
  // ~970 distinct values 'ab', 'aab', 'aaab', …: each `includes` on a text of a's scans all of it
  const text = 'a'.repeat(500_000);
  const values: string[] = [];
  for (let k = 1, size = 0; size < 450_000; k += 1) {
    values.push(`${'a'.repeat(k)}b`);
    size += k + 10;
  }

  it('entities without offsets, relation heads/tails and structure values never call includes on the text', () => {
    const includes = jest.spyOn(String.prototype, 'includes');
    const before = { ...validationWork };
    const { errors } = validateRow(
      {
        text,
        entities: values.slice(0, 400).map((v) => [v, 'l']),
        relations: values.slice(400, 600).map((v) => ({ relation: 'r', head: 'a', tail: v })),
        json_structures: [{ s: { f: values.slice(600) } }],
      },
      1,
    );
    expect(errors).toHaveLength(21);
    expect(errors[0]).toEqual({
      row: 1,
      field: 'entities[0].text',
      message: "'ab' is not a verbatim substring of text",
    });
    expect(includes.mock.contexts.filter((self) => String(self).length === text.length)).toHaveLength(0);
    expect(validationWork.substringScans - before.substringScans).toBe(1);
    // one pass: no more code units examined than the text has
    expect(validationWork.unitsScanned - before.unitsScanned).toBeLessThanOrEqual(text.length);
  });

  it('finds exactly what includes finds (property, UTF-16 units: surrogate halves and overlaps included)', () => {
    const unit = fc.constantFrom('a', 'b', 'ab', '🎉', '\ud83c', '\udf89', 'é', 'e\u0301');
    const str = (max: number) => fc.array(unit, { maxLength: max }).map((parts) => parts.join(''));
    fc.assert(
      fc.property(str(400), fc.array(str(12), { maxLength: 60 }), (t, needles) => {
        const found = occurringIn(t, needles);
        for (const n of needles) expect([n, found.has(n)]).toEqual([n, n.length > 0 && t.includes(n)]);
      }),
      { seed: 25_004, numRuns: 300 },
    );
  });
});

describe('messages and field names are bounded', () => {
  it('an unknown column with a 100,000-character name: field cut to 300, message echo to 200', () => {
    const name = 'k'.repeat(100_000);
    const [e] = validateRow({ text: 'a', label: 'x', [name]: 1 }, 2).errors;
    expect(e!.field).toBe(`${'k'.repeat(ROW_LIMITS.fieldChars)}…`);
    expect(e!.message).toMatch(/^unknown column 'k{200}…' \(100,000 characters\) \(allowed: /);
  });

  it('echo never cuts a surrogate pair and counts code points', () => {
    expect(echo('🎉'.repeat(300))).toBe(`'${'🎉'.repeat(200)}…' (300 characters)`);
    expect(echo('short')).toBe("'short'");
  });

  it('an entity object with thousands of unknown keys names five of them', () => {
    const entity: Record<string, unknown> = { text: 'a', label: 'l' };
    for (let i = 0; i < 5000; i += 1) entity[`extra${i}`] = i;
    const [e] = validateRow({ text: 'a', entities: [entity] }, 1).errors;
    expect(e).toEqual({
      row: 1,
      field: 'entities[0]',
      message: "unknown key(s): 'extra0', 'extra1', 'extra2', 'extra3', 'extra4' and 4,995 more",
    });
  });
});

describe('reserved names in json_structures (F13)', () => {
  // JSON.parse makes `__proto__` an own key, as the dataset reader does
  const row = (structures: string) =>
    JSON.parse(`{"text": "large pizza", "json_structures": ${structures}}`) as unknown;

  it.each(['__proto__', 'constructor', 'prototype'])(
    'rejects %s as a structure name or a field name, naming the field',
    (name) => {
      expect(validateRow(row(`[{"${name}": {"size": "large"}}]`), 5).errors).toEqual([
        {
          row: 5,
          field: `json_structures[0].${name}`,
          message: `'${name}' cannot name a structure (it is reserved on every JavaScript object); rename it`,
        },
      ]);
      expect(validateRow(row(`[{"order": {"${name}": "large"}}]`), 5).errors).toEqual([
        {
          row: 5,
          field: `json_structures[0].order.${name}`,
          message: `'${name}' cannot name a field (it is reserved on every JavaScript object); rename it`,
        },
      ]);
    },
  );

  it('mergeVocabularies keeps a `__proto__` name as data and pollutes no prototype', () => {
    const structures = JSON.parse(
      '{"__proto__": {"polluted_by_test": {"dtype": "str"}}, "order": {"size": {"dtype": "list"}}}',
    );
    try {
      const merged = mergeVocabularies([
        { task_types: ['structures'], label_vocabulary: [], entity_types: [], relation_types: [], structures },
      ]);
      expect(({} as Record<string, unknown>).polluted_by_test).toBeUndefined();
      expect(Object.hasOwn(merged.structures!, '__proto__')).toBe(true);
      expect(Object.keys(merged.structures!)).toEqual(['__proto__', 'order']);
    } finally {
      delete (Object.prototype as Record<string, unknown>).polluted_by_test;
    }
  });
});

describe('property: any JSON row', () => {
  const NUM_RUNS = 400;
  const anyRow = fc.oneof(
    fc.jsonValue({ maxDepth: 4 }),
    fc.record(
      {
        text: fc.oneof(fc.string({ maxLength: 60 }), fc.jsonValue({ maxDepth: 1 })),
        label: fc.jsonValue({ maxDepth: 1 }),
        labels: fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 5 }),
        entities: fc.array(
          fc.oneof(
            fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 4 })),
            fc.record(
              {
                text: fc.string({ maxLength: 8 }),
                label: fc.string({ maxLength: 4 }),
                start: fc.integer({ min: -2, max: 70 }),
                end: fc.integer({ min: -2, max: 70 }),
              },
              { requiredKeys: ['text', 'label'] },
            ),
            fc.jsonValue({ maxDepth: 2 }),
          ),
          { maxLength: 40 },
        ),
        relations: fc.array(
          fc.dictionary(fc.constantFrom('relation', 'head', 'tail', 'x'), fc.jsonValue({ maxDepth: 1 })),
          { maxLength: 10 },
        ),
        json_structures: fc.array(
          fc.dictionary(fc.constantFrom('order', '__proto__', 'constructor', 's'), fc.jsonValue({ maxDepth: 2 })),
          { maxLength: 5 },
        ),
        messages: fc.jsonValue({ maxDepth: 3 }),
        prompt: fc.jsonValue({ maxDepth: 2 }),
      },
      { requiredKeys: [] },
    ),
  );

  it('never throws; at most 21 errors, each naming this row, a bounded field and a bounded message', () => {
    fc.assert(
      fc.property(anyRow, fc.integer({ min: 1, max: 1_000_000 }), (raw, n) => {
        // through JSON, as the reader hands rows over (no undefined, `__proto__` an own key)
        const parsed = JSON.parse(JSON.stringify(raw) ?? 'null') as unknown;
        const result = validateRow(parsed, n);
        expect(result.errors.length).toBeLessThanOrEqual(ROW_LIMITS.errorsPerRow + 1);
        expect(result.row === undefined).toBe(result.errors.length > 0);
        for (const e of result.errors) {
          expect(Object.keys(e).sort()).toEqual(['field', 'message', 'row']);
          expect(e.row).toBe(n);
          expect(e.field === null || (typeof e.field === 'string' && e.field.length <= ROW_LIMITS.fieldChars + 1)).toBe(
            true,
          );
          expect(
            typeof e.message === 'string' && e.message.length > 0 && e.message.length <= ROW_LIMITS.messageChars + 1,
          ).toBe(true);
        }
      }),
      { seed: 25_003, numRuns: NUM_RUNS },
    );
  });

  it('valid rows stay valid: entities as pairs or with code-point offsets, relations and structures from the text', () => {
    const word = fc
      .array(fc.constantFrom('a', 'b', 'é', '🎉', 'Z', '\u0301'), { minLength: 1, maxLength: 6 })
      .map((c) => c.join(''));
    const validRow = fc
      .tuple(
        fc.array(word, { minLength: 1, maxLength: 30 }),
        fc.array(fc.tuple(fc.nat(), fc.nat(), fc.boolean()), { maxLength: 25 }),
      )
      .map(([words, picks]) => {
        const text = words.join(' ');
        const points = Array.from(text);
        const entities = picks.map(([a, b, withOffsets]) => {
          const start = a % points.length;
          const end = start + 1 + (b % (points.length - start));
          const span = points.slice(start, end).join('');
          return withOffsets ? { text: span, label: 'l', start, end } : [span, 'l'];
        });
        const spans = entities.map((e) => (Array.isArray(e) ? e[0]! : e.text));
        return {
          text,
          entities,
          relations: spans.length >= 2 ? [{ relation: 'r', head: spans[0]!, tail: spans[1]! }] : [],
          json_structures: spans.length ? [{ thing: { name: spans[0]!, all: spans } }] : [],
        };
      })
      .filter(
        (r) =>
          r.text.trim().length > 0 && r.entities.every((e) => (Array.isArray(e) ? e[0]! : e.text).trim().length > 0),
      );
    fc.assert(
      fc.property(validRow, (raw) => {
        const result = validateRow(raw, 1);
        expect(result.errors).toEqual([]);
        expect(result.row?.entities).toHaveLength(raw.entities.length);
      }),
      { seed: 25_005, numRuns: NUM_RUNS },
    );
  });
});

/**
 * Hostile datasets against the real HTTP server (issue #25 row 3, security review F4, F9, F13):
 * each file goes through the presigned URL and ordinary processing, and ends as a `failed` version
 * whose report is bounded and names row and field, with no rows published; the server still
 * answers `/health` afterwards. The validator's linear time is asserted step by step in
 * test/core/rowsHostile.test.ts; durations are bench/serving/row-validator.ts's business.
 */
import { ROW_LIMITS } from '../../src/core/datasets/rows';
import { REPORT_LIMITS } from '../../src/core/datasets/validation';
import { jsonl, TestStack } from '../helpers/localStack';

/** The validation children's heap here: enough for any 1 MiB row, far too little for a 55 MB .json parsed whole (its text alone outgrows it). */
const HEAP_MB = 48;

let stack: TestStack;
const savedHeap = process.env.SIFT_VALIDATION_HEAP_MB;
beforeAll(async () => {
  process.env.SIFT_VALIDATION_HEAP_MB = String(HEAP_MB);
  stack = await TestStack.start();
});
afterAll(async () => {
  if (savedHeap === undefined) delete process.env.SIFT_VALIDATION_HEAP_MB;
  else process.env.SIFT_VALIDATION_HEAP_MB = savedHeap;
  await stack?.stop();
});

let counter = 0;
const uniq = (base: string) => `${base}-${++counter}`;

async function expectHealthy(): Promise<void> {
  const res = await stack.call('GET', '/health', { key: null });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ status: 'ok' });
}

/** The stored report, as bytes and parsed. */
async function storedReport(name: string) {
  const res = await stack.call('GET', `/core/datasets/${name}/1/report`);
  expect(res.status).toBe(200);
  return {
    bytes: Buffer.byteLength(res.text),
    body: res.body as { error_count: number; errors: { row: number | null; field: string | null; message: string }[] },
  };
}

/** A failed version published no rows. */
async function expectNoRows(name: string): Promise<void> {
  expect((await stack.svc.blobs.list('datasets/')).filter((k) => k.includes(`/${name}/v1/rows.jsonl`))).toEqual([]);
}

describe('hostile dataset files', () => {
  it('a 2 MiB row: reported as over the row limit, never parsed; the rows around it are still validated', async () => {
    const name = uniq('oversized-row');
    const body = `{"text":"first","label":"a"}\n{"text":"${'x'.repeat(2 * 1024 * 1024)}","label":"b"}\n{"text":"third","label":"c","extra":1}\n`;
    const v = await stack.uploadDataset(name, body);
    expect(v).toMatchObject({
      status: 'failed',
      error_count: 2,
      errors: [
        { row: 2, field: null, message: `row is larger than the ${1024 * 1024} byte row limit` },
        { row: 3, field: 'extra', message: expect.stringMatching(/^unknown column 'extra'/) },
      ],
    });
    await expectNoRows(name);
    await expectHealthy();
  });

  it('a 1 MiB row with 5,000 wrong offsets over a 700,000-character text: 20 errors and a summary, each echo cut', async () => {
    const name = uniq('wrong-offsets');
    const text = 'w'.repeat(700_000);
    const row = {
      text,
      entities: Array.from({ length: ROW_LIMITS.entities }, (_, i) => ({
        text: 'w',
        label: 'l',
        start: i,
        end: 700_000 - i,
      })),
    };
    const line = JSON.stringify(row);
    expect(Buffer.byteLength(line)).toBeGreaterThan(900_000);
    expect(Buffer.byteLength(line)).toBeLessThanOrEqual(1024 * 1024);
    const v = await stack.uploadDataset(name, `${line}\n`);
    expect(v.status).toBe('failed');
    expect(v.error_count).toBe(ROW_LIMITS.errorsPerRow + 1);
    expect(v.errors[0]).toEqual({
      row: 1,
      field: 'entities[0]',
      message: `text[0:700000] is '${'w'.repeat(200)}…' (700,000 characters), not 'w' (offsets count code points)`,
    });
    expect(v.errors[20]).toEqual({ row: 1, field: null, message: '… and 4,980 more errors in this row' });
    const report = await storedReport(name);
    expect(report.body.errors).toEqual(v.errors);
    // the review's 148 KB row made 100 MB of error text; this 1 MiB row makes a few KB
    expect(report.bytes).toBeLessThan(10_000);
    await expectNoRows(name);
    await expectHealthy();
  });

  it('a row with 10,900 entities (the review’s 1 MiB row): one error naming the column', async () => {
    const name = uniq('too-many-entities');
    const row = {
      text: 'z'.repeat(524_000),
      entities: Array.from({ length: 10_900 }, () => ({ text: 'z', label: 'l', start: 0, end: 524_000 })),
    };
    const v = await stack.uploadDataset(name, jsonl([row]));
    expect(v).toMatchObject({
      status: 'failed',
      error_count: 1,
      errors: [{ row: 1, field: 'entities', message: 'has 10,900 items; a row may have at most 5,000' }],
    });
    await expectHealthy();
  });

  it('an error storm (15,000 bad rows with long column names): every error counted, the report bounded', async () => {
    const name = uniq('storm');
    const column = 'q'.repeat(250);
    const rows = Array.from({ length: 15_000 }, (_, i) => ({ text: `row ${i}`, label: 'x', [`${column}${i}`]: true }));
    const v = await stack.uploadDataset(name, jsonl(rows));
    expect(v).toMatchObject({ status: 'failed', error_count: 15_000, row_count: 0 });
    expect(v.errors).toHaveLength(100);
    expect(v.errors.slice(0, 2).map((e: { row: number; field: string }) => [e.row, e.field])).toEqual([
      [1, `${column}0`],
      [2, `${column}1`],
    ]);
    const report = await storedReport(name);
    expect(report.body.error_count).toBe(15_000);
    expect(report.body.errors.length).toBeLessThan(15_000);
    expect(report.body.errors.length).toBeLessThanOrEqual(REPORT_LIMITS.errors);
    expect(report.bytes).toBeLessThanOrEqual(REPORT_LIMITS.bytes + 200);
    // the first errors, in row order
    expect(report.body.errors.map((e) => e.row)).toEqual(
      Array.from({ length: report.body.errors.length }, (_, i) => i + 1),
    );
    await expectNoRows(name);
    await expectHealthy();
  }, 60_000);

  it.each(['__proto__', 'constructor', 'prototype'])(
    'json_structures named %s: refused naming the field, no prototype touched',
    async (reserved) => {
      const name = uniq('reserved');
      const body = `{"text":"large pizza","json_structures":[{"${reserved}":{"size":"large"}}]}\n{"text":"small salad","json_structures":[{"order":{"${reserved}":"small"}}]}\n`;
      const v = await stack.uploadDataset(name, body);
      expect(v).toMatchObject({
        status: 'failed',
        errors: [
          {
            row: 1,
            field: `json_structures[0].${reserved}`,
            message: expect.stringMatching(/cannot name a structure/),
          },
          {
            row: 2,
            field: `json_structures[0].order.${reserved}`,
            message: expect.stringMatching(/cannot name a field/),
          },
        ],
      });
      expect(({} as Record<string, unknown>).size).toBeUndefined();
      await expectHealthy();
    },
  );

  it(`a .json file whose parse needs more than the validator's ${HEAP_MB} MB heap: failed with the reason, the server serves on`, async () => {
    const name = uniq('heap-buster');
    const row = (i: number) =>
      `{"text":"row ${i} ${'of a file too big to parse here '.repeat(30)}","label":"l${i % 7}"}`;
    const body = `[${Array.from({ length: 55_000 }, (_, i) => row(i)).join(',')}]`;
    expect(body.length).toBeGreaterThan(HEAP_MB * 1024 * 1024);
    const v = await stack.uploadDataset(name, body, { fileName: 'big.json' });
    expect(v).toMatchObject({
      status: 'failed',
      errors: [
        {
          row: null,
          field: null,
          message: `processing failed: the validation process ran out of memory (its heap is limited to ${HEAP_MB} MB): the file's rows need more than that`,
        },
      ],
    });
    await expectHealthy();
    // and the next dataset is validated by a fresh process
    expect(await stack.uploadDataset(uniq('after'), jsonl([{ text: 'fine', label: 'x' }]))).toMatchObject({
      status: 'ready',
      row_count: 1,
    });
  }, 60_000);
});

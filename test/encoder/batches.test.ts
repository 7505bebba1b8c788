/** Encoder batches (src/encoder/batches.ts): every record once, in order, each batch within its row and padding bounds. */
import { MAX_BATCH_TOKENS, MAX_PADDING, paddedBatches } from '../../src/encoder/batches';

const check = (lengths: number[], batchSize: number) => {
  const batches = paddedBatches(lengths, batchSize);
  expect(batches.flat()).toEqual(lengths.map((_, i) => i));
  for (const b of batches) {
    expect(b.length).toBeLessThanOrEqual(batchSize);
    const longest = Math.max(...b.map((i) => lengths[i]!));
    const real = b.reduce((n, i) => n + lengths[i]!, 0);
    if (b.length > 1) expect(longest * b.length).toBeLessThanOrEqual(MAX_PADDING * real);
    if (b.length > 1) expect(longest * b.length).toBeLessThanOrEqual(MAX_BATCH_TOKENS);
  }
  return batches;
};

describe('paddedBatches', () => {
  it('keeps equal lengths together up to the batch size', () => {
    expect(check(Array(20).fill(40), 8).map((b) => b.length)).toEqual([8, 8, 4]);
  });

  it('cuts where padding to the longest would exceed the bound (wnut17-like spread)', () => {
    const lengths = [24, 26, 30, 33, 37, 41, 45, 49, 55, 60, 70, 85, 100, 121];
    const batches = check(lengths, 32);
    expect(batches.length).toBeGreaterThan(1);
    // one batch of all of them would pad 14 rows to 121 tokens: 1694 tokens for 776 real ones
    expect(121 * lengths.length).toBeGreaterThan(MAX_PADDING * lengths.reduce((a, b) => a + b, 0));
  });

  it('short records fill a pass of 32; full-length windows go 2 at a time (the padded-token bound)', () => {
    expect(check(Array(40).fill(20), 32).map((b) => b.length)).toEqual([32, 8]);
    expect(check(Array(5).fill(512), 32).map((b) => b.length)).toEqual([2, 2, 1]);
  });

  it('a single long record goes alone; batch size 1 gives one record per batch', () => {
    expect(check([10, 10, 500], 8)).toEqual([[0, 1], [2]]);
    expect(check([5, 6, 7], 1)).toEqual([[0], [1], [2]]);
  });
});

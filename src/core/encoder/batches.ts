/** Encoder batches: rows of similar length, padding bounded. */

/**
 * Padded tokens a batch may cost over its real tokens. Every encoder row is padded to the longest
 * in its batch, and the encoder's cost is linear in padded tokens at these lengths: one batch of 32
 * tweets (49 tokens on average, 121 at most) computed 2.5× the tokens it needed, which is why
 * texts/s fell as the batch grew.
 */
export const MAX_PADDING = 1.2;

/**
 * Splits records sorted by length (ascending) into batches of at most `batchSize` whose padded size
 * (rows × longest) stays within `MAX_PADDING` × their real tokens. Returns positions into `lengths`.
 */
export function paddedBatches(lengths: number[], batchSize: number): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  let real = 0;
  lengths.forEach((len, i) => {
    if (cur.length && (cur.length >= batchSize || len * (cur.length + 1) > MAX_PADDING * (real + len))) {
      out.push(cur);
      cur = [];
      real = 0;
    }
    cur.push(i);
    real += len;
  });
  if (cur.length) out.push(cur);
  return out;
}

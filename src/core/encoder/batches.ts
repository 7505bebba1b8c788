/** Encoder batches: rows of similar length, padding bounded. */

/**
 * Padded tokens a batch may cost over its real tokens. Every encoder row is padded to the longest
 * in its batch, and the encoder's cost is linear in padded tokens at these lengths: one batch of 32
 * tweets (49 tokens on average, 121 at most) computed 2.5× the tokens it needed, which is why
 * texts/s fell as the batch grew.
 */
export const MAX_PADDING = 1.2;

/**
 * Padded tokens per batch: eight full 512-token windows, the activation memory a pass of the old
 * default of 8 records could reach. Short texts fill a pass of 32 (the serving default; faster per
 * text under load, docs/encoder.md "Batching across requests"); long windows still go 8 at a time.
 */
export const MAX_BATCH_TOKENS = 8 * 512;

/**
 * Splits records sorted by length (ascending) into batches of at most `batchSize` whose padded size
 * (rows × longest) stays within `MAX_PADDING` × their real tokens and within `MAX_BATCH_TOKENS`.
 * Returns positions into `lengths`.
 */
export function paddedBatches(lengths: number[], batchSize: number): number[][] {
  const out: number[][] = [];
  let cur: number[] = [];
  let real = 0;
  lengths.forEach((len, i) => {
    const padded = len * (cur.length + 1);
    if (cur.length && (cur.length >= batchSize || padded > MAX_PADDING * (real + len) || padded > MAX_BATCH_TOKENS)) {
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

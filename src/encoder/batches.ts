/** Encoder batches: rows of similar length, padding bounded. */

/**
 * Padded tokens a batch may cost over its real tokens. Every encoder row is padded to the longest
 * in its batch, and the encoder's cost is linear in padded tokens at these lengths: one batch of 32
 * tweets (49 tokens on average, 121 at most) computed 2.5× the tokens it needed, which is why
 * texts/s fell as the batch grew.
 */
export const MAX_PADDING = 1.2;

/**
 * Padded tokens per batch: two full 512-token windows. onnxruntime-node runs a pass synchronously on
 * the event loop (its `run` is a native call inside a setImmediate), so the pass is the longest stretch
 * one request can hold every other request of the process up for: a long text's windows at 8 × 512
 * held it ~1.1 s per pass on this 2-core box, at 2 × 512 ~0.2 s — about a short-text pass — and the
 * long text itself finished sooner (2.1 vs 2.5 s for 31 windows; bench numbers in docs/experiments/encoder.md
 * "Hostile texts"). Short texts still fill a pass of 32 (32 × 32 tokens fit).
 */
export const MAX_BATCH_TOKENS = 2 * 512;

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

/**
 * The pooled classifier (docs/reference/encoder.md "Pooled classifier"): a fine-tuned model's
 * `onnx/pooled_classifier.onnx` reads the encoder's states of the text alone (tokenizer.json's own
 * special tokens, truncated to `max_tokens`), mean-pools them and scores its trained label vocabulary.
 * It answers a classification task whose labels are all in that vocabulary; the GLiNER2 `[L]` route
 * answers the rest.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
// Type-only: the native package loads on first use, so Lambda bundles never carry it.
import type { Tokenizer } from 'tokenizers';
import { z } from 'zod';
import { paddedBatches } from './batches';
import { decodeClassification, softmax } from './classification';
import { sigmoid } from './decode';
import { encodeRows } from './heads';
import type { ClassificationSpec } from './schema';
import type { SessionSet } from './sessions';
import type { FragmentConfig, LabelScore } from './types';

export const POOLED_ONNX = 'onnx/pooled_classifier.onnx';
export const POOLED_JSON = 'onnx/pooled_classifier.json';

const PooledMeta = z.object({
  format: z.literal(1),
  labels: z
    .array(z.string().min(1))
    .min(1)
    .refine((ls) => new Set(ls).size === ls.length, 'labels must be unique'),
  multi_label: z.boolean(),
  pooling: z.literal('mean'),
  max_tokens: z.number().int().min(2),
  trained_rows: z.number().int().min(0),
  route_metrics: z.record(z.string(), z.unknown()).optional(),
});
export type PooledMeta = z.infer<typeof PooledMeta>;

/**
 * The fragment's metadata when the model directory has it (both files, or neither); a bad file fails
 * the load naming it and its first wrong field.
 */
export function readPooledMeta(dir: string, maxTokens: number): PooledMeta | undefined {
  const hasOnnx = existsSync(join(dir, POOLED_ONNX));
  const hasJson = existsSync(join(dir, POOLED_JSON));
  if (!hasOnnx && !hasJson) return undefined;
  if (!hasOnnx || !hasJson)
    throw new Error(
      `encoder model at ${dir} has ${hasOnnx ? POOLED_ONNX : POOLED_JSON} without ${hasOnnx ? POOLED_JSON : POOLED_ONNX}`,
    );
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(join(dir, POOLED_JSON), 'utf8'));
  } catch (err) {
    throw new Error(`encoder model at ${dir}: ${POOLED_JSON} is not JSON (${(err as Error).message})`);
  }
  const parsed = PooledMeta.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`encoder model at ${dir}: ${POOLED_JSON} ${issue.path.join('.') || '(root)'}: ${issue.message}`);
  }
  if (parsed.data.max_tokens > maxTokens)
    throw new Error(
      `encoder model at ${dir}: ${POOLED_JSON} max_tokens ${parsed.data.max_tokens} exceeds the encoder's ${maxTokens} tokens`,
    );
  return parsed.data;
}

export class PooledClassifier {
  private readonly index: Map<string, number>;
  constructor(
    readonly meta: PooledMeta,
    private readonly tokenizer: Tokenizer,
  ) {
    this.index = new Map(meta.labels.map((l, i) => [l, i]));
  }

  /** The contract's rule: the pooled route answers a task when every label it asks for was trained. */
  covers(c: ClassificationSpec): boolean {
    return c.labels.every((l) => this.index.has(l));
  }

  /**
   * Token ids of each text as the trainer tokenized it: tokenizer.json's post-processor adds its special
   * tokens, and a text over `max_tokens` loses its content's tail (the specials stay, as with the
   * tokenizer's own truncation).
   */
  async tokenize(texts: string[]): Promise<number[][]> {
    const enc = await this.tokenizer.encodeBatch(texts, { addSpecialTokens: true });
    return enc.map((e) => {
      const ids = e.getIds();
      if (ids.length <= this.meta.max_tokens) return ids;
      const special = e.getSpecialTokensMask();
      let head = 0;
      while (head < special.length && special[head] === 1) head++;
      let tail = 0;
      while (tail < special.length - head && special[special.length - 1 - tail] === 1) tail++;
      const keep = Math.max(0, this.meta.max_tokens - head - tail);
      return [...ids.slice(0, head + keep), ...ids.slice(ids.length - tail)];
    });
  }

  /** Logits over the whole vocabulary per text (batched and padded as the encoder's other passes), and each text's tokens. */
  async logits(
    sessions: SessionSet,
    config: FragmentConfig,
    texts: string[],
    batchSize: number,
  ): Promise<{ logits: Float32Array[]; tokens: number[] }> {
    const rows = await this.tokenize(texts);
    const n = this.meta.labels.length;
    const order = rows.map((_, i) => i).sort((a, b) => rows[a]!.length - rows[b]!.length || a - b);
    const out = new Array<Float32Array>(texts.length);
    for (const idx of paddedBatches(
      order.map((i) => rows[i]!.length),
      batchSize,
    )) {
      const ids = idx.map((j) => order[j]!);
      const { hidden, mask, S } = await encodeRows(
        sessions,
        config,
        ids.map((i) => rows[i]!),
      );
      const res = await sessions.run('pooledClassifier', {
        hidden_states: { type: 'float32', data: hidden, dims: [ids.length, S, config.hidden_size] },
        attention_mask: { type: 'int64', data: mask, dims: [ids.length, S] },
      });
      const lg = res.logits!;
      if (lg.dims[1] !== n)
        throw new Error(`pooled_classifier.onnx returned ${lg.dims[1]} logits per text; its json names ${n} labels`);
      ids.forEach((i, j) => {
        out[i] = lg.data.slice(j * n, (j + 1) * n);
      });
    }
    return { logits: out, tokens: rows.map((r) => r.length) };
  }

  /**
   * One task's answer from a text's vocabulary logits, over the asked labels only: softmax (single-label,
   * or a multi-label request to a softmax-trained head) or per-label sigmoid (a head trained multi-label),
   * then the GLiNER2 route's decoding (`top_k`, threshold).
   */
  decode(c: ClassificationSpec, vocabLogits: Float32Array, threshold: number): LabelScore[] {
    const lg = Float32Array.from(c.labels, (l) => vocabLogits[this.index.get(l)!]!);
    const probs = c.multiLabel && this.meta.multi_label ? Array.from(lg, (x) => sigmoid(x)) : softmax(lg);
    return decodeClassification(c, lg, threshold, probs);
  }
}

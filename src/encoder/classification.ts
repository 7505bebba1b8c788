/** Classification decoding from the classifier head's logits (gliner2 semantics, Sift's multi-label rule). */
import { sigmoid } from './decode';
import type { ClassificationSpec } from './schema';
import type { LabelScore, RawLabelScore } from './types';

export function stableSortDesc<T extends LabelScore>(xs: T[]): T[] {
  return xs
    .map((x, i) => ({ x, i }))
    .sort((a, b) => b.x.score - a.x.score || a.i - b.i)
    .map((y) => y.x);
}

/** Per-label probabilities: sigmoid (multi-label) or softmax over the task's labels (single-label). */
export function classProbs(c: ClassificationSpec, lg: Float32Array): number[] {
  return c.multiLabel ? Array.from(lg, (x) => sigmoid(x)) : softmax(lg);
}

export function softmax(lg: Float32Array): number[] {
  const mx = Math.max(...lg);
  const ex = Array.from(lg, (x) => Math.exp(x - mx));
  const z = ex.reduce((a, b) => a + b, 0);
  return ex.map((e) => e / z);
}

/**
 * gliner2 classification decoding from the classifier's logits (one per label, in `c.labels` order);
 * `probs` replaces `classProbs` where another head sets its own (the pooled classifier's softmax over a multi-label request).
 */
export function decodeClassification(
  c: ClassificationSpec,
  lg: Float32Array,
  threshold: number,
  probs: number[] = classProbs(c, lg),
): LabelScore[] {
  let argmax = 0;
  probs.forEach((p, j) => {
    if (p > probs[argmax]!) argmax = j;
  });
  let chosen: LabelScore[];
  if (c.multiLabel) {
    const thr = c.threshold ?? threshold;
    const per = c.labelThresholds ?? {};
    const cut = (label: string) => (Object.hasOwn(per, label) ? per[label]! : thr);
    // docs/reference/decisions.md#multi-label-threshold: every label above the threshold, and so none when none reaches it (gliner2 falls back to
    // the top label; Sift does not — a multi-label answer never contains a label below its threshold).
    chosen = stableSortDesc(
      c.labels.map((label, j) => ({ label, score: probs[j]! })).filter((x) => x.score >= cut(x.label)),
    );
    if (c.topK !== undefined) chosen = chosen.slice(0, c.topK);
  } else {
    chosen = [{ label: c.labels[argmax]!, score: probs[argmax]! }];
    if (c.topK !== undefined && c.topK > 1) {
      const rest = stableSortDesc(
        c.labels.map((label, j) => ({ label, score: probs[j]! })).filter((_, j) => j !== argmax),
      );
      chosen = [...chosen, ...rest].slice(0, c.topK);
    }
  }
  return chosen;
}

/** A classification task's answer from its logits; `raw`: every label sorted by score with its logit (label-group merging). */
export function classificationAnswer(
  c: ClassificationSpec,
  lg: Float32Array,
  threshold: number,
  raw: boolean,
): LabelScore[] | RawLabelScore[] {
  if (!raw) return decodeClassification(c, lg, threshold);
  const probs = classProbs(c, lg);
  return stableSortDesc(c.labels.map((label, j): RawLabelScore => ({ label, score: probs[j]!, logit: lg[j]! })));
}

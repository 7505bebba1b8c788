/**
 * The ONNX heads over one batch of records: encoder → count prediction and count embedding (queries) →
 * span scores (one `span_scores.onnx` run, or `span_rep.onnx` + host dot products for older exports) and
 * classifier logits. Decoding the scores into results is extract.ts.
 */
import { sigmoid } from './decode';
import type { PromptTask } from './schema';
import type { SessionSet } from './sessions';
import type { EncodedRecord, FragmentConfig } from './types';

export type Scorer = 'span_scores' | 'span_rep';

export interface SpanTask {
  t: PromptTask;
  /** Index in the prompt's task list. */
  i: number;
}

/** What the heads computed for one batch; indices are positions in the batch. */
export interface BatchScores {
  spanTasks: SpanTask[];
  clsTasks: SpanTask[];
  /** Instance count per record and span task (count head argmax). */
  counts: number[][];
  /** Probabilities [L, W] (prefix rows, then text rows) of record `bi`, span task `k`, instance `c`, field `m`. */
  scoresFor(bi: number, k: number, c: number, m: number): Float32Array | Float64Array;
  /** Classifier logits per `${bi}:${task index}`, in label order. */
  clsLogits: Map<string, Float32Array>;
}

export interface HeadContext {
  sessions: SessionSet;
  config: FragmentConfig;
  scorer: Scorer;
  /** count_embed_c1.onnx is loaded (slot 0 only, for entities and C = 1). */
  hasC1: boolean;
}

/**
 * One encoder pass over token rows, right-padded to the longest: hidden states [B, S, D], the mask, and `vec`,
 * the state of row `bi`'s token `pos`.
 */
export async function encodeRows(
  sessions: SessionSet,
  config: FragmentConfig,
  rows: number[][],
): Promise<{ hidden: Float32Array; mask: BigInt64Array; S: number; vec: (bi: number, pos: number) => Float32Array }> {
  const B = rows.length;
  const S = Math.max(...rows.map((r) => r.length));
  const ids = new BigInt64Array(B * S);
  const mask = new BigInt64Array(B * S);
  const pad = BigInt(config.pad_token_id ?? 0);
  rows.forEach((r, bi) => {
    for (let j = 0; j < S; j++) {
      ids[bi * S + j] = j < r.length ? BigInt(r[j]!) : pad;
      mask[bi * S + j] = j < r.length ? 1n : 0n;
    }
  });
  const out = await sessions.run('encoder', {
    input_ids: { type: 'int64', data: ids, dims: [B, S] },
    attention_mask: { type: 'int64', data: mask, dims: [B, S] },
  });
  const hidden = out.hidden!.data;
  const D = config.hidden_size;
  return { hidden, mask, S, vec: (bi, pos) => hidden.subarray((bi * S + pos) * D, (bi * S + pos + 1) * D) };
}

export async function scoreBatch(
  { sessions, config, scorer, hasC1 }: HeadContext,
  batch: EncodedRecord[],
  tasks: PromptTask[],
): Promise<BatchScores> {
  const D = config.hidden_size;
  const W = config.max_width!; // a span model's config has it (EncoderModel.load checks)
  const B = batch.length;
  const { vec } = await encodeRows(
    sessions,
    config,
    batch.map((r) => r.ids),
  );

  // span representations for all records in one call
  const spanTasks = tasks.map((t, i) => ({ t, i })).filter((x) => x.t.kind !== 'classifications');
  const clsTasks = tasks.map((t, i) => ({ t, i })).filter((x) => x.t.kind === 'classifications');
  let spanRep: Float32Array | undefined;
  let we: Float32Array | undefined;
  const Lmax = Math.max(...batch.map((r) => r.wordPos.length));
  if (spanTasks.length) {
    we = new Float32Array(B * Lmax * D);
    batch.forEach((r, bi) => {
      r.wordPos.forEach((p, wi) => {
        we!.set(vec(bi, p), (bi * Lmax + wi) * D);
      });
    });
    if (scorer === 'span_rep') {
      const si = new BigInt64Array(B * Lmax * W * 2);
      batch.forEach((r, bi) => {
        const L = r.wordPos.length;
        for (let i = 0; i < Lmax; i++)
          for (let w = 0; w < W; w++) {
            const o = ((bi * Lmax + i) * W + w) * 2;
            const valid = i + w < L;
            si[o] = valid ? BigInt(i) : 0n;
            si[o + 1] = valid ? BigInt(i + w) : 0n;
          }
      });
      const out = await sessions.run('spanRep', {
        word_embs: { type: 'float32', data: we, dims: [B, Lmax, D] },
        span_idx: { type: 'int64', data: si, dims: [B, Lmax * W, 2] },
      });
      spanRep = out.span_rep!.data;
    }
  }

  // count prediction for every span task of every record
  const counts: number[][] = batch.map(() => []);
  if (spanTasks.length) {
    const p = new Float32Array(B * spanTasks.length * D);
    batch.forEach((r, bi) => {
      spanTasks.forEach(({ i }, k) => {
        p.set(vec(bi, r.taskPos[i]![0]!), (bi * spanTasks.length + k) * D);
      });
    });
    const out = await sessions.run('countPred', {
      p_emb: { type: 'float32', data: p, dims: [B * spanTasks.length, D] },
    });
    const logits = out.count_logits!.data;
    const K = config.max_count!;
    batch.forEach((_, bi) => {
      spanTasks.forEach((_t, k) => {
        const row = logits.subarray((bi * spanTasks.length + k) * K, (bi * spanTasks.length + k + 1) * K);
        let best = 0;
        for (let c = 1; c < K; c++) if (row[c]! > row[best]!) best = c;
        counts[bi]![k] = best;
      });
    });
  }

  // count embeddings: CountLSTM is pointwise per field, so all fields go in one call
  const proj = new Map<string, { data: Float32Array; M: number; off: number }>();
  const jobs: Array<{ bi: number; k: number; M: number }> = [];
  batch.forEach((_, bi) => {
    spanTasks.forEach(({ t }, k) => {
      if (counts[bi]![k]! > 0) jobs.push({ bi, k, M: t.fields.length });
    });
  });
  const fieldVec = (bi: number, k: number) => {
    const pos = batch[bi]!.taskPos[spanTasks[k]!.i]!.slice(1);
    return pos.map((p) => vec(bi, p));
  };
  const runCountEmbed = async (group: typeof jobs, oneSlot: boolean) => {
    if (!group.length) return;
    const total = group.reduce((n, j) => n + j.M, 0);
    const f = new Float32Array(total * D);
    let o = 0;
    for (const j of group) for (const v of fieldVec(j.bi, j.k)) f.set(v, o++ * D);
    const out = await sessions.run(oneSlot ? 'countEmbedC1' : 'countEmbed', {
      field_embs: { type: 'float32', data: f, dims: [total, D] },
    });
    const data = out.struct_proj!.data; // [20, total, D]
    let off = 0;
    for (const j of group) {
      proj.set(`${j.bi}:${j.k}`, { data, M: total, off });
      off += j.M;
    }
  };
  if (jobs.length) {
    // slots are causal, so the first slot alone equals slot 0 of the 20 unrolled ones
    const one = (j: (typeof jobs)[number]) =>
      hasC1 && (spanTasks[j.k]!.t.kind === 'entities' || counts[j.bi]![j.k]! === 1);
    if (config.counting_layer === 'count_lstm') {
      await runCountEmbed(jobs.filter(one), true);
      await runCountEmbed(
        jobs.filter((j) => !one(j)),
        false,
      );
    } else for (const j of jobs) await runCountEmbed([j], one(j));
  }

  // span_scores: every needed query (task, instance slot, field) of every record in one run → [B, Qmax, Lmax, W]
  const qIndex = new Map<string, number>();
  let scores: Float32Array | undefined;
  let Qmax = 0;
  if (scorer === 'span_scores' && jobs.length) {
    const perRecord = new Array<number>(B).fill(0);
    const qs: Array<{ bi: number; q: number; v: Float32Array }> = [];
    for (const j of jobs) {
      const pj = proj.get(`${j.bi}:${j.k}`)!;
      const slots = spanTasks[j.k]!.t.kind === 'entities' ? 1 : counts[j.bi]![j.k]!;
      for (let c = 0; c < slots; c++)
        for (let m = 0; m < j.M; m++) {
          const q = perRecord[j.bi]!++;
          qIndex.set(`${j.bi}:${j.k}:${c}:${m}`, q);
          qs.push({ bi: j.bi, q, v: pj.data.subarray((c * pj.M + pj.off + m) * D, (c * pj.M + pj.off + m + 1) * D) });
        }
    }
    Qmax = Math.max(...perRecord);
    const x = new Float32Array(B * Qmax * D);
    for (const { bi, q, v } of qs) x.set(v, (bi * Qmax + q) * D);
    const out = await sessions.run('spanScores', {
      word_embs: { type: 'float32', data: we!, dims: [B, Lmax, D] },
      queries: { type: 'float32', data: x, dims: [B, Qmax, D] },
    });
    scores = out.scores!.data;
  }

  const clsLogits = await classifierLogits(sessions, batch, clsTasks, vec, D);

  const scoresFor = (bi: number, k: number, c: number, m: number): Float32Array | Float64Array => {
    if (scores) {
      const q = qIndex.get(`${bi}:${k}:${c}:${m}`)!;
      return scores.subarray((bi * Qmax + q) * Lmax * W, (bi * Qmax + q + 1) * Lmax * W);
    }
    const L = batch[bi]!.wordPos.length;
    const pj = proj.get(`${bi}:${k}`)!;
    const q = pj.data.subarray((c * pj.M + pj.off + m) * D, (c * pj.M + pj.off + m + 1) * D);
    const out = new Float64Array(L * W).fill(Number.NaN);
    for (let i = 0; i < L; i++)
      for (let w = 0; w < W && i + w < L; w++) {
        const base = ((bi * Lmax + i) * W + w) * D;
        let s = 0;
        for (let d = 0; d < D; d++) s += spanRep![base + d]! * q[d]!;
        out[i * W + w] = sigmoid(s);
      }
    return out;
  };
  return { spanTasks, clsTasks, counts, scoresFor, clsLogits };
}

/** Classifier logits of every classification task of every record (`${record}:${task index}` → one per label, in label order). */
export async function classifierLogits(
  sessions: SessionSet,
  batch: EncodedRecord[],
  clsTasks: SpanTask[],
  vec: (bi: number, pos: number) => Float32Array,
  D: number,
): Promise<Map<string, Float32Array>> {
  const clsLogits = new Map<string, Float32Array>();
  if (!clsTasks.length) return clsLogits;
  const all: Float32Array[] = [];
  const keys: Array<{ key: string; n: number }> = [];
  batch.forEach((r, bi) => {
    clsTasks.forEach(({ i }) => {
      const pos = r.taskPos[i]!.slice(1);
      for (const p of pos) all.push(vec(bi, p));
      keys.push({ key: `${bi}:${i}`, n: pos.length });
    });
  });
  if (!all.length) return clsLogits;
  const x = new Float32Array(all.length * D);
  all.forEach((v, j) => {
    x.set(v, j * D);
  });
  const out = await sessions.run('classifier', { label_embs: { type: 'float32', data: x, dims: [all.length, D] } });
  const lg = out.logits!.data;
  let o = 0;
  for (const { key, n } of keys) {
    clsLogits.set(key, lg.slice(o, o + n));
    o += n;
  }
  return clsLogits;
}

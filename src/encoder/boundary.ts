/**
 * The GLiNER2 *boundary* architecture (gliner2 2.1.0 `models/boundary`, the GLiNER2.5 family; issue #32,
 * docs/experiments/boundary.md): the prompt, the encoder and the classifier are the span model's, but spans
 * come from `boundary_candidates.onnx` — per extractive query (each `[E]`/`[C]`/`[R]` marker), up to
 * `candidate_budget` half-open word spans `[start, end)` with a pair logit, proposed from start/end boundary
 * scores (no span-width limit) — decoded as the library's `BoundaryExtractor` does: probability
 * `σ(logit / pair_temperature)` at or above the threshold, abstention per entity label, the config's overlap
 * policy per label (`flat` → the max-total-score non-overlapping set), spans touching the choice prefix dropped,
 * one instance per structure.
 *
 * Choice fields are scored as the library does, each option present in the prefix as an explicit one-word span
 * for the field's query (`boundary_explicit.onnx`). Relations (relations.py, `_decode_relations`): per relation,
 * the best head and tail candidates of its `[R]` queries, their capped cross product, each pair scored by the
 * relation MLP (`relation_mlp.onnx`) over features gathered here, then the library's edge de-duplication.
 */
import { classificationAnswer } from './classification';
import { choiceIndex, resolveDisallow, sigmoid } from './decode';
import { classifierLogits, encodeRows } from './heads';
import type { PromptTask } from './schema';
import type { SessionSet } from './sessions';
import { CodePoints, pyStrip } from './text';
import type { EncodedRecord, EncoderResult, FieldValue, FragmentConfig, Span } from './types';

/** One valid candidate of one query: half-open word span over prefix + text words, and its probability. */
interface Candidate {
  start: number;
  end: number;
  score: number;
  /** σ(pair logit) in float32, without the pair temperature: what relation proposals rank by. */
  raw: number;
  /** Its slot among the query's candidates (the library's tie-break after start and end). */
  slot: number;
}

/** One scored relation pair (word spans over prefix + text words, argument probabilities, relation probability). */
interface RelationPair {
  headStart: number;
  headEnd: number;
  tailStart: number;
  tailEnd: number;
  headScore: number;
  tailScore: number;
  score: number;
}

/** A choice field's options found among the prefix words, each with its probability as that field's answer. */
interface ChoiceScore {
  text: string;
  score: number;
}

export interface BoundaryScores {
  /** Valid candidates at or above no threshold yet, per record and query (prompt order of the extractive markers). */
  candidates: Candidate[][][];
  /** Abstention probability σ(null logit) per record and query. */
  abstain: number[][];
  /** Query index of (prompt task index, field index). */
  query: Map<string, number>;
  /** Per `${record}:${task index}:${field index}` of a choice field: its options present in the prefix, scored. */
  choices: Map<string, ChoiceScore[]>;
  /** Per `${record}:${task index}` of a relation task: its proposed pairs, scored (none without a relation scorer). */
  relations: Map<string, RelationPair[]>;
  clsLogits: Map<string, Float32Array>;
}

/** A choice field's distinct options that are among the prefix words, with their word index, in schema order. */
function presentChoices(prefix: string[], choices: string[]): Array<{ text: string; index: number }> {
  const out: Array<{ text: string; index: number }> = [];
  for (const text of new Set(choices)) {
    const index = choiceIndex(prefix, text);
    if (index >= 0) out.push({ text, index });
  }
  return out;
}

/**
 * Every choice field of every record scored in one `boundary_explicit.onnx` run: each option present in the
 * prefix as the one-word span at its prefix word, for that field's query (`_decode_choice_field`).
 */
async function scoreChoices(
  sessions: SessionSet,
  batch: EncodedRecord[],
  tasks: PromptTask[],
  words: { data: Float32Array; mask: BigInt64Array; L: number },
  queryVec: (bi: number, i: number, m: number) => Float32Array,
  D: number,
  T: number,
): Promise<Map<string, ChoiceScore[]>> {
  const out = new Map<string, ChoiceScore[]>();
  const fields: Array<{ i: number; m: number; choices: string[] }> = [];
  tasks.forEach((t, i) => {
    t.structure?.fields.forEach((f, m) => {
      if (t.kind === 'json_structures' && f.choices?.length) fields.push({ i, m, choices: f.choices });
    });
  });
  const present = batch.map((r) => fields.map((f) => presentChoices(r.prefix, f.choices)));
  const K = Math.max(0, ...present.flat().map((p) => p.length));
  const B = batch.length;
  const Q = fields.length;
  if (!K) {
    batch.forEach((_, bi) => {
      for (const f of fields) out.set(`${bi}:${f.i}:${f.m}`, []);
    });
    return out;
  }
  const queries = new Float32Array(B * Q * D);
  const spanIdx = new BigInt64Array(B * Q * K * 2);
  const spanMask = new BigInt64Array(B * Q * K);
  batch.forEach((_, bi) => {
    fields.forEach((f, q) => {
      queries.set(queryVec(bi, f.i, f.m), (bi * Q + q) * D);
      present[bi]![q]!.forEach((p, k) => {
        const o = (bi * Q + q) * K + k;
        spanIdx[o * 2] = BigInt(p.index);
        spanIdx[o * 2 + 1] = BigInt(p.index + 1);
        spanMask[o] = 1n;
      });
    });
  });
  const res = await sessions.run('boundaryExplicit', {
    word_embs: { type: 'float32', data: words.data, dims: [B, words.L, D] },
    word_mask: { type: 'int64', data: words.mask, dims: [B, words.L] },
    queries: { type: 'float32', data: queries, dims: [B, Q, D] },
    query_mask: { type: 'int64', data: new BigInt64Array(B * Q).fill(1n), dims: [B, Q] },
    span_idx: { type: 'int64', data: spanIdx, dims: [B, Q, K, 2] },
    span_mask: { type: 'int64', data: spanMask, dims: [B, Q, K] },
  });
  const logits = res.logits!.data;
  batch.forEach((_, bi) => {
    fields.forEach((f, q) => {
      out.set(
        `${bi}:${f.i}:${f.m}`,
        present[bi]![q]!.map((p, k) => ({ text: p.text, score: sigmoid(logits[(bi * Q + q) * K + k]! / T) })),
      );
    });
  });
  return out;
}

export async function scoreBoundaryBatch(
  sessions: SessionSet,
  config: FragmentConfig,
  batch: EncodedRecord[],
  tasks: PromptTask[],
): Promise<BoundaryScores> {
  const D = config.hidden_size;
  const B = batch.length;
  const { vec } = await encodeRows(
    sessions,
    config,
    batch.map((r) => r.ids),
  );
  // every record of a batch has the same prompt tasks, so the same queries in the same order
  const query = new Map<string, number>();
  tasks.forEach((t, i) => {
    if (t.kind === 'classifications') return;
    for (let m = 0; m < t.fields.length; m++) query.set(`${i}:${m}`, query.size);
  });
  const Q = query.size;
  const candidates: Candidate[][][] = batch.map(() => Array.from({ length: Q }, () => []));
  const abstain: number[][] = batch.map(() => new Array<number>(Q).fill(0));
  const T = config.pair_temperature ?? 1;
  let choices = new Map<string, ChoiceScore[]>();
  let relations = new Map<string, RelationPair[]>();
  if (Q) {
    const L = Math.max(...batch.map((r) => r.wordPos.length));
    const words = new Float32Array(B * L * D);
    const wordMask = new BigInt64Array(B * L);
    const queries = new Float32Array(B * Q * D);
    const queryMask = new BigInt64Array(B * Q).fill(1n);
    /** The state of task `i`'s `m`-th field marker in record `bi`: that field's query. */
    const queryVec = (bi: number, i: number, m: number) => vec(bi, batch[bi]!.taskPos[i]![m + 1]!);
    batch.forEach((r, bi) => {
      r.wordPos.forEach((p, wi) => {
        words.set(vec(bi, p), (bi * L + wi) * D);
        wordMask[bi * L + wi] = 1n;
      });
      tasks.forEach((t, i) => {
        if (t.kind === 'classifications') return;
        for (let m = 0; m < t.fields.length; m++)
          queries.set(queryVec(bi, i, m), (bi * Q + query.get(`${i}:${m}`)!) * D);
      });
    });
    choices = await scoreChoices(sessions, batch, tasks, { data: words, mask: wordMask, L }, queryVec, D, T);
    const out = await sessions.run('boundaryCandidates', {
      word_embs: { type: 'float32', data: words, dims: [B, L, D] },
      word_mask: { type: 'int64', data: wordMask, dims: [B, L] },
      queries: { type: 'float32', data: queries, dims: [B, Q, D] },
      query_mask: { type: 'int64', data: queryMask, dims: [B, Q] },
    });
    // onnxruntime hands int64 outputs as BigInt64Array and bool ones as Uint8Array (Output types them as floats)
    const idx = out.cand_idx!.data as unknown as BigInt64Array;
    const valid = out.cand_valid!.data as unknown as Uint8Array;
    const logits = out.pair_logits!.data;
    const nulls = out.null_logits!.data;
    const C = out.pair_logits!.dims[2]!;
    for (let bi = 0; bi < B; bi++)
      for (let q = 0; q < Q; q++) {
        abstain[bi]![q] = sigmoid(nulls[bi * Q + q]!);
        const list = candidates[bi]![q]!;
        for (let c = 0; c < C; c++) {
          const o = (bi * Q + q) * C + c;
          if (!valid[o]) continue;
          list.push({
            start: Number(idx[o * 2]!),
            end: Number(idx[o * 2 + 1]!),
            score: sigmoid(logits[o]! / T),
            raw: Math.fround(sigmoid(logits[o]!)),
            slot: c,
          });
        }
      }
    if (config.enable_relations)
      relations = await scoreRelations(sessions, config, batch, tasks, candidates, query, { words, L, queryVec }, D);
  }
  const clsTasks = tasks.map((t, i) => ({ t, i })).filter((x) => x.t.kind === 'classifications');
  const clsLogits = await classifierLogits(sessions, batch, clsTasks, vec, D);
  const scale = 1 / (config.classification_temperature ?? 1);
  if (scale !== 1) for (const lg of clsLogits.values()) for (let j = 0; j < lg.length; j++) lg[j]! *= scale;
  return { candidates, abstain, query, choices, relations, clsLogits };
}

/**
 * relations.py `TypedRelationPairGenerator` (decode path) and `SparseRelationScorer`, for every relation task of
 * every record: the top `relation_heads_per_type` candidates of the `[R]` head query and the top tails, ranked by
 * σ(logit) (float32, as torch ranks them) then start, end and slot; their cross product without same-span pairs,
 * ranked by the product then head and tail rank, cut at `relation_pair_cap`; each pair's features (the endpoint
 * word states, the relation query — the mean of its two `[R]` states, or both with `directional_relation_states` —
 * order and distance / the record's word count) through `relation_mlp.onnx`, σ(· / relation_temperature).
 * The library divides the distance by its batch's padded word count, so its scores depend on which texts share a
 * batch; this is the library at batch size 1, the same answer for a text whatever it is batched with.
 */
async function scoreRelations(
  sessions: SessionSet,
  config: FragmentConfig,
  batch: EncodedRecord[],
  tasks: PromptTask[],
  candidates: Candidate[][][],
  query: Map<string, number>,
  states: { words: Float32Array; L: number; queryVec: (bi: number, i: number, m: number) => Float32Array },
  D: number,
): Promise<Map<string, RelationPair[]>> {
  const heads = config.relation_heads_per_type ?? 32;
  const tails = config.relation_tails_per_type ?? 32;
  const cap = config.relation_pair_cap ?? 128;
  const floor = config.relation_argument_threshold ?? 0;
  const directional = config.directional_relation_states === true;
  const Dr = directional ? 2 * D : D;
  const width = 4 * D + Dr + 2;
  const top = (list: Candidate[], n: number) =>
    list
      .filter((c) => c.raw >= floor)
      .sort((a, b) => b.raw - a.raw || a.start - b.start || a.end - b.end || a.slot - b.slot)
      .slice(0, n);
  const jobs: Array<{ key: string; pairs: Array<{ h: Candidate; t: Candidate }>; bi: number; i: number }> = [];
  batch.forEach((_, bi) => {
    tasks.forEach((t, i) => {
      if (t.kind !== 'relations') return;
      const hs = top(candidates[bi]![query.get(`${i}:0`)!]!, heads);
      const ts = top(candidates[bi]![query.get(`${i}:1`)!]!, tails);
      const pairs: Array<{ h: Candidate; t: Candidate; score: number; flat: number }> = [];
      hs.forEach((h, hi) => {
        ts.forEach((tl, ti) => {
          if (h.start === tl.start && h.end === tl.end) return;
          pairs.push({ h, t: tl, score: Math.fround(h.raw * tl.raw), flat: hi * tails + ti });
        });
      });
      pairs.sort((a, b) => b.score - a.score || a.flat - b.flat);
      jobs.push({ key: `${bi}:${i}`, pairs: pairs.slice(0, cap), bi, i });
    });
  });
  const out = new Map<string, RelationPair[]>();
  const P = jobs.reduce((n, j) => n + j.pairs.length, 0);
  for (const j of jobs) out.set(j.key, []);
  if (!P) return out;
  const features = new Float32Array(P * width);
  let row = 0;
  for (const { pairs, bi, i } of jobs) {
    const L = batch[bi]!.wordPos.length;
    const word = (w: number) => states.words.subarray((bi * states.L + w) * D, (bi * states.L + w + 1) * D);
    const headQ = states.queryVec(bi, i, 0);
    const tailQ = states.queryVec(bi, i, 1);
    const rel = new Float32Array(Dr);
    if (directional) {
      rel.set(headQ, 0);
      rel.set(tailQ, D);
    } else for (let d = 0; d < D; d++) rel[d] = (headQ[d]! + tailQ[d]!) / 2;
    for (const { h, t } of pairs) {
      const o = row++ * width;
      features.set(word(h.start), o);
      features.set(word(h.end - 1), o + D);
      features.set(word(t.start), o + 2 * D);
      features.set(word(t.end - 1), o + 3 * D);
      features.set(rel, o + 4 * D);
      const delta = t.start - h.start;
      features[o + 4 * D + Dr] = Math.sign(delta);
      features[o + 4 * D + Dr + 1] = Math.abs(delta) / Math.max(L, 1);
    }
  }
  const res = await sessions.run('relationMlp', { features: { type: 'float32', data: features, dims: [P, width] } });
  const logits = res.logits!.data;
  const T = config.relation_temperature ?? 1;
  row = 0;
  for (const { key, pairs } of jobs)
    out.set(
      key,
      pairs.map(({ h, t }) => ({
        headStart: h.start,
        headEnd: h.end,
        tailStart: t.start,
        tailEnd: t.end,
        headScore: h.raw,
        tailScore: t.raw,
        score: sigmoid(logits[row++]! / T),
      })),
    );
  return out;
}

/** A relation edge in characters: its head and tail mentions and its score. */
interface Edge {
  score: number;
  head: Span;
  tail: Span;
}

/** Python's `" ".join(s.casefold().split())` for the characters that matter here (casefold ≈ lower case). */
function semanticText(s: string): string {
  return s.toLowerCase().replace(/ß/g, 'ss').trim().split(/\s+/).filter(Boolean).join(' ');
}

/**
 * gliner2 `BoundaryExtractor._deduplicate_relation_edges`: each mention replaced by the longest mention that
 * contains it (earliest on ties), the best edge per head/tail coordinates, one edge per (head text, tail text)
 * preferring the closest arguments, and edges whose argument is a strict word subset of another's (with the
 * same other argument) dropped; sorted by head start, tail start, score descending.
 */
export function deduplicateRelationEdges(edges: Edge[]): Edge[] {
  if (edges.length < 2) return edges;
  const canonical = (side: 'head' | 'tail') => {
    const mentions = new Map<string, Span>();
    for (const e of edges) mentions.set(`${e[side].start}:${e[side].end}`, e[side]);
    const out = new Map<string, Span>();
    for (const [key, m] of mentions) {
      let best: Span | undefined;
      for (const c of mentions.values())
        if (c.start <= m.start && c.end >= m.end)
          if (
            !best ||
            c.end - c.start > best.end - best.start ||
            (c.end - c.start === best.end - best.start && c.start < best.start)
          )
            best = c;
      out.set(key, best!);
    }
    return out;
  };
  const heads = canonical('head');
  const tails = canonical('tail');
  const exact = new Map<string, Edge>();
  for (const e of edges) {
    const head = heads.get(`${e.head.start}:${e.head.end}`)!;
    const tail = tails.get(`${e.tail.start}:${e.tail.end}`)!;
    const key = `${head.start}:${head.end}:${tail.start}:${tail.end}`;
    const previous = exact.get(key);
    if (!previous || e.score > previous.score) exact.set(key, { ...e, head, tail });
  }
  const rank = (e: Edge) => [
    Math.max(e.head.start - e.tail.end, e.tail.start - e.head.end, 0),
    -e.score,
    e.head.start,
    e.tail.start,
  ];
  const before = (a: number[], b: number[]) => {
    for (let k = 0; k < a.length; k++) if (a[k] !== b[k]) return a[k]! < b[k]!;
    return false;
  };
  const semantic = new Map<string, Edge>();
  for (const e of exact.values()) {
    const key = `${semanticText(e.head.text)}\u0000${semanticText(e.tail.text)}`;
    const previous = semantic.get(key);
    if (!previous || before(rank(e), rank(previous))) semantic.set(key, e);
  }
  const words = (s: string) => new Set(semanticText(s).split(' ').filter(Boolean));
  const strictSubset = (a: Set<string>, b: Set<string>) => a.size < b.size && [...a].every((w) => b.has(w));
  const same = (a: Set<string>, b: Set<string>) => a.size === b.size && [...a].every((w) => b.has(w));
  const values = [...semantic.values()].map((e) => ({ e, h: words(e.head.text), t: words(e.tail.text) }));
  const kept = values.filter(
    (x) =>
      !values.some(
        (o) => o !== x && ((strictSubset(x.h, o.h) && same(x.t, o.t)) || (strictSubset(x.t, o.t) && same(x.h, o.h))),
      ),
  );
  return kept
    .map((x) => x.e)
    .sort((a, b) => a.head.start - b.head.start || a.tail.start - b.tail.start || b.score - a.score);
}

/** gliner2's `resolve_overlaps(policy)` over half-open word spans: ranked by score desc, then start, end. */
export function resolveOverlaps<T extends { start: number; end: number; score: number }>(
  items: T[],
  policy: string,
): T[] {
  if (policy === 'disallow') return resolveDisallow(items);
  const ranked = items
    .map((item, i) => ({ item, i }))
    .sort((a, b) => b.item.score - a.item.score || a.item.start - b.item.start || a.item.end - b.item.end || a.i - b.i);
  const seen = new Set<string>();
  const distinct = ranked
    .map((r) => r.item)
    .filter((x) => !seen.has(`${x.start}:${x.end}`) && !!seen.add(`${x.start}:${x.end}`));
  const contains = (a: T, b: T) => a.start <= b.start && b.end <= a.end;
  if (policy === 'nested') {
    const kept: T[] = [];
    for (const c of distinct)
      if (!kept.some((e) => c.start < e.end && e.start < c.end && !contains(c, e) && !contains(e, c))) kept.push(c);
    return kept;
  }
  if (policy === 'longest')
    return distinct.filter(
      (c) => !distinct.some((o) => o !== c && contains(o, c) && (o.start < c.start || c.end < o.end)),
    );
  if (policy === 'allow') return distinct;
  throw new Error(`unknown overlap_policy ${policy}`);
}

/** One record's results from its batch's boundary scores (`BoundaryExtractor._extract_from_batch`'s decoding). */
export function decodeBoundaryRecord(
  r: EncodedRecord,
  bi: number,
  scores: BoundaryScores,
  tasks: PromptTask[],
  config: FragmentConfig,
  threshold: number,
  raw = false,
): EncoderResult {
  const res: EncoderResult = { classifications: {}, structures: {}, relations: {} };
  const cps = new CodePoints(r.text);
  const P = r.prefix.length;
  const policy = config.overlap_policy ?? 'disallow';
  /**
   * The half-open span `[start, end)` over prefix + text words as the text's characters (global offsets); none when
   * it touches the prefix (dropped, not clipped) or is blank once stripped — the library's rule for every head.
   */
  const mention = (start: number, end: number, score: number): Span | undefined => {
    const ts = start - P;
    const te = end - P;
    if (!(ts >= 0 && ts < te && te <= r.words.length)) return undefined;
    const text = pyStrip(cps.slice(r.starts[ts]!, r.ends[te - 1]!));
    return text ? { text, score, start: r.starts[ts]! + r.offset, end: r.ends[te - 1]! + r.offset } : undefined;
  };
  /** The resolved spans of query `q` at `thr`, best first. */
  const spans = (q: number, thr: number): Span[] =>
    resolveOverlaps(
      scores.candidates[bi]![q]!.filter((c) => c.score >= thr),
      policy,
    ).flatMap((c) => mention(c.start, c.end, c.score) ?? []);
  tasks.forEach((t, i) => {
    const q = (m: number) => scores.query.get(`${i}:${m}`)!;
    if (t.kind === 'entities') {
      const ents: Record<string, Span[]> = {};
      t.fields.forEach((name, m) => {
        const abstained =
          config.enable_abstention !== false && scores.abstain[bi]![q(m)]! > (config.abstention_threshold ?? 0.5);
        const thr = t.entities?.find((e) => e.name === name)?.threshold ?? threshold;
        ents[name] = abstained ? [] : spans(q(m), thr);
      });
      res.entities = ents;
    } else if (t.kind === 'json_structures') {
      const obj: Record<string, FieldValue> = {};
      t.structure!.fields.forEach((f, m) => {
        const thr = f.threshold ?? threshold;
        if (f.choices?.length) {
          const scored = scores.choices.get(`${bi}:${i}:${m}`) ?? [];
          if (f.dtype === 'list') obj[f.name] = scored.filter((c) => c.score >= thr);
          else {
            // the first best option (torch's argmax), if it reaches the threshold
            const best = scored.reduce<ChoiceScore | undefined>((b, c) => (!b || c.score > b.score ? c : b), undefined);
            obj[f.name] = best && best.score >= thr ? best : null;
          }
          return;
        }
        const found = spans(q(m), thr);
        obj[f.name] = f.dtype === 'list' ? found : (found[0] ?? null);
      });
      const any = Object.values(obj).some((v) => v !== null && !(Array.isArray(v) && v.length === 0));
      res.structures[t.name] = any ? [obj] : [];
    } else if (t.kind === 'relations') {
      const thr = t.relation!.threshold ?? threshold;
      const edges: Edge[] = [];
      for (const p of scores.relations.get(`${bi}:${i}`) ?? []) {
        if (p.score < thr) continue;
        const head = mention(p.headStart, p.headEnd, p.headScore);
        const tail = mention(p.tailStart, p.tailEnd, p.tailScore);
        if (head && tail) edges.push({ score: p.score, head, tail });
      }
      res.relations[t.name] = deduplicateRelationEdges(edges).map(({ head, tail }) => ({ head, tail }));
    } else if (t.kind === 'classifications') {
      const c = t.classification!;
      const lg = scores.clsLogits.get(`${bi}:${i}`) ?? new Float32Array(0);
      if (!lg.length) return;
      res.classifications[t.name] = classificationAnswer(c, lg, threshold, raw);
    }
  });
  return res;
}

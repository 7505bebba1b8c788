/**
 * One record's results from its batch's head scores (gliner2 decoding): entity spans per type, structure
 * instances (str/list fields, choices on the prefix), relation instances, classifications.
 */
import { classificationAnswer } from './classification';
import { choiceIndex, finalizeSpans, type Span } from './decode';
import type { BatchScores } from './heads';
import { CodePoints, pyStrip } from './text';
import type { ChoiceValue, EncodedRecord, EncoderResult, FieldValue, RelationInstance } from './types';

/** `raw`: classification tasks return every label (sorted by score) with its logit, for label-group merging. */
export function decodeRecord(
  r: EncodedRecord,
  bi: number,
  scores: BatchScores,
  W: number,
  threshold: number,
  raw = false,
): EncoderResult {
  const { spanTasks, clsTasks, counts, clsLogits } = scores;
  const res: EncoderResult = { classifications: {}, structures: {}, relations: {} };
  const cps = new CodePoints(r.text);
  const textLen = r.words.length;
  const P = r.prefix.length;
  const scoresFor = (k: number, c: number, m: number) => scores.scoresFor(bi, k, c, m);
  const findSpans = (probs: Float32Array | Float64Array, thr: number): Span[] => {
    const spans: Span[] = [];
    for (let j = 0; j < textLen; j++)
      for (let w = 0; w < W && j + w < textLen; w++) {
        const p = probs[(P + j) * W + w]!;
        if (!(p >= thr)) continue;
        const cs = r.starts[j]!;
        const ce = r.ends[j + w]!;
        const text = pyStrip(cps.slice(cs, ce));
        if (text) spans.push({ text, score: p, start: cs + r.offset, end: ce + r.offset });
      }
    return spans;
  };
  spanTasks.forEach(({ t }, k) => {
    const C = counts[bi]![k]!;
    if (t.kind === 'entities') {
      const ents: Record<string, Span[]> = {};
      if (C > 0) {
        t.fields.forEach((name, m) => {
          const thr = t.entities?.find((e) => e.name === name)?.threshold ?? threshold;
          ents[name] = finalizeSpans(findSpans(scoresFor(k, 0, m), thr));
        });
      }
      res.entities = ents;
    } else if (t.kind === 'relations') {
      const thr = t.relation!.threshold ?? threshold;
      const inst: RelationInstance[] = [];
      for (let c = 0; c < C; c++) {
        const head = finalizeSpans(findSpans(scoresFor(k, c, 0), thr))[0];
        const tail = finalizeSpans(findSpans(scoresFor(k, c, 1), thr))[0];
        if (head && tail) inst.push({ head, tail });
      }
      res.relations[t.name] = inst;
    } else {
      const s = t.structure!;
      const inst: Array<Record<string, FieldValue>> = [];
      for (let c = 0; c < C; c++) {
        const obj: Record<string, FieldValue> = {};
        s.fields.forEach((f, m) => {
          const thr = f.threshold ?? threshold;
          const probs = scoresFor(k, c, m);
          if (f.choices?.length) {
            if (f.dtype === 'list') {
              const sel: ChoiceValue[] = [];
              const seen = new Set<string>();
              for (const ch of f.choices) {
                if (seen.has(ch)) continue;
                const idx = choiceIndex(r.prefix, ch);
                if (idx >= 0 && idx < P) {
                  const sc = probs[idx * W]!;
                  if (sc >= thr) {
                    sel.push({ text: ch, score: sc });
                    seen.add(ch);
                  }
                }
              }
              obj[f.name] = sel;
            } else {
              let best: string | undefined;
              let bestScore = -1;
              for (const ch of f.choices) {
                const idx = choiceIndex(r.prefix, ch);
                if (idx >= 0 && idx < P) {
                  const sc = probs[idx * W]!;
                  if (sc > bestScore) {
                    bestScore = sc;
                    best = ch;
                  }
                }
              }
              obj[f.name] = best && bestScore >= thr ? { text: best, score: bestScore } : null;
            }
          } else {
            const spans = finalizeSpans(findSpans(probs, thr), f.dtype);
            obj[f.name] = f.dtype === 'list' ? spans : (spans[0] ?? null);
          }
        });
        if (Object.values(obj).some((v) => v !== null && !(Array.isArray(v) && v.length === 0))) inst.push(obj);
      }
      res.structures[t.name] = inst;
    }
  });
  for (const { t, i } of clsTasks) {
    const c = t.classification!;
    const lg = clsLogits.get(`${bi}:${i}`) ?? new Float32Array(0);
    if (!lg.length) continue;
    res.classifications[t.name] = classificationAnswer(c, lg, threshold, raw);
  }
  return res;
}

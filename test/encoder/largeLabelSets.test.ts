/**
 * Large label sets on the built mini model (sift/gliner2-mini-v1, 512 positions): a schema whose prompt
 * does not fit is run in label groups and merged (engine.ts `labelGroups` / `mergeGroups`).
 * Needs the set-up's mini model (~/.cache/sift/models or SIFT_MODELS_DIR); fails if absent.
 */
import { EncoderInputError, type EncoderResult } from '../../src/encoder/engine';
import type { EncoderSchema } from '../../src/encoder/schema';
import { useMiniModel } from '../helpers/miniModel';

const miniModel = useMiniModel();

const A = [
  'garden',
  'piano',
  'poetry',
  'knitting',
  'volcano',
  'origami',
  'pottery',
  'chess',
  'astronomy',
  'fossil',
  'ballet',
  'sculpture',
];
const B = [
  'lesson schedule',
  'history archive',
  'supply catalogue',
  'contest result',
  'festival program',
  'repair manual',
  'museum exhibit',
  'society member',
  'magazine issue',
  'workshop venue',
];
/** 120 distractor names of 4-5 tokens each. */
const DISTRACT = A.flatMap((a) => B.map((b) => `${a} ${b} list`));
const TYPES = [...DISTRACT.slice(0, 60), 'person', ...DISTRACT.slice(60, 100), 'city', ...DISTRACT.slice(100, 118)];
const schema = (s: Partial<EncoderSchema>): EncoderSchema => ({
  entities: [],
  classifications: [],
  structures: [],
  relations: [],
  ...s,
});
const cp = (s: string, start: number, end: number) => Array.from(s).slice(start, end).join('');
const flat = (r: EncoderResult) =>
  Object.entries(r.entities ?? {}).flatMap(([label, spans]) => spans.map((s) => ({ label, ...s })));

describe('schemas longer than the encoder (label groups)', () => {
  // The assertions are about the mechanism, never about which spans the model finds: the mini model's
  // weights depend on the CPU that built them (the build fixes threads and seeds, not the instruction
  // set): an AVX2-only AMD EPYC build scored 'city:Paris' under 0.5 where earlier machines' builds found it.
  it('120 entity types: runs in groups, the merged answer is the union of its groups run alone, nothing outside the label set', async () => {
    const s = schema({ entities: TYPES.map((name) => ({ name })) });
    expect(TYPES).toHaveLength(120);
    expect(await miniModel().promptTokens(s)).toBeGreaterThan(512);
    const texts = [
      'Tim Cook met Satya Nadella in Paris last week.',
      'Angela Merkel flew from Berlin to Rome on Monday.',
    ];
    // a low threshold, so the union compared below is never empty whichever build scores the spans
    const threshold = 0.1;
    const out = await miniModel().infer(texts, s, { threshold });
    expect(out.groups).toEqual([2, 2]);
    expect(Math.min(...out.results.map((r) => flat(r).length))).toBeGreaterThan(0);
    out.results.forEach((r, i) => {
      for (const e of flat(r)) {
        expect(TYPES).toContain(e.label);
        expect(e.score).toBeGreaterThanOrEqual(threshold);
        expect(e.score).toBeLessThanOrEqual(1);
        expect(cp(texts[i]!, e.start, e.end)).toBe(e.text);
      }
    });
    // what the groups found, and only that: the merged answer is the union of each group run alone
    // (which spans a model scores above 0.5 is the model's quality, not the mechanism's)
    const groups = await miniModel().labelGroups(s);
    expect(groups).toHaveLength(2);
    const alone = await Promise.all(groups.map((g) => miniModel().infer(texts, g, { threshold })));
    texts.forEach((_, i) => {
      const union = alone
        .flatMap((run) => flat(run.results[i]!))
        .map((e) => `${e.label}:${e.text}:${e.start}`)
        .sort();
      expect(
        flat(out.results[i]!)
          .map((e) => `${e.label}:${e.text}:${e.start}`)
          .sort(),
      ).toEqual(union);
    });
  });

  it('a schema that fits is untouched: forcing a budget it fits in gives the direct result bit for bit', async () => {
    const s = schema({
      entities: TYPES.slice(55, 75).map((name) => ({ name })),
      classifications: [{ task: 'sentiment', labels: ['positive', 'negative', 'neutral'], multiLabel: false }],
    });
    const texts = ['Tim Cook loves Paris, it is wonderful.'];
    const direct = await miniModel().infer(texts, s);
    const same = await miniModel().infer(texts, s, { labelGroupTokens: 512 });
    expect(direct.groups).toEqual([1]);
    expect(same).toEqual(direct);
  });

  it('forced groups: entities equal the per-group runs, one softmax over every group’s logits, multi-label per label', async () => {
    const labels = ['positive', ...DISTRACT.slice(0, 14), 'negative', ...DISTRACT.slice(14, 28), 'neutral'];
    const s = schema({
      entities: [...TYPES.slice(55, 75), 'city'].map((name) => ({ name })),
      classifications: [
        { task: 'sentiment', labels, multiLabel: false, topK: 2 },
        { task: 'aspects', labels: [...labels].reverse(), multiLabel: true, threshold: 0.02 },
      ],
    });
    const texts = ['Tim Cook absolutely loves Paris, the food was wonderful and he is very happy.'];
    const budget = 80;
    const groups = await miniModel().labelGroups(s, budget);
    expect(groups.length).toBeGreaterThan(3);
    expect(groups.filter((g) => g.classifications.some((c) => c.task === 'sentiment')).length).toBeGreaterThan(1);
    expect(groups.filter((g) => g.entities.length).length).toBeGreaterThan(1);
    for (const g of groups) expect(await miniModel().promptTokens(g)).toBeLessThanOrEqual(budget);
    const got = await miniModel().infer(texts, s, { labelGroupTokens: budget });
    expect(got.groups).toEqual([groups.length]);
    const r = got.results[0]!;

    // per-group reference runs: the same prompts, every label scored with a sigmoid
    const wantEntities: Record<string, unknown> = {};
    const logit = new Map<string, number>();
    for (const g of groups) {
      const ref = (
        await miniModel().infer(texts, {
          ...g,
          classifications: g.classifications.map((c) => ({ ...c, multiLabel: true, threshold: 0, topK: undefined })),
        })
      ).results[0]!;
      Object.assign(wantEntities, ref.entities ?? {});
      for (const c of g.classifications)
        for (const x of ref.classifications[c.task]!)
          logit.set(`${c.task}|${x.label}`, Math.log(x.score / (1 - x.score)));
    }
    expect(r.entities).toEqual(wantEntities);

    // single-label: softmax over all 31 logits, top_k 2
    const xs = labels.map((l) => logit.get(`sentiment|${l}`)!);
    const z = xs.reduce((a, x) => a + Math.exp(x), 0);
    const ranked = labels.map((label, j) => ({ label, score: Math.exp(xs[j]!) / z })).sort((a, b) => b.score - a.score);
    expect(r.classifications.sentiment!.map((x) => x.label)).toEqual(ranked.slice(0, 2).map((x) => x.label));
    r.classifications.sentiment!.forEach((x, k) => {
      expect(x.score).toBeCloseTo(ranked[k]!.score, 5);
    });
    expect(ranked.reduce((a, x) => a + x.score, 0)).toBeCloseTo(1, 6);

    // multi-label: each label's own sigmoid against the head's threshold
    const aspects = r.classifications.aspects!;
    const want = [...labels].reverse().filter((l) => 1 / (1 + Math.exp(-logit.get(`aspects|${l}`)!)) >= 0.02);
    expect(aspects.map((x) => x.label).sort()).toEqual(want.sort());
    for (const x of aspects) {
      expect(x.score).toBeGreaterThan(0);
      expect(x.score).toBeLessThanOrEqual(1);
    }
  });

  it('200 labels on a long text: groups × windows, offsets into the original, the union of each group run alone', async () => {
    const names = Array.from({ length: 198 }, (_, i) => `${DISTRACT[i % 120]} ${i}`);
    const s = schema({ entities: [{ name: 'person' }, ...names.map((name) => ({ name })), { name: 'city' }] });
    const text = Array.from(
      { length: 30 },
      (_, i) => `Report ${i}: Tim Cook visited Paris and met several partners there.`,
    ).join(' ');
    const threshold = 0.1; // as above: a union that is never empty
    const out = await miniModel().infer([text], s, { threshold });
    expect(out.groups[0]).toBeGreaterThan(2);
    expect(out.chunks[0]).toBeGreaterThan(1);
    const ents = flat(out.results[0]!);
    expect(ents.length).toBeGreaterThan(0);
    for (const e of ents) {
      expect(cp(text, e.start, e.end)).toBe(e.text);
      expect(['person', 'city', ...names]).toContain(e.label);
    }
    // each group alone is windowed the same way; the merged answer is exactly their union
    const groups = await miniModel().labelGroups(s);
    expect(groups).toHaveLength(out.groups[0]!);
    const alone = await Promise.all(groups.map((g) => miniModel().infer([text], g, { threshold })));
    const key = (e: { label: string; text: string; start: number }) => `${e.label}:${e.text}:${e.start}`;
    expect(ents.map(key).sort()).toEqual(
      alone
        .flatMap((run) => flat(run.results[0]!))
        .map(key)
        .sort(),
    );
  }, 120_000);

  it('a single label that cannot fit even alone is an input error naming it', async () => {
    const huge = '!'.repeat(100);
    const s = schema({ entities: [{ name: 'person' }, { name: huge, description: '?'.repeat(500) }] });
    await expect(miniModel().infer(['hello'], s)).rejects.toThrow(EncoderInputError);
    await expect(miniModel().infer(['hello'], s)).rejects.toThrow(
      /entity type '!{100}' alone serializes to \d+ tokens/,
    );
  });
});

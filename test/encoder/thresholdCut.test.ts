/**
 * The evaluation's threshold curve runs the engine once at the grid's minimum and cuts the result at
 * each threshold (src/core/extraction/thresholds.ts `cutResult`). On the built mini model, for every
 * head, that cut equals running the engine at the threshold — for a text read in one window; a long
 * text's merged windows are where it may differ (the evaluation re-runs those at 0.5).
 * Needs the set-up's mini model (~/.cache/sift/models or SIFT_MODELS_DIR); fails if absent.
 */
import { toEncoderSchema } from '../../src/core/extraction/api';
import { cutResult } from '../../src/core/extraction/thresholds';
import { THRESHOLD_GRID } from '../../src/core/evaluation/scoring';
import { useMiniModel } from '../helpers/miniModel';

const miniModel = useMiniModel();

const texts = [
  'Tim Cook visited the Apple office in Paris on Monday and met Satya Nadella.',
  'Order two lattes and a croissant for Anna, delivered to 5 Baker Street.',
  'Lisa Su, who leads AMD, spoke in Tokyo about new chips and the Berlin plant.',
];
const schema = toEncoderSchema({
  entities: ['person', 'company', 'city', 'date'],
  classifications: [
    { task: 'topics', labels: ['tech', 'food', 'travel', 'business'], multi_label: true },
    { task: 'top2', labels: ['tech', 'food', 'travel'], multi_label: true, top_k: 2 },
    { task: 'tone', labels: ['positive', 'negative'] },
  ],
  structures: {
    order: {
      fields: [
        { name: 'item', dtype: 'list' },
        { name: 'customer', dtype: 'str' },
        { name: 'size', dtype: 'str', choices: ['small', 'large'] },
      ],
    },
  },
  relations: ['works_for', 'located_in'],
});

describe('cutting the low-threshold result at t equals running at t', () => {
  it('for entities, multi-label (with top_k) and single-label classification, structures and relations', async () => {
    const low = await miniModel().infer(texts, schema, { threshold: THRESHOLD_GRID[0] });
    expect(low.chunks).toEqual([1, 1, 1]);
    let kept = 0;
    for (const t of THRESHOLD_GRID) {
      const at = await miniModel().infer(texts, schema, { threshold: t });
      low.results.forEach((r, i) => {
        const cut = cutResult(r, schema, t);
        expect(cut).toEqual(at.results[i]);
        kept += Object.values(cut.entities ?? {}).flat().length;
      });
    }
    // the low run found candidates the cuts dropped (the comparison is not vacuous)
    const lowSpans = low.results.reduce((n, r) => n + Object.values(r.entities ?? {}).flat().length, 0);
    expect(lowSpans * THRESHOLD_GRID.length).toBeGreaterThan(kept);
  }, 120_000);
});

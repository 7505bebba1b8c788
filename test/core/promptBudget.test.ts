/**
 * Job-creation check for labels that can never fit the encoder (src/core/training/promptBudget.ts): the
 * char-based count must be a lower bound of the mini model's real WordPiece count, so no feasible label
 * is ever refused.
 */
import { join } from 'node:path';
import { impossibleLabels, minWordPieceTokens } from '../../src/core/training/promptBudget';
import { DEFAULT_MODELS_DIR } from '../../src/paths';

const summary = (s: Partial<Parameters<typeof impossibleLabels>[2]>) => ({
  label_vocabulary: [],
  entity_types: [],
  relation_types: [],
  structures: {},
  ...s,
});

describe('minWordPieceTokens', () => {
  it('is a lower bound of the mini model tokenizer on ordinary and adversarial strings', async () => {
    const { Tokenizer } = await import('tokenizers');
    const tok = Tokenizer.fromFile(join(DEFAULT_MODELS_DIR, 'sift--gliner2-mini-v1', 'tokenizer.json'));
    const real = async (s: string) => (await tok.encodeBatch([s], { addSpecialTokens: false }))[0]!.getIds().length;
    const cases = [
      'card arrival',
      'Card_payment-wrong exchange rate!',
      '( [P] classification [DESCRIPTION] label 1: refund request ( [L] label 1 ) )',
      '[E][E][P]x[DESCRIPTION]',
      'pneumonoultramicroscopicsilicovolcanoconiosis'.repeat(5),
      '!?.,;:'.repeat(20),
      'naïve café déjà-vu Zürich',
      'e\u0301\u0301 \u0301\u0301 a\u200bb\u00adc',
      '東京都 北京 서울 العربية русский',
      'tabs\tand\nnewlines\r\nand\u000bvertical\u000cfeeds\u2028line',
      '😀👩‍👩‍👧 emoji ☃ ✓ € $ ^ ` | ~',
      'x'.repeat(3000),
      'a '.repeat(600),
      '\uFFFD \u0000 \u0007 ok',
    ];
    for (const s of cases) {
      const lb = minWordPieceTokens(s);
      expect([s.slice(0, 30), lb <= (await real(s))]).toEqual([s.slice(0, 30), true]);
    }
    expect(minWordPieceTokens('card arrival')).toBe(await real('card arrival'));
    expect(minWordPieceTokens('!?.,;:'.repeat(20))).toBe(120);
    expect(minWordPieceTokens('x'.repeat(3000))).toBe(1); // one [UNK]: long words are cheap
  });
});

describe('impossibleLabels', () => {
  it('refuses only labels that cannot fit alone, for models with a hard position limit', () => {
    const long = Array.from({ length: 600 }, (_, i) => `w${i}`).join(' ');
    const ok = summary({
      label_vocabulary: Array.from({ length: 300 }, (_, i) => `intent number ${i}`),
      entity_types: ['person'],
      structures: { order: { id: {}, total: {} } },
    });
    expect(impossibleLabels('sift/gliner2-mini-v1', 'big', ok, ['body', 'datasets', 0])).toEqual([]);
    const bad = summary({
      label_vocabulary: ['fine', long],
      entity_types: [`${'e '.repeat(500)}`],
      relation_types: ['works for'],
      structures: { doc: { ['f '.repeat(490)]: {} } },
    });
    const errs = impossibleLabels('sift/gliner2-mini-v1', 'bad', bad, ['body', 'datasets', 1]);
    expect(errs.map((e) => e.msg.match(/the (\w+)/)![1])).toEqual(['classification', 'entity', 'structure']);
    for (const e of errs) {
      expect(e.loc).toEqual(['body', 'datasets', 1]);
      expect(e.type).toBe('prompt_too_long');
      expect(e.msg).toMatch(
        /dataset 'bad': .* alone serializes to at least \d+ prompt tokens; sift\/gliner2-mini-v1 takes 512 tokens per pass/,
      );
    }
    // 490 one-token words fit on their own, but not in the synthetic form training may give them (+6 tokens)
    const edge = summary({ label_vocabulary: ['a '.repeat(485).trim()] });
    expect(impossibleLabels('sift/gliner2-mini-v1', 'edge', edge, ['body', 'datasets', 0])).toHaveLength(1);
    expect(
      impossibleLabels('sift/gliner2-mini-v1', 'edge', summary({ label_vocabulary: ['a '.repeat(470).trim()] }), [
        'body',
        'datasets',
        0,
      ]),
    ).toHaveLength(0);
    // DeBERTa-based encoders have relative positions: nothing to refuse
    expect(impossibleLabels('fastino/gliner2-base-v1', 'bad', bad, ['body', 'datasets', 0])).toEqual([]);
  });
});

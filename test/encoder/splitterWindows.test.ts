/**
 * Long texts on the event loop (src/encoder/windows.ts): splitting a request's texts and building
 * a long text's windows yield to the event loop, so other requests interleave with them, and the
 * windows split each character at most twice (security review F1: four 100,000-character texts held
 * the process for minutes). A stand-in tokenizer keeps this to the host-side work; no model needed.
 */
import type { Tokenizer } from 'tokenizers';
import { buildChoicePrefix, buildPromptTasks, SPECIAL, type EncoderSchema } from '../../src/encoder/schema';
import { PromptTokens } from '../../src/encoder/tokenize';
import { splitTexts, textWindows, windowPlan, YIELD_EVERY_CHARS } from '../../src/encoder/windows';

/** One id per 4 UTF-16 units of a pre-token (at least one), answered without a macrotask. */
const stubTokenizer = {
  encodeBatch: async (texts: string[]) =>
    texts.map((t) => ({ getIds: () => Array.from({ length: Math.max(1, Math.ceil(t.length / 4)) }, (_, i) => i + 1) })),
} as unknown as Tokenizer;

/** How many event-loop turns (setImmediate callbacks) ran while `work` was in progress. */
async function turnsDuring<T>(work: () => Promise<T>): Promise<{ result: T; turns: number }> {
  let turns = 0;
  let running = true;
  const tick = () => {
    if (!running) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  const result = await work();
  running = false;
  return { result, turns };
}

const schema: EncoderSchema = {
  entities: [{ name: 'person' }, { name: 'organization' }],
  classifications: [],
  structures: [],
  relations: [],
};

async function windowsOf(text: string) {
  const tok = new PromptTokens(stubTokenizer);
  const tasks = buildPromptTasks(schema);
  const prefix = buildChoicePrefix(schema);
  await tok.tokenizeAll([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, ...prefix, ...tasks.flatMap((t) => t.tokens)]);
  return turnsDuring(() => textWindows(tok, 0, text, tasks, prefix, {}, windowPlan({ max_position_embeddings: 512 })));
}

describe('long texts do not hold the event loop', () => {
  it('textWindows yields before every window of a 20,000-dot text', async () => {
    const { result, turns } = await windowsOf('.'.repeat(20_000));
    expect(result.length).toBe(Math.ceil((20_000 - 200) / 168) + 1);
    expect(turns).toBeGreaterThanOrEqual(result.length);
  });

  it('the windows split each character at most twice (linear in the text)', async () => {
    for (const text of [
      '.'.repeat(20_000),
      'ab. '.repeat(5_000),
      `${' '.repeat(9_000)}x ${'y '.repeat(500)}${' '.repeat(9_000)}`,
    ]) {
      const { result } = await windowsOf(text);
      const windowChars = result.reduce((n, r) => n + r.text.length, 0);
      expect(windowChars).toBeLessThanOrEqual(2 * text.length + result.length);
    }
  });

  it('splitTexts yields between texts once YIELD_EVERY_CHARS characters are split', async () => {
    const texts = Array.from({ length: 4 }, () => '.'.repeat(100_000));
    const { result, turns } = await turnsDuring(() => splitTexts(texts));
    expect(result.map((s) => s.words.length)).toEqual([100_000, 100_000, 100_000, 100_000]);
    expect(turns).toBeGreaterThanOrEqual(3);
    expect(YIELD_EVERY_CHARS).toBeLessThanOrEqual(100_000);
  });

  it('splitTexts does not yield for a batch of short texts', async () => {
    const { turns } = await turnsDuring(() =>
      splitTexts(Array.from({ length: 64 }, () => 'Tim Cook is the CEO of Apple.')),
    );
    expect(turns).toBe(0);
  });
});

/**
 * Window planning for texts longer than the encoder takes at once (src/encoder/windows.ts,
 * docs/reference/encoder.md "Long texts"): the window each model's config gives (absolute-position
 * backbones capped at max_position_embeddings, relative attention 512 by default, `window_tokens` when
 * set), the word ranges, and windows that fit the plan with offsets into the original text, with a
 * stand-in tokenizer; then the engine reading the plan from the mini model's config.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tokenizer } from 'tokenizers';
import { EncoderModel } from '../../src/encoder/engine';
import { buildChoicePrefix, buildPromptTasks, SPECIAL, type EncoderSchema } from '../../src/encoder/schema';
import { CodePoints } from '../../src/encoder/text';
import { PromptTokens } from '../../src/encoder/tokenize';
import { MIN_WINDOW_TOKENS, textWindows, windowPlan, wordWindows, type WindowPlan } from '../../src/encoder/windows';
import { MINI_MODEL_DIR } from '../helpers/miniModel';

describe('windowPlan: the window a model config gives', () => {
  it('BERT (absolute positions): max_position_embeddings, with gliner2 extract_long words at 512', () => {
    expect(windowPlan({ max_position_embeddings: 512 })).toEqual({ tokens: 512, words: 200, overlap: 32 });
    expect(windowPlan({ max_position_embeddings: 128 })).toEqual({ tokens: 128, words: 50, overlap: 32 });
    expect(windowPlan({ max_position_embeddings: 512, window_tokens: 256 })).toEqual({
      tokens: 256,
      words: 100,
      overlap: 32,
    });
  });

  it('DeBERTa-v3 (relative attention): 512 by default whatever max_position_embeddings says; window_tokens may go past it', () => {
    expect(windowPlan({ max_position_embeddings: 512, relative_positions: true }).tokens).toBe(512);
    expect(windowPlan({ max_position_embeddings: 2048, relative_positions: true }).tokens).toBe(512);
    expect(windowPlan({ max_position_embeddings: 512, relative_positions: true, window_tokens: 1024 })).toEqual({
      tokens: 1024,
      words: 400,
      overlap: 32,
    });
    expect(windowPlan({ max_position_embeddings: 512, window_tokens: null }).tokens).toBe(512);
  });

  it('refuses a window the backbone cannot take, never cuts it down silently', () => {
    expect(() => windowPlan({ max_position_embeddings: 512, window_tokens: 1024 })).toThrow(
      /exceeds max_position_embeddings 512: this backbone has absolute position embeddings/,
    );
    expect(() => windowPlan({ max_position_embeddings: 512, window_tokens: MIN_WINDOW_TOKENS - 1 })).toThrow(
      /at least/,
    );
    expect(() => windowPlan({ max_position_embeddings: 512, relative_positions: true, window_tokens: 300.5 })).toThrow(
      /integer/,
    );
  });
});

describe('wordWindows: word ranges', () => {
  it('one window for a text that fits; otherwise overlapping windows whose last ends at the last word', () => {
    expect(wordWindows(150, 200, 32)).toEqual([[0, 150]]);
    expect(wordWindows(200, 200, 32)).toEqual([[0, 200]]);
    const w = wordWindows(1000, 200, 32);
    expect(w[0]).toEqual([0, 200]);
    expect(w.at(-1)![1]).toBe(1000);
    for (let i = 1; i < w.length; i++) {
      expect(w[i]![0]).toBe(w[i - 1]![0] + 168); // stride = size - overlap
      expect(w[i - 1]![1] - w[i]![0]).toBeGreaterThanOrEqual(32); // every boundary is read twice
    }
  });

  it('the overlap is at most a quarter of the window (linear work)', () => {
    const w = wordWindows(100, 16, 32);
    expect(w[1]![0]).toBe(12);
  });
});

/** One id per 4 UTF-16 units of a pre-token (at least one). */
const stubTokenizer = {
  encodeBatch: async (texts: string[]) =>
    texts.map((t) => ({ getIds: () => Array.from({ length: Math.max(1, Math.ceil(t.length / 4)) }, (_, i) => i + 1) })),
} as unknown as Tokenizer;
const schema: EncoderSchema = { entities: [{ name: 'person' }], classifications: [], structures: [], relations: [] };

async function windowsOf(text: string, plan: WindowPlan) {
  const tok = new PromptTokens(stubTokenizer);
  const tasks = buildPromptTasks(schema);
  const prefix = buildChoicePrefix(schema);
  await tok.tokenizeAll([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, ...prefix, ...tasks.flatMap((t) => t.tokens)]);
  return textWindows(tok, 0, text, tasks, prefix, {}, plan);
}

describe('textWindows follows the model plan', () => {
  // words of up to 12 characters: up to 3 stand-in tokens each, so 200-word windows overflow 512 tokens
  const text = Array.from({ length: 900 }, (_, i) => `Word${'x'.repeat(i % 9)}${i}`).join(' ');

  it('every window fits the plan tokens, and maps back to the original text at its offset', async () => {
    const cps = new CodePoints(text);
    for (const plan of [
      windowPlan({ max_position_embeddings: 512 }),
      windowPlan({ max_position_embeddings: 512, window_tokens: 256 }),
      windowPlan({ max_position_embeddings: 512, relative_positions: true, window_tokens: 1024 }),
    ]) {
      const recs = await windowsOf(text, plan);
      for (const r of recs) {
        expect(r.ids.length).toBeLessThanOrEqual(plan.tokens);
        // each word of the window is the original's characters at offset + its window offsets
        r.words.forEach((w, i) => {
          if (w === '.' && i === r.words.length - 1) return; // the period gliner2 appends to a window
          expect(cps.slice(r.offset + r.starts[i]!, r.offset + r.ends[i]!).toLowerCase()).toBe(w);
        });
      }
      expect(recs[0]!.offset).toBe(0);
      // the last window reaches the end of the text: nothing is dropped
      const last = recs.at(-1)!;
      const lastWord = last.words.at(-1) === '.' ? last.words.length - 2 : last.words.length - 1;
      expect(last.offset + last.ends[lastWord]!).toBe(Array.from(text).length);
    }
  });

  it('a smaller window gives more windows, a larger one fewer', async () => {
    const [small, base, large] = await Promise.all(
      [
        windowPlan({ max_position_embeddings: 512, window_tokens: 256 }),
        windowPlan({ max_position_embeddings: 512 }),
        windowPlan({ max_position_embeddings: 512, relative_positions: true, window_tokens: 1024 }),
      ].map((p) => windowsOf(text, p)),
    );
    expect(small!.length).toBeGreaterThan(base!.length);
    expect(base!.length).toBeGreaterThan(large!.length);
    expect(large!.length).toBeGreaterThan(1);
  });
});

describe('the engine reads the plan from the model config (the mini model, symlinked with an edited gliner2_config.json)', () => {
  const dirs: string[] = [];
  /** The mini model's files, with `edit` applied to its onnx/gliner2_config.json. */
  function miniWith(edit: Record<string, unknown>): string {
    const dir = mkdtempSync(join(tmpdir(), 'sift-window-'));
    dirs.push(dir);
    mkdirSync(join(dir, 'onnx'));
    for (const f of readdirSync(MINI_MODEL_DIR)) if (f !== 'onnx') symlinkSync(join(MINI_MODEL_DIR, f), join(dir, f));
    for (const f of readdirSync(join(MINI_MODEL_DIR, 'onnx')))
      if (f !== 'gliner2_config.json') symlinkSync(join(MINI_MODEL_DIR, 'onnx', f), join(dir, 'onnx', f));
    const cfg = JSON.parse(readFileSync(join(MINI_MODEL_DIR, 'onnx', 'gliner2_config.json'), 'utf8'));
    writeFileSync(join(dir, 'onnx', 'gliner2_config.json'), JSON.stringify({ ...cfg, ...edit }));
    return dir;
  }
  afterAll(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it('a BERT model asked for a window past its positions fails to load, saying why', async () => {
    await expect(EncoderModel.load(miniWith({ window_tokens: 1024 }))).rejects.toThrow(
      /window_tokens 1024 exceeds max_position_embeddings 512/,
    );
  });

  it('window_tokens 256: more windows, every span still at its own characters of the document', async () => {
    const model = await EncoderModel.load(miniWith({ window_tokens: 256 }));
    try {
      expect(model.window).toEqual({ tokens: 256, words: 100, overlap: 32 });
      const text = `${'Maria Gonzalez of Siemens visited Geneva on Tuesday. '.repeat(60)}Olaf Scholz arrived in Berlin.`;
      const out = await model.infer(
        [text],
        { entities: [{ name: 'person' }], classifications: [], structures: [], relations: [] },
        { threshold: 0.4 },
      );
      expect(out.chunks[0]).toBeGreaterThan(4); // ~560 words in 100-word windows
      const spans = out.results[0]!.entities!.person!;
      expect(spans.length).toBeGreaterThan(0);
      for (const s of spans) expect(Array.from(text).slice(s.start, s.end).join('')).toBe(s.text);
    } finally {
      await model.release();
    }
  });
});

/**
 * A loaded model's size as the runtime's LRU (`SIFT_ENCODER_MAX_LOADED_BYTES`) counts it includes its
 * tokenizer in memory, not only its ONNX files: mDeBERTa-v3's 250k-piece tokenizer.json (16 MB) holds
 * ~350 MB once loaded (bench/serving/tokenizer.ts, docs/experiments/encoder.md), which the ONNX sizes alone left out.
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { loadedBytes, TOKENIZER_MEMORY_PER_JSON_BYTE } from '../../src/encoder/engine';
import { MINI_MODEL_DIR, useMiniModel } from '../helpers/miniModel';

const model = useMiniModel();

describe('EncoderModel.bytes', () => {
  it('counts the tokenizer at its measured in-memory size per JSON byte, on top of the ONNX files', () => {
    expect(loadedBytes(1_000, 0)).toBe(1_000);
    // the measured ratios it must cover: 350 MB / 16 MB (250k Unigram), 9.9 MB / 0.7 MB (30k WordPiece)
    expect(TOKENIZER_MEMORY_PER_JSON_BYTE).toBeGreaterThanOrEqual(22);
    expect(loadedBytes(1_000, 16 * 2 ** 20)).toBeGreaterThan(350 * 2 ** 20);
  });

  it('is what the mini model loads as: its fp32 ONNX fragments plus its tokenizer', () => {
    const size = (f: string) => statSync(join(MINI_MODEL_DIR, f)).size;
    const scorer = model().scorer === 'span_scores' ? 'span_scores' : 'span_rep';
    const onnx = ['encoder', scorer, 'count_pred', 'count_embed', 'classifier'].reduce(
      (n, f) => n + size(`onnx/${f}.onnx`),
      0,
    );
    expect(model().bytes).toBe(onnx + TOKENIZER_MEMORY_PER_JSON_BYTE * size('tokenizer.json'));
  });
});

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { EncoderModel } from '../../src/encoder/engine';
import { DEFAULT_MODELS_DIR } from '../../src/paths';

export const MINI_MODEL_DIR = join(DEFAULT_MODELS_DIR, 'sift--gliner2-mini-v1');

/**
 * Loads the built mini encoder once for a test file (released after it) and returns its getter; a
 * missing build fails the file with the command that makes it, never skips it.
 */
export function useMiniModel(): () => EncoderModel {
  let model: EncoderModel | undefined;
  beforeAll(async () => {
    if (!existsSync(join(MINI_MODEL_DIR, 'onnx'))) {
      throw new Error(
        `the mini model is not at ${MINI_MODEL_DIR}: build it with \`node scripts/setup.mjs\` (npm test does) or set SIFT_MODELS_DIR`,
      );
    }
    model = await EncoderModel.load(MINI_MODEL_DIR);
  }, 120_000);
  afterAll(async () => {
    await model?.release();
  });
  return () => {
    if (!model) throw new Error('the mini model is not loaded yet (use it inside a test)');
    return model;
  };
}

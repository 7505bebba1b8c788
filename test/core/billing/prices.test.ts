/**
 * Prices as data (src/core/billing/prices.ts): every training instance type the stacks offer has a
 * price, the per-minute prices follow the stated rule, and README "Billing" shows the same numbers.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { TRAINING_INSTANCE_TYPES } from '../../../lib/config';
import { REPO_ROOT } from '../../../lib/paths';
import {
  COMPUTE_MARKUP,
  decoderTokensCostMicros,
  ENCODER_PRICE_PER_MTOK,
  encoderTokensCostMicros,
  SAGEMAKER_TRAINING_USD_PER_HOUR,
  trainingCostMicros,
  trainingMicrosPerMinute,
} from '../../../src/core/billing/prices';

const README = readFileSync(join(REPO_ROOT, 'README.md'), 'utf8').replace(/\s+/g, ' ');

describe('compute prices', () => {
  it('has an AWS price for every instance type lib/config.ts offers for training, and no other', () => {
    expect(Object.keys(SAGEMAKER_TRAINING_USD_PER_HOUR).sort()).toEqual([...TRAINING_INSTANCE_TYPES].sort());
  });

  it("a training minute is AWS's hourly price × the markup ÷ 60, rounded up; local is priced as ml.m5.xlarge; an unknown type as the dearest", () => {
    for (const [type, hourly] of Object.entries(SAGEMAKER_TRAINING_USD_PER_HOUR)) {
      expect(trainingMicrosPerMinute(type)).toBe(Math.ceil((hourly * COMPUTE_MARKUP * 1e6) / 60));
    }
    expect(trainingMicrosPerMinute('local')).toBe(trainingMicrosPerMinute('ml.m5.xlarge'));
    expect(trainingMicrosPerMinute('ml.x9.unknown')).toBe(trainingMicrosPerMinute('ml.p3.2xlarge'));
    expect(trainingCostMicros('ml.g5.xlarge', 60)).toBe(trainingMicrosPerMinute('ml.g5.xlarge'));
    expect(trainingCostMicros('ml.g5.xlarge', 1)).toBe(Math.ceil(trainingMicrosPerMinute('ml.g5.xlarge') / 60)); // by the second
    expect(trainingCostMicros('ml.g5.xlarge', 0)).toBe(0);
  });

  it('README "Billing" states each per-minute price and its AWS hourly price as the code has them', () => {
    for (const [type, hourly] of Object.entries(SAGEMAKER_TRAINING_USD_PER_HOUR)) {
      const stated = new RegExp(
        `\`${type.replaceAll('.', '\\.')}\`(?: \\(the default\\))? \\$(0\\.\\d{6})(?:/min)? \\(\\$([\\d.]+)(?:/h at AWS)?\\)`,
      ).exec(README);
      expect({ type, perMinute: stated?.[1], hourly: stated?.[2] }).toEqual({
        type,
        perMinute: (trainingMicrosPerMinute(type) / 1e6).toFixed(6),
        hourly: String(hourly),
      });
    }
    expect(README).toContain(`$${ENCODER_PRICE_PER_MTOK} per MTok`);
  });

  it("tokens: the encoder at its price per MTok, the decoder at the model's profile prices", () => {
    expect(encoderTokensCostMicros(1_000_000)).toBe(ENCODER_PRICE_PER_MTOK * 1e6);
    expect(encoderTokensCostMicros(1)).toBe(1); // rounded up to a micro-USD
    expect(decoderTokensCostMicros('HuggingFaceTB/SmolLM2-135M-Instruct', 1000, 100)).toBe(60); // 1000 × 0.05 + 100 × 0.1
  });
});

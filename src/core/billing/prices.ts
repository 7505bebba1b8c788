/**
 * Prices as data: every unit the service bills, in one place (README "Billing" lists them). Money
 * is integer micro-USD (money.ts); every cost here rounds up to a whole micro-USD.
 *
 * Decoder token prices are per model, on the decoder profiles (decoder/models.ts `inputPrice`,
 * `outputPrice`, cache multipliers); the rest is here.
 */
import { decoderProfile } from '../decoder/models';

/**
 * USD per million input tokens of the encoder engine: extraction (`POST /inference`, `/gliner-2/*`,
 * label-existing), evaluations (the same engine over a dataset's rows) and the NER labelling of
 * generated rows. 0.02 USD/MTok is 0.02 micro-USD per token.
 */
export const ENCODER_PRICE_PER_MTOK = 0.02;

export const encoderTokensCostMicros = (inputTokens: number): number => Math.ceil(inputTokens * ENCODER_PRICE_PER_MTOK);

/** Generated text at the decoder model's own prices (no prompt cache in the generation workflow). */
export function decoderTokensCostMicros(model: string, inputTokens: number, outputTokens: number): number {
  const p = decoderProfile(model);
  return Math.ceil(p.inputPrice * inputTokens + p.outputPrice * outputTokens);
}

/**
 * AWS's list price of SageMaker AI training, On-Demand, US East (N. Virginia), USD per instance-hour,
 * for every type lib/config.ts offers (`TRAINING_INSTANCE_TYPES`; test/core/billing/prices.test.ts
 * keeps the two lists equal). Source: https://aws.amazon.com/sagemaker/ai/pricing/ ("On-Demand
 * Pricing", tab "Training"). Re-read the page and update this table when AWS changes it.
 */
export const SAGEMAKER_TRAINING_USD_PER_HOUR: Readonly<Record<string, number>> = {
  'ml.g5.xlarge': 1.408,
  'ml.g5.2xlarge': 1.515,
  'ml.g6.xlarge': 1.127,
  'ml.g6.2xlarge': 1.222,
  'ml.g4dn.xlarge': 0.736,
  'ml.p3.2xlarge': 3.825,
  'ml.m5.xlarge': 0.23,
};

/**
 * Our price of a training minute = AWS's on-demand hourly price × this markup ÷ 60. The markup
 * covers what a job uses besides the instance (S3, Step Functions, the workflow Lambdas, the data
 * copied into the channels) and the margin; jobs run on spot capacity, so it is never below cost.
 */
export const COMPUTE_MARKUP = 1.25;

/**
 * Local mode runs the trainer on this machine's CPU (`instance_type: local`): priced as the CPU
 * instance SageMaker offers, so a local bill has the shape of a deployed one.
 */
export const LOCAL_PRICED_AS = 'ml.m5.xlarge';

/** micro-USD per training minute on an instance type. An unknown type is priced as the dearest known one (never under). */
export function trainingMicrosPerMinute(instanceType: string): number {
  const hourly =
    SAGEMAKER_TRAINING_USD_PER_HOUR[instanceType === 'local' ? LOCAL_PRICED_AS : instanceType] ??
    Math.max(...Object.values(SAGEMAKER_TRAINING_USD_PER_HOUR));
  return Math.ceil((hourly * COMPUTE_MARKUP * 1e6) / 60);
}

/** A training job's charge: its seconds at the per-minute price (billed by the second, as SageMaker bills). */
export const trainingCostMicros = (instanceType: string, seconds: number): number =>
  Math.ceil((Math.max(0, seconds) * trainingMicrosPerMinute(instanceType)) / 60);

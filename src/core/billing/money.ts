/**
 * Money is stored as integer millionths of a USD ("micros"), so balances and counters add up
 * exactly under DynamoDB's atomic ADD; the API shows USD.
 */
export const MICROS_PER_USD = 1_000_000;

export function usdToMicros(usd: number): number {
  return Math.round(usd * MICROS_PER_USD);
}

export function microsToUsd(micros: number): number {
  return micros / MICROS_PER_USD;
}

export const usdOrNull = (micros: number | null | undefined): number | null =>
  micros === null || micros === undefined ? null : microsToUsd(micros);

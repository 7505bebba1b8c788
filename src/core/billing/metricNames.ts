/**
 * The CloudWatch names finance reads: the EMF emitter (src/adapters/metrics/emfUsageMetrics.ts) and the finance dashboard
 * (lib/observability-stack.ts) both import them from here, so a query can never name a metric or a
 * dimension set that nothing emits.
 */
export const METRICS_NAMESPACE = 'Sift';

/** The only dimensions usage metrics carry (never a customer id: each dimension set is a billed custom metric). */
export const USAGE_DIMENSIONS = ['endpoint', 'model'] as const;
export type UsageDimension = (typeof USAGE_DIMENSIONS)[number];

/** Per billed request. */
export const REQUEST_METRICS = [
  'Requests',
  'InputTokens',
  'OutputTokens',
  'CacheReadTokens',
  'CacheWriteTokens',
  'CostUsd',
] as const;
/** Per finished training job (endpoint `/core/training-jobs`, model = the base model). */
export const TRAINING_METRICS = ['GpuMinutes'] as const;
export const USAGE_METRICS = [...REQUEST_METRICS, ...TRAINING_METRICS] as const;
export type UsageMetric = (typeof USAGE_METRICS)[number];

/** Operational: usage batches that could not be written and were kept in the spool / queue. */
export const SPOOLED_METRIC = 'UsageBatchesSpooled';
/** Operational: kept usage batches too old to apply safely, written to the stale-usage record for reconciliation (billing/usageBatch.ts). */
export const STALE_METRIC = 'UsageBatchesStale';
/**
 * Operational: a /ready check found a preloaded model's encoder sessions on another execution provider
 * than SIFT_REQUIRE_EXECUTION_PROVIDER (a GPU task serving on CPU); lib/observability-stack.ts alarms on it.
 */
export const PROVIDER_FALLBACK_METRIC = 'EncoderProviderFallback';
/** The one dimension set of the operational metrics above (`component` = usage or encoder). */
export const OPERATIONAL_DIMENSION = 'component';

/** The `endpoint` dimension value of training compute. */
export const TRAINING_ENDPOINT = '/core/training-jobs';

/**
 * Finance's CloudWatch metrics as EMF lines, built by Powertools Metrics and written to the
 * runtime's log: stdout on Lambda and ECS (the awslogs driver ships it to CloudWatch Logs, which
 * extracts EMF without any header: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Generation_PutLogEvents.html),
 * and a log file in local mode. Dimensions are exactly `{endpoint, model}` — Powertools' default
 * `service` dimension is dropped, because the dashboard's SCHEMA() queries match a dimension set
 * exactly. The core reports through the UsageMetrics port (src/core/billing/usageMetrics.ts).
 */
import { Metrics, MetricUnit } from '@aws-lambda-powertools/metrics';
import {
  METRICS_NAMESPACE,
  OPERATIONAL_DIMENSION,
  PROVIDER_FALLBACK_METRIC,
  SPOOLED_METRIC,
  STALE_METRIC,
  TRAINING_ENDPOINT,
  type UsageMetric,
} from '../../core/billing/metricNames';
import { microsToUsd } from '../../core/billing/money';
import type { UsageMetrics } from '../../core/billing/usageMetrics';

export type { UsageMetrics } from '../../core/billing/usageMetrics';

export function emfUsageMetrics(write: (line: string) => void): UsageMetrics {
  const metrics = new Metrics({ namespace: METRICS_NAMESPACE });
  metrics.clearDefaultDimensions();
  const emit = (
    dimensions: Record<string, string>,
    values: Partial<
      Record<UsageMetric | typeof SPOOLED_METRIC | typeof STALE_METRIC | typeof PROVIDER_FALLBACK_METRIC, number>
    >,
  ) => {
    metrics.addDimensions(dimensions);
    for (const [name, value] of Object.entries(values)) {
      metrics.addMetric(name, name === 'CostUsd' ? MetricUnit.NoUnit : MetricUnit.Count, value);
    }
    const line = JSON.stringify(metrics.serializeMetrics());
    metrics.clearMetrics();
    metrics.clearDimensions();
    write(line);
  };
  return {
    billed: (u) =>
      emit(
        { endpoint: u.endpoint, model: u.base_model },
        {
          Requests: 1,
          InputTokens: u.input_tokens,
          OutputTokens: u.output_tokens,
          CacheReadTokens: u.cache_read_tokens,
          CacheWriteTokens: u.cache_write_tokens,
          CostUsd: microsToUsd(u.cost_usd_micros),
        },
      ),
    trainingMinutes: (model, minutes) => emit({ endpoint: TRAINING_ENDPOINT, model }, { GpuMinutes: minutes }),
    spooled: (n) => emit({ [OPERATIONAL_DIMENSION]: 'usage' }, { [SPOOLED_METRIC]: n }),
    stale: (n) => emit({ [OPERATIONAL_DIMENSION]: 'usage' }, { [STALE_METRIC]: n }),
    providerFallback: () => emit({ [OPERATIONAL_DIMENSION]: 'encoder' }, { [PROVIDER_FALLBACK_METRIC]: 1 }),
  };
}

/** Lambda and ECS: one EMF line per event on stdout. */
export const stdoutUsageMetrics = (): UsageMetrics => emfUsageMetrics((line) => process.stdout.write(`${line}\n`));

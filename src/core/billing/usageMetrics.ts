/**
 * Finance's CloudWatch metrics, as the core reports them (`svc.usageMetrics`): one event per billed
 * request, training's GPU minutes, the usage batches the spool took or found stale, and encoder sessions
 * that fell back from the required execution provider. The runtime
 * passes the implementation in (src/adapters/metrics/emfUsageMetrics.ts: EMF lines built by
 * Powertools Metrics); names and units are metricNames.ts.
 */
import type { BilledUsage } from './usageBatch';

export interface UsageMetrics {
  billed(usage: BilledUsage): void;
  trainingMinutes(model: string, gpuMinutes: number): void;
  spooled(batches: number): void;
  stale(batches: number): void;
  /** A model's encoder sessions run on another provider than the one required (readiness.ts). */
  providerFallback(): void;
}

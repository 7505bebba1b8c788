/**
 * Error statuses shared by many routes, declared per route in `responses` so the OpenAPI document
 * lists what each operation can answer (the body is the route's error format, see openapi.ts).
 */
import type { ResponseDoc } from '../types';

/** Routes that run a model: credit and spend checks (core/usage.ts checkSpendAllowance), model resolution, weights. */
export const modelRunErrors: Record<number, ResponseDoc> = {
  402: { description: 'Out of prepaid credit' },
  404: { description: 'Unknown model, training job or project' },
  409: { description: 'Training job or project without an active inference deployment' },
  503: { description: 'The model is in the catalog but its weights are not installed on this deployment' },
};

/** Routes that start billed compute (training, evaluation, generation, adaptive cycles): core/billing/compute.ts `admitCompute`. */
export const computeStartErrors: Record<number, ResponseDoc> = {
  402: { description: 'Out of prepaid credit: nothing is created' },
  429: {
    description:
      "Rate limit, the daily spending cap (`X-RateLimit-Reason: daily_spend_cap_exceeded`), or the plan's cap on compute running at once (`X-RateLimit-Reason: concurrent_jobs`); `Retry-After` in seconds. Nothing is created",
  },
};

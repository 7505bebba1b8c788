/**
 * docs/reference/decisions.md#limits as data: the endpoint classes and their windows, and the per-IP edge limit.
 * No runtime imports, so the CDK app (lib/) reads the same numbers the service enforces.
 */
export interface LimitRule {
  limit: number;
  windowSeconds: number;
}

/** docs/reference/decisions.md#limits: the endpoint classes and their windows. */
export const LIMIT_CLASSES = {
  default: [
    { limit: 20_000, windowSeconds: 60 },
    { limit: 1_000_000, windowSeconds: 3600 },
  ],
  inference: [{ limit: 5_000, windowSeconds: 60 }],
  compat: [{ limit: 5_000, windowSeconds: 60 }],
  gliner: [{ limit: 15_000, windowSeconds: 60 }],
  generate: [{ limit: 120, windowSeconds: 60 }],
  training_create: [{ limit: 20, windowSeconds: 60 }],
} satisfies Record<string, LimitRule[]>;

export type LimitClass = keyof typeof LIMIT_CLASSES;

/** Applied to every request by client IP, before authentication. */
export const EDGE_LIMIT: LimitRule = { limit: 100_000, windowSeconds: 60 };

/** A class's per-minute limit (its 60-second window): what API Gateway's per-method throttles are made from. */
export function perMinuteLimit(limitClass: LimitClass): number {
  const rule = (LIMIT_CLASSES[limitClass] as LimitRule[]).find((r) => r.windowSeconds === 60);
  if (!rule) throw new Error(`limit class ${limitClass} has no per-minute window`);
  return rule.limit;
}

/** What a team can have running at once, per kind of compute (computeSlots.ts enforces it). */
export type ComputeKind = 'training' | 'evaluation' | 'generation';

/**
 * Compute a team may have running at once, per plan: training jobs `requested|running`,
 * evaluations `running`, generation jobs `queued|running`. Over it: 429, `X-RateLimit-Reason:
 * concurrent_jobs`. Free may train (docs/reference/decisions.md#plans: only the adaptive loop is off on Free), one job at a
 * time; these numbers also bound how far a prepaid balance can go below 0 (README "Overdraft bound").
 */
export const CONCURRENT_COMPUTE: Record<'free' | 'pro' | 'research' | 'custom', Record<ComputeKind, number>> = {
  free: { training: 1, evaluation: 1, generation: 1 },
  pro: { training: 4, evaluation: 4, generation: 4 },
  research: { training: 8, evaluation: 8, generation: 8 },
  custom: { training: 16, evaluation: 16, generation: 16 },
};

/** Retry-After of a concurrent-compute 429: jobs run for minutes, so sooner is pointless. */
export const CONCURRENT_COMPUTE_RETRY_SECONDS = 60;

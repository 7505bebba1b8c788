/**
 * Stage configuration for the Sift CDK app.
 *
 * Every value has a per-stage default below and can be overridden with CDK
 * context (`cdk synth -c stage=prod -c alarmEmail=ops@example.com`). Nothing
 * here performs a lookup, so synth stays account- and region-agnostic.
 */
import type { Node } from 'constructs';
import { EDGE_LIMIT, perMinuteLimit } from '../src/core/limits';
import { parseOrigins } from '../src/http/cors';

export type StageName = 'dev' | 'staging' | 'prod';

/** GPU instance types offered for the inference capacity (CloudFormation parameter AllowedValues). */
export const GPU_INSTANCE_TYPES = [
  'g5.xlarge',
  'g5.2xlarge',
  'g5.4xlarge',
  'g5.8xlarge',
  'g5.12xlarge',
  'g6.xlarge',
  'g6.2xlarge',
  'g6.4xlarge',
  'g6.8xlarge',
  'g6.12xlarge',
  'g6e.xlarge',
  'g6e.2xlarge',
  'g6e.4xlarge',
  'g6e.8xlarge',
  'g6e.12xlarge',
] as const;
export type GpuInstanceType = (typeof GPU_INSTANCE_TYPES)[number];

/** GPU memory per GPU of each family (g5 A10G, g6 L4: 24 GB; g6e L40S: 48 GB). */
const GPU_MEMORY_GB: Readonly<Record<string, number>> = { g6: 24, g5: 24, g6e: 48 };
/** Cheapest first (on-demand, us-east-1: g6 < g5 < g6e at each size). */
const GPU_FAMILIES = ['g6', 'g5', 'g6e'] as const;

/**
 * The types an Auto Scaling group falls back to, in order, when `type` has no capacity: the same
 * size (same vCPUs, at least the host memory) in the other families whose GPUs have at least the
 * memory of `type`'s — so a task that fits `type` fits them. A g6e (48 GB) has none.
 */
export function gpuFallbackTypes(type: GpuInstanceType): GpuInstanceType[] {
  const [family, size] = type.split('.') as [string, string];
  return GPU_FAMILIES.filter((f) => f !== family && GPU_MEMORY_GB[f]! >= GPU_MEMORY_GB[family]!)
    .map((f) => `${f}.${size}`)
    .filter((t): t is GpuInstanceType => (GPU_INSTANCE_TYPES as readonly string[]).includes(t));
}

/**
 * SageMaker instance types offered for training jobs (context `trainingInstanceType`). The g5/g6
 * types have NVMe instance storage, so their jobs carry no volume KMS key (lib/aws-rules.ts).
 */
export const TRAINING_INSTANCE_TYPES = [
  'ml.g5.xlarge',
  'ml.g5.2xlarge',
  'ml.g6.xlarge',
  'ml.g6.2xlarge',
  'ml.g4dn.xlarge',
  'ml.p3.2xlarge',
  'ml.m5.xlarge',
] as const;

/** Capacity of one GPU service (encoder or decoder). */
export interface GpuServiceConfig {
  /** Default for the `<Name>InstanceType` CloudFormation parameter. */
  readonly instanceType: GpuInstanceType;
  /** Minimum running tasks; 0 lets the service (and its instances) scale to zero. */
  readonly minTasks: number;
  readonly maxTasks: number;
  /** Target ALB requests per task per minute for target-tracking scaling. */
  readonly requestsPerTarget: number;
  /** Memory reserved for the container, sized from host RAM (not VRAM). */
  readonly memoryReservationMiB: number;
}

/** The plans of docs/reference/decisions.md#plans; each is an API Gateway usage plan. */
export const PLANS = ['free', 'pro', 'research', 'custom'] as const;
export type PlanName = (typeof PLANS)[number];

/** One team's request rate under a plan (API Gateway token bucket: steady rate per second, burst). */
export interface UsagePlanThrottle {
  readonly rateLimit: number;
  readonly burstLimit: number;
}

export interface StageConfig {
  readonly stage: StageName;
  /** Resource removal: `retain` keeps data on stack deletion. */
  readonly retainData: boolean;
  /** Origins allowed by API CORS and S3 CORS (presigned PUT from the console). */
  readonly consoleOrigins: string[];
  /** Log retention for Lambda, API access logs, ECS, state machines. */
  readonly logRetentionDays: number;
  /** NAT gateways for the inference VPC (1 keeps idle cost low, 2 for AZ-independent egress). */
  readonly natGateways: number;
  readonly encoder: GpuServiceConfig;
  /**
   * Catalog encoders each gateway task loads before it reports ready (`GET /ready`, the target
   * group's health check). Only list models whose weights are in the bucket's `models/` prefix.
   */
  readonly encoderPreloadModels: string[];
  readonly decoder: GpuServiceConfig;
  /** Default SageMaker training instance type. */
  readonly trainingInstanceType: string;
  /** Hard cap on training runtime; MaxWaitTimeInSeconds (spot) is twice this. */
  readonly trainingMaxRuntimeSeconds: number;
  /** Adaptive loop schedule (EventBridge rate/cron expression) or `off`. */
  readonly adaptiveSchedule: string;
  /** Monthly AWS Budget in USD; 0 disables the budget. */
  readonly monthlyBudgetUsd: number;
  /** E-mail subscribed to alarms and budget notifications (optional). */
  readonly alarmEmail?: string;
  /**
   * Multiplier applied to the per-user limits (docs/reference/decisions.md#limits) to obtain the stage-wide
   * per-method throttles (API Gateway throttles per stage, not per user).
   */
  readonly throttleScale: number;
  /**
   * Per-team throttles by plan, enforced by API Gateway before any Lambda or GPU task runs (the
   * authorizer names the team's key in its plan's usage plan). The per-user limits and spend caps (decisions.md#limits)
   * stay the service's own counters; these bound a whole team.
   */
  readonly usagePlans: Record<PlanName, UsagePlanThrottle>;
  /** Unit prices used by the finance dashboard (USD). */
  readonly prices: {
    readonly inputPerMillionTokens: number;
    readonly outputPerMillionTokens: number;
    readonly cacheReadPerMillionTokens: number;
    readonly cacheWritePerMillionTokens: number;
    readonly gpuPerHour: number;
  };
}

const BASE: Omit<StageConfig, 'stage'> = {
  retainData: false,
  consoleOrigins: ['http://localhost:5173'],
  logRetentionDays: 30,
  natGateways: 1,
  encoder: {
    instanceType: 'g6.xlarge',
    minTasks: 0,
    maxTasks: 2,
    requestsPerTarget: 3000,
    memoryReservationMiB: 12288,
  },
  decoder: {
    instanceType: 'g6.xlarge',
    minTasks: 0,
    maxTasks: 2,
    requestsPerTarget: 600,
    memoryReservationMiB: 12288,
  },
  encoderPreloadModels: [],
  trainingInstanceType: 'ml.g5.xlarge',
  trainingMaxRuntimeSeconds: 6 * 3600,
  adaptiveSchedule: 'off',
  monthlyBudgetUsd: 300,
  throttleScale: 1,
  usagePlans: {
    free: { rateLimit: 10, burstLimit: 20 },
    pro: { rateLimit: 100, burstLimit: 200 },
    research: { rateLimit: 100, burstLimit: 200 },
    custom: { rateLimit: 1000, burstLimit: 2000 },
  },
  prices: {
    inputPerMillionTokens: 0.1,
    outputPerMillionTokens: 0.4,
    cacheReadPerMillionTokens: 0.01,
    cacheWritePerMillionTokens: 0.125,
    gpuPerHour: 0.8048,
  },
};

const STAGES: Record<StageName, StageConfig> = {
  dev: { ...BASE, stage: 'dev' },
  staging: {
    ...BASE,
    stage: 'staging',
    logRetentionDays: 90,
    adaptiveSchedule: 'rate(1 day)',
    monthlyBudgetUsd: 1500,
  },
  prod: {
    ...BASE,
    stage: 'prod',
    retainData: true,
    consoleOrigins: [],
    logRetentionDays: 365,
    natGateways: 2,
    encoder: { ...BASE.encoder, minTasks: 1, maxTasks: 8 },
    decoder: { ...BASE.decoder, instanceType: 'g6.2xlarge', minTasks: 1, maxTasks: 8, memoryReservationMiB: 24576 },
    adaptiveSchedule: 'rate(1 day)',
    monthlyBudgetUsd: 10000,
    throttleScale: 10,
  },
};

function isStage(value: unknown): value is StageName {
  return value === 'dev' || value === 'staging' || value === 'prod';
}

function num(node: Node, key: string, fallback: number): number {
  const raw: unknown = node.tryGetContext(key);
  if (raw === undefined) return fallback;
  const n = typeof raw === 'number' ? raw : Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`context ${key} must be a non-negative number, got ${String(raw)}`);
  return n;
}

function str(node: Node, key: string): string | undefined {
  const raw: unknown = node.tryGetContext(key);
  return raw === undefined || raw === '' ? undefined : String(raw);
}

function oneOf<T extends string>(node: Node, key: string, allowed: readonly T[], fallback: T): T {
  const raw = str(node, key);
  if (raw === undefined) return fallback;
  if (!(allowed as readonly string[]).includes(raw))
    throw new Error(`context ${key} must be one of ${allowed.join(', ')}, got ${raw}`);
  return raw as T;
}

/** `-c usagePlans='{"pro":{"rateLimit":200,"burstLimit":400}}'`: the plans named replace the stage's. */
function usagePlans(node: Node, base: Record<PlanName, UsagePlanThrottle>): Record<PlanName, UsagePlanThrottle> {
  const raw: unknown = node.tryGetContext('usagePlans');
  if (raw === undefined || raw === '') return base;
  let given: unknown;
  try {
    given = typeof raw === 'string' ? JSON.parse(raw) : raw;
  } catch {
    throw new Error('context usagePlans must be JSON: {"<plan>": {"rateLimit": n, "burstLimit": n}}');
  }
  const out: Record<PlanName, UsagePlanThrottle> = { ...base };
  for (const [plan, limits] of Object.entries(given as Record<string, unknown>)) {
    if (!(PLANS as readonly string[]).includes(plan))
      throw new Error(`context usagePlans: unknown plan ${plan} (plans: ${PLANS.join(', ')})`);
    const l = limits as Partial<UsagePlanThrottle>;
    if (!(Number(l.rateLimit) > 0) || !Number.isInteger(Number(l.burstLimit)) || !(Number(l.burstLimit) > 0)) {
      throw new Error(`context usagePlans.${plan} needs a positive rateLimit and a positive integer burstLimit`);
    }
    out[plan as PlanName] = { rateLimit: Number(l.rateLimit), burstLimit: Number(l.burstLimit) };
  }
  return out;
}

/** Stage config from context: `stage` (default dev) plus the documented overrides. */
export function loadStageConfig(node: Node): StageConfig {
  const stageRaw: unknown = node.tryGetContext('stage') ?? 'dev';
  if (!isStage(stageRaw)) throw new Error(`context stage must be dev, staging or prod, got ${String(stageRaw)}`);
  const base = STAGES[stageRaw];
  const origins = str(node, 'consoleOrigins');
  const preload = str(node, 'encoderPreloadModels');
  const alarmEmail = str(node, 'alarmEmail') ?? base.alarmEmail;
  return {
    ...base,
    // the runtime reads SIFT_CONSOLE_ORIGINS with the same parser: a bad entry fails the synth, not the console
    consoleOrigins: origins !== undefined ? parseOrigins(origins) : base.consoleOrigins,
    natGateways: num(node, 'natGateways', base.natGateways),
    encoderPreloadModels:
      preload !== undefined
        ? preload
            .split(',')
            .map((m) => m.trim())
            .filter(Boolean)
        : base.encoderPreloadModels,
    monthlyBudgetUsd: num(node, 'monthlyBudgetUsd', base.monthlyBudgetUsd),
    throttleScale: num(node, 'throttleScale', base.throttleScale),
    adaptiveSchedule: str(node, 'adaptiveSchedule') ?? base.adaptiveSchedule,
    trainingInstanceType: oneOf(node, 'trainingInstanceType', TRAINING_INSTANCE_TYPES, base.trainingInstanceType),
    usagePlans: usagePlans(node, base.usagePlans),
    encoder: {
      ...base.encoder,
      instanceType: oneOf(node, 'encoderInstanceType', GPU_INSTANCE_TYPES, base.encoder.instanceType),
      minTasks: num(node, 'encoderMinTasks', base.encoder.minTasks),
      maxTasks: num(node, 'encoderMaxTasks', base.encoder.maxTasks),
    },
    decoder: {
      ...base.decoder,
      instanceType: oneOf(node, 'decoderInstanceType', GPU_INSTANCE_TYPES, base.decoder.instanceType),
      minTasks: num(node, 'decoderMinTasks', base.decoder.minTasks),
      maxTasks: num(node, 'decoderMaxTasks', base.decoder.maxTasks),
    },
    ...(alarmEmail !== undefined ? { alarmEmail } : {}),
  };
}

/** Default limit for endpoints without a specific one (docs/reference/decisions.md#limits) (the service's own numbers, src/core/limits.ts). */
export const SPEC_DEFAULT_PER_MINUTE = perMinuteLimit('default');

/** Edge limit per IP (docs/reference/decisions.md#limits) (WAF rate-based rule), the same numbers the service enforces. */
export const SPEC_EDGE_LIMIT_PER_IP = EDGE_LIMIT.limit;
export const SPEC_EDGE_WINDOW_SECONDS = EDGE_LIMIT.windowSeconds;

import type { DecoderRuntime } from './decoder/runtime';
import type { HotPath } from './hotPath';
import type {
  BlobStore,
  EncoderRuntime,
  GatewayKeys,
  ModelBuildTracker,
  RateLimiter,
  RecordStore,
  UsageSink,
  WorkQueue,
} from './ports';
import type { TrainingLauncher } from './training/launcher';
import type { UsageMetrics } from './billing/usageMetrics';
import type { ExecutionProvider } from './extraction/types';
import type { DatasetFiles } from './datasets/validation';

export interface SiftConfig {
  stage: string;
  /** Largest JSON request body accepted, in bytes (413 above it). */
  maxBodyBytes: number;
  /** Largest dataset file accepted by processing, in bytes. */
  maxDatasetBytes: number;
  /** Largest single dataset row (one JSONL line / CSV record), in bytes. */
  maxRowBytes: number;
  /** Presigned upload URL lifetime, seconds. */
  uploadUrlTtlSeconds: number;
  /** How long stored inferences are kept (DynamoDB TTL), days. */
  inferenceRetentionDays: number;
  /** Session tokens' lifetime, seconds. */
  sessionTtlSeconds: number;
  /** Adaptive loop: reviewed traces (feedback) a project needs before a candidate is trained. */
  adaptiveMinExamples: number;
  /** The encoder that labels generated NER texts and the label-existing endpoints use when none is named. */
  defaultEncoder: string;
  /** Where a training job without its own `instance_type` ran (billing, GPU minutes): `local`, or the stage's SageMaker type. */
  trainingInstanceType: string;
  /** The decoder the generation workflow writes synthetic texts with. */
  generationModel: string;
  /** Models /ready loads before it says ready (the ECS encoder service's target-health check). */
  preloadModels: string[];
  /**
   * The execution provider the encoder's sessions must run on (`SIFT_REQUIRE_EXECUTION_PROVIDER`; the
   * ECS gateway task sets `cuda`): a preloaded model whose sessions fell back to another fails /ready
   * and is counted (metricNames.ts PROVIDER_FALLBACK_METRIC). Unset: a fallback is only a warning.
   */
  requireExecutionProvider?: ExecutionProvider | undefined;
  /**
   * Test-only request switches (`SIFT_TEST_SWITCHES=1`, never set in a deployment): the header
   * `x-sift-test-unconstrained: 1` drops a generation's output constraint, so a client test can show
   * it fails without constrained decoding.
   */
  testSwitches: boolean;
  /**
   * The exact origins (scheme://host[:port]) whose pages may call the API from a browser: each
   * response echoes an allowed Origin in Access-Control-Allow-Origin (src/http/cors.ts). Empty: no
   * cross-origin reads (the console served by the local server is same-origin).
   */
  consoleOrigins: string[];
}

export const defaultConfig: SiftConfig = {
  stage: 'local',
  maxBodyBytes: 10 * 1024 * 1024,
  maxDatasetBytes: 512 * 1024 * 1024,
  maxRowBytes: 1024 * 1024,
  uploadUrlTtlSeconds: 3600,
  inferenceRetentionDays: 90,
  sessionTtlSeconds: 12 * 3600,
  adaptiveMinExamples: 10,
  defaultEncoder: 'sift/gliner2-mini-v1',
  trainingInstanceType: 'local',
  preloadModels: [],
  generationModel: 'HuggingFaceTB/SmolLM2-135M-Instruct',
  testSwitches: false,
  consoleOrigins: [],
};

/** Everything a domain operation may touch. Built once per process by an adapter (local, Lambda, ECS). */
export type WorkflowKind = 'evaluation' | 'generation' | 'adaptive';

export interface WorkflowLauncher {
  /** Starts one execution; `name` makes retries of the same start idempotent. */
  start(kind: WorkflowKind, name: string, input: Record<string, unknown>): Promise<void>;
}

export interface Services {
  config: SiftConfig;
  records: RecordStore;
  blobs: BlobStore;
  queue: WorkQueue;
  rateLimiter: RateLimiter;
  usage: UsageSink;
  /** Finance's CloudWatch metrics (EMF): billed requests (through `usage`) and training minutes. */
  usageMetrics: UsageMetrics;
  /** Dataset processing's scratch files and row validator (adapters/fs/datasetFiles.ts). */
  datasetFiles: DatasetFiles;
  /** Training compute. Absent where this process cannot start jobs (they stay `requested`). */
  training?: TrainingLauncher;
  /** Per-process caches and write-behind of a long-lived server (hotPath.ts); absent in Lambdas. */
  hotPath?: HotPath;
  /** API Gateway keys of the teams' usage plans (AWS authorizer only; absent elsewhere). */
  gatewayKeys?: GatewayKeys;
  /** Starts Step Functions workflows (evaluation, generation): SFN on AWS, the same ASL in-process locally. */
  workflows?: WorkflowLauncher;
  /** The encoder engine (onnxruntime): extraction, evaluation shards, labelling. Absent where none runs. */
  encoder?: EncoderRuntime;
  /** The decoder backend and its prompt cache (llama.cpp or a vLLM upstream). Absent where none runs. */
  decoder?: DecoderRuntime;
  /** Models this installation is still building (local mode's background build); absent elsewhere. */
  modelBuilds?: ModelBuildTracker;
  now: () => Date;
}

export type { Principal } from './identity';

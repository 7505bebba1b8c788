/**
 * The ports of the domain core: what `src/core` needs from storage, queues, limits and usage,
 * stated in its own terms. Implementations live in `src/adapters/<tech>/` (DynamoDB, S3, SQS,
 * in-memory); the core never imports them (`npm run check:deps` keeps it so).
 */
import type { Readable } from 'node:stream';
import type {
  EncoderSchema,
  ExecutionProviderOutcome,
  InferOutput,
  LoadedEncoder,
  Precision,
  RuntimeExtractOptions,
} from './extraction/types';
import type { LimitClass, LimitRule, RateLimiter, WindowState } from './rateLimits';
import type { Logger } from './logger';
import type { Team } from './identity';

export type { LimitRule, Logger, RateLimiter, WindowState };

// ---------------------------------------------------------------------------------------------
// Records

/** Thrown by a store when a conditional write's condition does not hold (e.g. the name is taken). */
export class WriteConflict extends Error {
  constructor() {
    super('conditional write rejected');
    this.name = 'WriteConflict';
  }
}

/** Key attributes of a record; everything else on an item is the record itself. */
export interface ItemKeys {
  pk: string;
  sk: string;
  /** The secondary index (`gsi1`): a second partition and sort key the record is listed under. */
  gsi1pk?: string;
  gsi1sk?: string;
  /** Epoch seconds; the store deletes the item some time after. */
  expiresAt?: number;
}

/**
 * One test on the item as it is when the write happens. Comparisons with an attribute the item
 * lacks are false (as in DynamoDB).
 */
export type Clause =
  /** The item exists (`true`) or does not (`false`). */
  | { itemExists: boolean }
  /** The attribute is on the item (`true`) or not (`false`); a stored `null` is present. */
  | { attr: string; present: boolean }
  | { attr: string; equals: unknown }
  | { attr: string; lessThan: number }
  /** The attribute is a list (or set) holding `value`, or a string containing it. */
  | { attr: string; contains: unknown }
  | { anyOf: readonly Clause[] };

/** Every clause must hold (AND). Conditional writes fail with `WriteConflict` otherwise. */
export type Condition = readonly Clause[];

export interface QueryOptions {
  index?: 'gsi1';
  /** Sort keys starting with this prefix only. */
  beginsWith?: string;
  newestFirst?: boolean;
  /** Items read per page (before `filter`, as in DynamoDB: a page may come back shorter). */
  limit?: number;
  /** Where the previous page ended (`nextKey`); opaque to callers. */
  startKey?: Record<string, unknown>;
  filter?: Condition;
}

export interface QueryPage<T> {
  items: T[];
  nextKey?: Record<string, unknown>;
}

export interface RecordUpdate {
  set?: Record<string, unknown>;
  /** Atomic additions; a missing attribute counts from 0. */
  add?: Record<string, number>;
  remove?: string[];
  condition?: Condition;
}

/**
 * The records port: one key-value table of items under (pk, sk), with one secondary index. No
 * transactions: every invariant holds with single-item conditional writes. `update` without a
 * condition creates the item (counters).
 */
export interface RecordStore {
  get<T>(pk: string, sk: string, consistent?: boolean): Promise<T | undefined>;
  /** Puts a whole item. `ifAbsent` makes it a create that fails with WriteConflict on a duplicate. */
  put(keys: ItemKeys, record: object, opts?: { ifAbsent?: boolean; condition?: Condition }): Promise<void>;
  /**
   * Puts many whole items, unconditionally, in as few store calls as it can (DynamoDB: BatchWriteItem,
   * 25 per call): the per-request usage rows of a usage batch. Order is not kept; of two items with
   * the same keys the later one stays.
   */
  putAll(items: Array<{ keys: ItemKeys; record: object }>): Promise<void>;
  /** Sets / adds / removes attributes and returns the item as it is after the update. */
  update<T>(pk: string, sk: string, change: RecordUpdate): Promise<T>;
  delete(pk: string, sk: string, condition?: Condition): Promise<void>;
  query<T>(partition: string, opts?: QueryOptions): Promise<QueryPage<T>>;
  /** Every item of a partition (bounded by `max`, default 10,000), following pages. */
  queryAll<T>(partition: string, opts?: Omit<QueryOptions, 'limit' | 'startKey'> & { max?: number }): Promise<T[]>;
}

/** The condition of a create: no item under this key yet. */
export const ITEM_ABSENT: Condition = [{ itemExists: false }];
/** The condition of an update that must not create: the item is there. */
export const ITEM_EXISTS: Condition = [{ itemExists: true }];

// ---------------------------------------------------------------------------------------------
// Blobs

export interface BlobHead {
  size: number;
  contentType?: string;
  lastModified?: Date;
  /** The object's ETag as S3 reports it (quotes included); changes whenever the object is rewritten. */
  etag?: string;
}

/** What a presigned PUT binds besides its key: signed into the URL, so the storage enforces them. */
export interface PresignPutBounds {
  contentType?: string;
  /** The exact body size in bytes. */
  contentLength?: number;
}

/** Datasets, checkpoints, models and archives, under `/`-separated keys (storageLayout.ts). */
export interface BlobStore {
  put(key: string, body: string | Uint8Array | Readable, contentType?: string): Promise<void>;
  copy(fromKey: string, toKey: string): Promise<void>;
  /** The location outside this process (`s3://bucket/key`, the form SageMaker channels take). */
  uri(key: string): string;
  /** Uploads every file under `dir` to `prefix` + its relative path (`/`-separated); `skip` filters. */
  putDirectory(dir: string, prefix: string, skip?: (file: string) => boolean): Promise<void>;
  head(key: string): Promise<BlobHead | undefined>;
  stream(key: string): Promise<Readable>;
  getText(key: string): Promise<string>;
  /** Every key under `prefix`. */
  list(prefix: string): Promise<string[]>;
  deletePrefix(prefix: string): Promise<number>;
  /**
   * A URL that lets its holder PUT exactly this key until it expires; no API key needed. With
   * `contentLength` the storage refuses a body of any other length (the length is signed).
   */
  presignPut(key: string, expiresInSeconds: number, bounds?: PresignPutBounds): Promise<string>;
  presignGet(key: string, expiresInSeconds: number, downloadName?: string): Promise<string>;
}

// ---------------------------------------------------------------------------------------------
// Background work

/** Background work: validate an uploaded dataset version, apply usage a gateway could not write. */
export type WorkMessage =
  | { type: 'dataset.process'; team_id: string; dataset_name: string; version: number }
  /** Usage a gateway could not write: applied idempotently by the worker (src/core/billing/usageBatch.ts). */
  | { type: 'usage.apply'; batch: UsageBatch };

export type WorkHandler = (message: WorkMessage) => Promise<void>;

/** The queue port: SQS on AWS, an in-process queue in local mode. */
export interface WorkQueue {
  send(message: WorkMessage): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Limits and usage

/** What one billed request used (tokens, cost); the request itself is counted by the pipeline. */
export interface BilledUsage {
  inference_id: string;
  /** Route path, e.g. `/v1/chat/completions` (a CloudWatch dimension: never per customer). */
  endpoint: string;
  /** The model as the caller named it (a catalog id, project name or id, training job id): the per-request row shows it. */
  model: string;
  /**
   * What the team's usage breakdown is keyed by: the project id, else the training job id, else the
   * catalog id (`billedModel` in usage.ts). Absent: `model`.
   */
  model_id?: string;
  /** A readable name for `model_id`, where it has one (the project's name, as the request named it). */
  model_name?: string;
  /** The catalog model it runs on: finance's `model` dimension (bounded, never a customer's name). */
  base_model: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  cost_usd_micros: number;
}

export interface UsageEvent {
  team_id: string;
  /** ISO time the usage happened: it decides the UTC day and month counters. */
  at: string;
  limit_class: LimitClass;
  /** Requests counted (1 for each authenticated request; 0 on a billed event, already counted). */
  requests: number;
  billed?: BilledUsage;
}

/** A row of the per-request listing (GET /billing/usage/requests/list). */
export interface UsageRequestRow extends BilledUsage {
  at: string;
}

/** One counter item's update in a usage batch: atomic additions, plain attributes, and whether it only applies to a prepaid balance. */
export interface UsageBatchItem {
  sk: string;
  add: Record<string, number>;
  set?: Record<string, string>;
  prepaidOnly?: boolean;
}

/** One team's usage events as the exact writes that record them (billing/usageBatch.ts), kept in a spool or a queue message. */
export interface UsageBatch {
  /** `w<yyyymmdd>-<hex>`: the writer's UTC day bounds its sequence attributes (usageBatch.ts); `w<hex>` before that. */
  writer: string;
  seq: number;
  team_id: string;
  items: UsageBatchItem[];
  requests: UsageRequestRow[];
  /** Epoch seconds when the per-request rows expire (DynamoDB TTL). */
  expires_at: number;
}

/** Where usage events go (billing/ledger.ts turns them into idempotent counter writes). */
export interface UsageSink {
  /** Records one event. Billed usage is written at once (credit is spent before the team's next check). */
  add(event: UsageEvent): Promise<void>;
  /** Resolves once every event of the team added so far is written (or kept in the spool). */
  settled(teamId: string): Promise<void>;
  /** Writes everything pending and replays the spool; reads of the counters call it first. */
  flush(): Promise<void>;
  /**
   * Applies a batch kept earlier (a spool line, a `usage.apply` message) idempotently; what it can
   * no longer apply safely is reported and kept for reconciliation, never dropped.
   */
  applyKept(batch: UsageBatch): Promise<void>;
  close(): Promise<void>;
}

/** Where usage batches that could not be written are kept, so usage (money) is never dropped. */
export interface UsageSpool {
  /** Keeps a batch durably (resolves only once it is). */
  append(batch: UsageBatch): Promise<void>;
  /** Applies what is kept; keeps what still fails. Returns how many were applied and kept. */
  replay(apply: (batch: UsageBatch) => Promise<void>): Promise<{ applied: number; kept: number }>;
}

// ---------------------------------------------------------------------------------------------
// Model runtimes

/** The weights one encoder model identifier serves: a model directory in the blob store. */
export interface ServedEncoder {
  /** The identifier the caller sent (named in errors). */
  requested: string;
  /** Blob-store prefix of the model directory (`…/onnx/`, `tokenizer.json`, `manifest.json`). */
  prefix: string;
}

/**
 * The encoder engine of this process (`svc.encoder`; adapters/onnx/encoderRuntime.ts runs the GLiNER2
 * engine of src/encoder/): the one place extraction reaches it, so a wrapper (a cross-request
 * batcher) can stand in for it. Typed by what the core needs (extraction/types.ts); `M` is the
 * runtime's loaded model, which the core only hands back to `infer`.
 */
export interface EncoderRuntime<M extends LoadedEncoder = LoadedEncoder> {
  /** A local copy of the model's serving files, fetched from the blob store once. */
  localDir(blobs: BlobStore, model: ServedEncoder): Promise<string>;
  /** Shared sessions for a model directory (loaded once; least recently used released over a memory bound). */
  model(dir: string, precision?: Precision): Promise<M>;
  /** One request's extraction on a loaded model; concurrent requests may share one engine call (batched). */
  infer(model: M, texts: string[], schema: EncoderSchema, opts?: RuntimeExtractOptions): Promise<InferOutput>;
  loadedModels(): string[];
  /**
   * Where the sessions of each model directory this process has loaded run (kept after eviction: a
   * provider that failed to load stays failed for the process), so readiness can hold a model loaded
   * by a request, not only a preloaded one, to SIFT_REQUIRE_EXECUTION_PROVIDER. Absent: not known.
   */
  executionProviders?(): ReadonlyMap<string, ExecutionProviderOutcome>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Installation services (AWS API Gateway keys; local mode's model builds)

/** The API Gateway side: creates a key inside a plan's usage plan, deletes one. */
export interface GatewayKeys {
  create(team: Pick<Team, 'id' | 'plan'>): Promise<{ id: string; value: string }>;
  delete(id: string): Promise<void>;
}

export interface ModelBuildProgress {
  state: 'pending' | 'building' | 'failed';
  /** What the build is doing: `venv`, `starting`, `training`, `evaluated`, … */
  stage?: string;
  step?: number;
  total?: number;
  eta_seconds?: number;
  /** Why a failed build failed. */
  error?: string;
  /** Where the build writes its output. */
  log?: string;
}

export interface ModelBuildTracker {
  /** The build's progress for a model it has not finished; undefined when no build concerns it. */
  progress(modelId: string): ModelBuildProgress | undefined;
  /** Resolves once the training venv and these models are built (or no build concerns them); rejects with the reason when the build failed. */
  whenBuilt(modelIds: string[], signal?: AbortSignal): Promise<void>;
}

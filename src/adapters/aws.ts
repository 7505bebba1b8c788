import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { defaultConfig, type Services, type SiftConfig } from '../core/context';
import { configFromEnv } from './config';
import { UsageLedger } from '../core/billing/ledger';
import { QueueUsageSpool, type UsageSpool } from '../core/billing/spool';
import type { UsageMetrics } from '../core/billing/usageMetrics';
import { stdoutUsageMetrics } from './metrics/emfUsageMetrics';
import { createLogger, type Logger } from '../http/logger';
import type { BlobStore, WorkQueue } from '../core/ports';
import { LazyDecoderRuntime } from './decoder';
import { DynamoRateLimiter } from './dynamodb/rateLimiter';
import { DynamoRecordStore } from './dynamodb/recordStore';
import { MemoryRateLimiter } from './memory/rateLimiter';
import { localDatasetFiles } from './fs/datasetFiles';
import { OnnxEncoderRuntime } from './onnx/encoderRuntime';
import { S3BlobStore } from './s3/blobStore';
import { SqsWorkQueue } from './sqs/workQueue';

export interface AwsWiring {
  table: string;
  bucket: string;
  region?: string;
  /** Emulator endpoints (local mode, tests); unset on AWS. */
  dynamoEndpoint?: string;
  s3Endpoint?: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** The queue to hand background work to; SQS by URL when a string. */
  queue: WorkQueue | { sqsQueueUrl: string };
  /** `memory` for one long-lived process (local, ECS); `dynamodb` when many Lambdas share limits. */
  rateLimiter: 'memory' | 'dynamodb';
  /**
   * `buffered`: request counts are written each second and billed usage at once without holding the
   * response (long-lived processes only); `direct`: every event is written before the response.
   */
  usage?: 'direct' | 'buffered';
  /** Where usage that cannot be written is kept (default: the work queue). */
  usageSpool?: UsageSpool;
  /** Finance's EMF metrics (default: EMF lines on stdout). */
  usageMetrics?: UsageMetrics;
  logger?: Logger;
  config?: Partial<SiftConfig>;
  /**
   * The ports the runtime adds or replaces (launchers, hot path, gateway keys, model builds, …): the
   * graph is built once, with them, and returned read-only; nothing sets a port afterwards. As a
   * function, it gets the graph's own adapters (a test wraps a store in one that fails).
   */
  ports?: Ports;
}

/** Ports a runtime adds or replaces, given outright or made from the graph's own adapters. */
export type Ports = Partial<Services> | ((built: AwsServices) => Partial<Services>);

/** The S3 client every blob store uses (an `endpoint` means an emulator: path-style addressing). */
export function createS3Client(o: {
  region?: string;
  credentials?: { accessKeyId: string; secretAccessKey: string };
  endpoint?: string;
}): S3Client {
  return new S3Client({
    region: o.region ?? process.env.AWS_REGION ?? 'us-east-1',
    ...(o.credentials ? { credentials: o.credentials } : {}),
    // WHEN_REQUIRED: otherwise presigned PUTs carry the CRC32 of an empty body and S3 rejects real uploads.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    ...(o.endpoint ? { endpoint: o.endpoint, forcePathStyle: true } : {}),
  });
}

/** The service graph with its AWS adapters in view (set-up code: creating the table and bucket, SageMaker URIs, tests). */
export type AwsServices = Services & { records: DynamoRecordStore; blobs: S3BlobStore };

/**
 * Builds the service graph from AWS SDK clients: the same code against AWS or the emulators. The
 * graph is finished here (the runtime's ports come in `w.ports`) and frozen.
 */
export function createServices(w: AwsWiring): Readonly<AwsServices> {
  const region = w.region ?? process.env.AWS_REGION ?? 'us-east-1';
  const common = { region, ...(w.credentials ? { credentials: w.credentials } : {}) };
  const dynamo = new DynamoDBClient({ ...common, ...(w.dynamoEndpoint ? { endpoint: w.dynamoEndpoint } : {}) });
  const s3 = createS3Client({
    region,
    ...(w.credentials ? { credentials: w.credentials } : {}),
    ...(w.s3Endpoint ? { endpoint: w.s3Endpoint } : {}),
  });
  const records = new DynamoRecordStore(dynamo, w.table);
  const queue = 'sqsQueueUrl' in w.queue ? new SqsWorkQueue(new SQSClient(common), w.queue.sqsQueueUrl) : w.queue;
  const now = () => new Date();
  const config = { ...defaultConfig, ...configFromEnv(), ...(w.config ?? {}) };
  const usageMetrics = w.usageMetrics ?? stdoutUsageMetrics();
  const services: AwsServices = {
    config,
    records,
    blobs: new S3BlobStore(s3, w.bucket),
    queue,
    rateLimiter: w.rateLimiter === 'memory' ? new MemoryRateLimiter() : new DynamoRateLimiter(records),
    usage: new UsageLedger({
      records,
      spool: w.usageSpool ?? new QueueUsageSpool(queue),
      metrics: usageMetrics,
      logger: w.logger ?? createLogger(),
      mode: w.usage === 'buffered' ? 'background' : 'write-through',
      retentionDays: config.inferenceRetentionDays,
    }),
    usageMetrics,
    datasetFiles: localDatasetFiles,
    // both start nothing until first used: a process that never runs a model loads none
    encoder: new OnnxEncoderRuntime(),
    decoder: new LazyDecoderRuntime(),
    now,
  };
  const ports = typeof w.ports === 'function' ? w.ports(services) : w.ports;
  return Object.freeze({ ...services, ...ports } as AwsServices);
}

/**
 * Wiring for Lambda and ECS, from the environment the CDK stack sets. Only the table is required:
 * the authorizer and the SageMaker-event function get no bucket or queue, and must not need one.
 */
export function servicesFromEnv(
  rateLimiter: AwsWiring['rateLimiter'],
  ports: Partial<Services> = {},
): Readonly<AwsServices> {
  const table = process.env.SIFT_TABLE;
  if (!table) throw new Error('environment variable SIFT_TABLE is not set');
  const bucket = process.env.SIFT_BUCKET;
  const queueUrl = process.env.SIFT_QUEUE_URL;
  return createServices({
    table,
    bucket: bucket ?? 'unset',
    queue: queueUrl ? { sqsQueueUrl: queueUrl } : unavailable<WorkQueue>('SIFT_QUEUE_URL'),
    rateLimiter,
    // a long-lived gateway (memory limits) keeps request counts a second; a Lambda writes before answering
    usage: rateLimiter === 'memory' ? 'buffered' : 'direct',
    config: { stage: process.env.SIFT_STAGE ?? 'prod' },
    ports: { ...(bucket ? {} : { blobs: unavailable<BlobStore>('SIFT_BUCKET') }), ...ports },
  });
}

/** Stands in for a dependency this function was deployed without; any use says which is missing. */
function unavailable<T extends object>(variable: string): T {
  return new Proxy({} as T, {
    get(_target, prop) {
      if (prop === 'then') return undefined; // not a thenable
      throw new Error(`${variable} is not set for this function, so ${String(prop)} is unavailable`);
    },
  });
}

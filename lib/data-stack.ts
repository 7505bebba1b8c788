/**
 * Stateful resources: the single DynamoDB table, the datasets/artifacts
 * bucket, the work queue with its dead-letter queue, and the customer-managed
 * KMS key that encrypts all of them.
 */
import { Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import type { StageConfig } from './config';
import { publishDataExport } from './data-refs';

export interface DataStackProps extends StackProps {
  readonly config: StageConfig;
}

import { BUCKET_PREFIXES } from '../src/core/storageLayout';
import { UPLOAD_CORS } from '../src/http/cors';

/** S3 key prefixes shared by the API, the workers and the training jobs: defined by the code that writes the keys. */
export { BUCKET_PREFIXES } from '../src/core/storageLayout';

export class DataStack extends Stack {
  readonly key: kms.Key;
  readonly table: dynamodb.TableV2;
  /** The key encrypting the table; grant it alongside table grants. */
  readonly tableKey: kms.Key;
  readonly bucket: s3.Bucket;
  readonly accessLogBucket: s3.Bucket;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;

  constructor(scope: Construct, id: string, props: DataStackProps) {
    super(scope, id, props);
    const { config } = props;
    const removalPolicy = config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    // CloudFormation deletes a bucket only once it is empty, versions included ("DeletionPolicy
    // attribute", https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html):
    // a removable bucket empties itself first, or `cdk destroy` ends DELETE_FAILED.
    const autoDeleteObjects = !config.retainData;

    this.key = new kms.Key(this, 'DataKey', {
      description: `Sift ${config.stage}: records, datasets, artifacts and queues`,
      enableKeyRotation: true,
      removalPolicy: config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
      pendingWindow: Duration.days(config.retainData ? 30 : 7),
    });

    this.table = new dynamodb.TableV2(this, 'Records', {
      partitionKey: { name: 'pk', type: dynamodb.AttributeType.STRING },
      sortKey: { name: 'sk', type: dynamodb.AttributeType.STRING },
      billing: dynamodb.Billing.onDemand(),
      // Customer-managed key: set on the L1 below, because TableV2 cannot render
      // replica SSE settings in a region-agnostic stack.
      encryption: dynamodb.TableEncryptionV2.dynamoOwnedKey(),
      timeToLiveAttribute: 'expiresAt',
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: config.retainData,
      removalPolicy,
      globalSecondaryIndexes: [
        {
          indexName: 'gsi1',
          partitionKey: { name: 'gsi1pk', type: dynamodb.AttributeType.STRING },
          sortKey: { name: 'gsi1sk', type: dynamodb.AttributeType.STRING },
        },
      ],
    });

    const cfnTable = this.table.node.defaultChild as dynamodb.CfnGlobalTable;
    cfnTable.addPropertyOverride('SSESpecification', { SSEEnabled: true, SSEType: 'KMS' });
    cfnTable.addPropertyOverride('Replicas.0.SSESpecification', { KMSMasterKeyId: this.key.keyArn });
    // Grants on the table must include the key (TableV2 only adds them for its own CMK setting).
    this.tableKey = this.key;

    // Server access logs cannot be delivered to an SSE-KMS bucket, so the log
    // bucket uses SSE-S3; it is private, TLS-only and expires its objects.
    this.accessLogBucket = new s3.Bucket(this, 'AccessLogs', {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
      versioned: false,
      removalPolicy,
      autoDeleteObjects,
      lifecycleRules: [
        { id: 'expire-logs', expiration: Duration.days(config.retainData ? 365 : 90) },
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
      ],
    });

    this.bucket = new s3.Bucket(this, 'Blobs', {
      encryption: s3.BucketEncryption.KMS,
      encryptionKey: this.key,
      bucketKeyEnabled: true,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      minimumTLSVersion: 1.2,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      versioned: true,
      serverAccessLogsBucket: this.accessLogBucket,
      serverAccessLogsPrefix: 'blobs/',
      removalPolicy,
      autoDeleteObjects,
      ...(config.consoleOrigins.length > 0
        ? {
            cors: [
              {
                // Presigned PUT uploads straight from the browser console.
                // the rule the local S3 front applies too (src/http/cors.ts UPLOAD_CORS)
                allowedMethods: UPLOAD_CORS.methods.map((m) => m as s3.HttpMethods),
                allowedOrigins: config.consoleOrigins,
                allowedHeaders: [...UPLOAD_CORS.headers],
                exposedHeaders: [...UPLOAD_CORS.exposeHeaders],
                maxAge: UPLOAD_CORS.maxAgeSeconds,
              },
            ],
          }
        : {}),
      lifecycleRules: [
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
        { id: 'expire-noncurrent-versions', noncurrentVersionExpiration: Duration.days(30) },
        { id: 'expire-generation-scratch', prefix: BUCKET_PREFIXES.generation, expiration: Duration.days(14) },
      ],
    });

    // S3 -> EventBridge notifications (dataset uploads) set on the L1: the L2
    // `eventBridgeEnabled` deploys a custom-resource Lambda for the same setting.
    (this.bucket.node.defaultChild as s3.CfnBucket).notificationConfiguration = {
      eventBridgeConfiguration: { eventBridgeEnabled: true },
    };

    this.deadLetterQueue = new sqs.Queue(this, 'WorkDlq', {
      encryption: sqs.QueueEncryption.KMS,
      encryptionMasterKey: this.key,
      dataKeyReuse: Duration.hours(1),
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy,
    });

    this.queue = new sqs.Queue(this, 'WorkQueue', {
      encryption: sqs.QueueEncryption.KMS,
      encryptionMasterKey: this.key,
      dataKeyReuse: Duration.hours(1),
      enforceSSL: true,
      // Six times the worker timeout, as AWS recommends for Lambda consumers.
      visibilityTimeout: Duration.minutes(90),
      retentionPeriod: Duration.days(4),
      deadLetterQueue: { queue: this.deadLetterQueue, maxReceiveCount: 3 },
      removalPolicy,
    });

    const exp = (name: Parameters<typeof publishDataExport>[2], value: string): void =>
      publishDataExport(this, config.stage, name, value);
    exp('table-arn', this.table.tableArn);
    exp('table-name', this.table.tableName);
    exp('key-arn', this.key.keyArn);
    exp('bucket-arn', this.bucket.bucketArn);
    exp('bucket-name', this.bucket.bucketName);
    exp('queue-arn', this.queue.queueArn);
    exp('queue-url', this.queue.queueUrl);
    exp('queue-name', this.queue.queueName);
    exp('dlq-arn', this.deadLetterQueue.queueArn);
    exp('dlq-name', this.deadLetterQueue.queueName);
  }
}

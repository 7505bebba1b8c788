/**
 * Explicit, stage-scoped CloudFormation exports of the data stack, and the
 * imported constructs other stacks use instead of direct cross-stack tokens.
 *
 * Why: auto-generated exports (`SiftDevData:ExportsOutputFnGetAtt...`) lock the
 * producer stack in surprising ways and make IAM findings unreadable. Named
 * exports (`sift-<stage>-table-arn`) are a documented contract, and the cdk-nag
 * acknowledgements below can name the exact resources they cover.
 */
import { CfnOutput, Fn, type Stack } from 'aws-cdk-lib';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import type * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct, IConstruct } from 'constructs';
import { acknowledge, type NagAck } from './nag';

export const DATA_EXPORTS = [
  'table-arn',
  'table-name',
  'key-arn',
  'bucket-arn',
  'bucket-name',
  'queue-arn',
  'queue-url',
  'queue-name',
  'dlq-arn',
  'dlq-name',
] as const;
export type DataExport = (typeof DATA_EXPORTS)[number];

export function dataExportName(stage: string, name: DataExport): string {
  return `sift-${stage}-${name}`;
}

export function publishDataExport(stack: Stack, stage: string, name: DataExport, value: string): void {
  const id = `Export${name.replace(/(^|-)(\w)/g, (_m, _d, c: string) => c.toUpperCase())}`;
  new CfnOutput(stack, id, { value, exportName: dataExportName(stage, name) });
}

export interface DataRefs {
  readonly key: kms.IKey;
  readonly table: dynamodb.ITableV2;
  readonly tableName: string;
  readonly bucket: s3.IBucket;
  readonly queue: sqs.IQueue;
  readonly deadLetterQueue: sqs.IQueue;
  /** Queue names, for CloudWatch metrics. */
  readonly queueName: string;
  readonly deadLetterQueueName: string;
}

/** Imports the data stack's resources into `scope` through the named exports. */
export function importDataRefs(scope: Construct, stage: string): DataRefs {
  const v = (name: DataExport): string => Fn.importValue(dataExportName(stage, name));
  const key = kms.Key.fromKeyArn(scope, 'DataKey', v('key-arn'));
  const table = dynamodb.TableV2.fromTableAttributes(scope, 'Records', {
    tableArn: v('table-arn'),
    encryptionKey: key,
    globalIndexes: ['gsi1'],
  });
  const bucket = s3.Bucket.fromBucketAttributes(scope, 'Blobs', {
    bucketArn: v('bucket-arn'),
    bucketName: v('bucket-name'),
    encryptionKey: key,
  });
  const queue = sqs.Queue.fromQueueAttributes(scope, 'WorkQueue', {
    queueArn: v('queue-arn'),
    queueUrl: v('queue-url'),
    queueName: v('queue-name'),
    keyArn: key.keyArn,
  });
  const deadLetterQueue = sqs.Queue.fromQueueAttributes(scope, 'WorkDlq', {
    queueArn: v('dlq-arn'),
    queueName: v('dlq-name'),
    keyArn: key.keyArn,
  });
  return {
    key,
    table,
    tableName: v('table-name'),
    bucket,
    queue,
    deadLetterQueue,
    queueName: v('queue-name'),
    deadLetterQueueName: v('dlq-name'),
  };
}

/**
 * cdk-nag IAM5 findings produced by the CDK grant helpers on the Sift data
 * resources, each with its reason. `grants` says which grants the principal got.
 */
export function acknowledgeDataGrants(
  scope: IConstruct | iam.IRole,
  stage: string,
  grants: { table?: boolean; bucket?: 'read' | 'readwrite'; bucketPrefixes?: string[]; kms?: boolean },
): void {
  const acks: NagAck[] = [];
  if (grants.table) {
    acks.push({
      id: `AwsSolutions-IAM5[Resource::${dataExportName(stage, 'table-arn')}/index/*]`,
      reason:
        "Queries use the gsi1 index of the one Sift records table; the wildcard covers that table's indexes only.",
    });
  }
  if (grants.bucket) {
    acks.push(
      {
        id: 'AwsSolutions-IAM5[Action::s3:GetBucket*]',
        reason: 'CDK bucket grant: bucket-level reads (location, versioning) on the one Sift bucket only.',
      },
      {
        id: 'AwsSolutions-IAM5[Action::s3:GetObject*]',
        reason: 'CDK bucket grant: object reads incl. versions and attributes, Sift bucket only.',
      },
      {
        id: 'AwsSolutions-IAM5[Action::s3:List*]',
        reason: 'CDK bucket grant: listing dataset versions and checkpoints in the Sift bucket.',
      },
    );
  }
  if (grants.bucket && !grants.bucketPrefixes) {
    acks.push({
      id: `AwsSolutions-IAM5[Resource::${dataExportName(stage, 'bucket-arn')}/*]`,
      reason:
        'Object keys are generated per team at runtime (datasets/<team>/..., jobs/<team>/...); scoped to the Sift bucket.',
    });
  }
  if (grants.bucket === 'readwrite') {
    acks.push(
      {
        id: 'AwsSolutions-IAM5[Action::s3:Abort*]',
        reason: 'CDK bucket grant: AbortMultipartUpload for abandoned multipart dataset/checkpoint uploads.',
      },
      {
        id: 'AwsSolutions-IAM5[Action::s3:DeleteObject*]',
        reason:
          'CDK read-write grant includes deletes: DELETE endpoints remove datasets and checkpoints; training rotates its checkpoints.',
      },
    );
  }
  for (const prefix of grants.bucketPrefixes ?? []) {
    acks.push({
      id: `AwsSolutions-IAM5[Resource::${dataExportName(stage, 'bucket-arn')}/${prefix}*]`,
      reason: `Object keys under ${prefix} are generated at runtime per team and job; the grant is limited to that prefix of the Sift bucket.`,
    });
  }
  if (grants.kms) {
    acks.push(
      {
        id: 'AwsSolutions-IAM5[Action::kms:GenerateDataKey*]',
        reason: 'CDK grant on the Sift data key only: SSE-KMS writes need the GenerateDataKey variants.',
      },
      {
        id: 'AwsSolutions-IAM5[Action::kms:ReEncrypt*]',
        reason: 'CDK grant on the Sift data key only: ReEncryptFrom/To for copies of SSE-KMS objects.',
      },
    );
  }
  acknowledge(scope, ...acks);
}

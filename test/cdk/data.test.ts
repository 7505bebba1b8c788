/** Data stack: encryption, public access, TLS, retention and lifecycle of the stateful resources. */
import { Stack } from 'aws-cdk-lib';
import { Match } from 'aws-cdk-lib/assertions';
import { DATA_EXPORTS, dataExportName } from '../../lib/data-refs';
import { buildApp, resourcesOfType } from './helpers';

const built = buildApp();
const t = built.template(built.stacks.data);
let prodBuilt: ReturnType<typeof buildApp> | undefined;
const prod = () => (prodBuilt ??= buildApp({ stage: 'prod' }));

describe('records table', () => {
  it('is one on-demand table with pk/sk, gsi1, TTL expiresAt and PITR', () => {
    t.resourceCountIs('AWS::DynamoDB::GlobalTable', 1);
    t.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      BillingMode: 'PAY_PER_REQUEST',
      KeySchema: [
        { AttributeName: 'pk', KeyType: 'HASH' },
        { AttributeName: 'sk', KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: [
        Match.objectLike({
          IndexName: 'gsi1',
          KeySchema: [
            { AttributeName: 'gsi1pk', KeyType: 'HASH' },
            { AttributeName: 'gsi1sk', KeyType: 'RANGE' },
          ],
        }),
      ],
      TimeToLiveSpecification: { AttributeName: 'expiresAt', Enabled: true },
      Replicas: [Match.objectLike({ PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } })],
    });
  });

  it('is encrypted with the customer-managed, rotating data key', () => {
    const [keyId] = Object.keys(resourcesOfType(t, 'AWS::KMS::Key'));
    t.hasResourceProperties('AWS::KMS::Key', { EnableKeyRotation: true });
    t.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
      SSESpecification: { SSEEnabled: true, SSEType: 'KMS' },
      Replicas: [Match.objectLike({ SSESpecification: { KMSMasterKeyId: { 'Fn::GetAtt': [keyId, 'Arn'] } } })],
    });
  });
});

describe('datasets/artifacts bucket', () => {
  const buckets = resourcesOfType(t, 'AWS::S3::Bucket');
  const blobsId = Object.keys(buckets).find((id) => id.startsWith('Blobs'))!;

  it('blocks all public access on every bucket', () => {
    for (const b of Object.values(buckets)) {
      expect(b.Properties?.PublicAccessBlockConfiguration).toEqual({
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      });
    }
  });

  it('encrypts with the data key (SSE-KMS, bucket key) and logs access to the log bucket', () => {
    expect(buckets[blobsId]?.Properties).toMatchObject({
      BucketEncryption: {
        ServerSideEncryptionConfiguration: [
          {
            BucketKeyEnabled: true,
            ServerSideEncryptionByDefault: { SSEAlgorithm: 'aws:kms', KMSMasterKeyID: expect.anything() },
          },
        ],
      },
      LoggingConfiguration: { DestinationBucketName: expect.anything(), LogFilePrefix: 'blobs/' },
      VersioningConfiguration: { Status: 'Enabled' },
      NotificationConfiguration: { EventBridgeConfiguration: { EventBridgeEnabled: true } },
    });
  });

  it('denies non-TLS access on every bucket', () => {
    const policies = Object.values(resourcesOfType(t, 'AWS::S3::BucketPolicy'));
    expect(policies).toHaveLength(Object.keys(buckets).length);
    for (const p of policies) {
      expect(p.Properties?.PolicyDocument).toMatchObject({
        Statement: expect.arrayContaining([
          expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      });
    }
  });

  it('aborts incomplete multipart uploads after one day', () => {
    for (const b of Object.values(buckets)) {
      expect(b.Properties?.LifecycleConfiguration).toMatchObject({
        Rules: expect.arrayContaining([
          expect.objectContaining({ AbortIncompleteMultipartUpload: { DaysAfterInitiation: 1 }, Status: 'Enabled' }),
        ]),
      });
    }
  });

  it('allows presigned PUT from the console origins only', () => {
    expect(buckets[blobsId]?.Properties?.CorsConfiguration).toEqual({
      CorsRules: [
        expect.objectContaining({
          AllowedMethods: expect.arrayContaining(['PUT']),
          AllowedOrigins: built.config.consoleOrigins,
        }),
      ],
    });
  });

  it('has no CORS rule when no console origin is configured (prod default)', () => {
    const bucketsProd = resourcesOfType(prod().template(prod().stacks.data), 'AWS::S3::Bucket');
    for (const b of Object.values(bucketsProd)) expect(b.Properties?.CorsConfiguration).toBeUndefined();
  });
});

describe('work queue', () => {
  it('encrypts both queues with the data key and redrives to the DLQ after 3 receives', () => {
    const queues = resourcesOfType(t, 'AWS::SQS::Queue');
    expect(Object.keys(queues)).toHaveLength(2);
    for (const q of Object.values(queues)) expect(q.Properties?.KmsMasterKeyId).toBeDefined();
    t.hasResourceProperties('AWS::SQS::Queue', {
      RedrivePolicy: { deadLetterTargetArn: Match.anyValue(), maxReceiveCount: 3 },
    });
  });

  it('denies non-TLS access to the queues', () => {
    const policies = Object.values(resourcesOfType(t, 'AWS::SQS::QueuePolicy'));
    expect(policies.length).toBe(2);
    for (const p of policies) {
      expect(JSON.stringify(p.Properties?.PolicyDocument)).toContain('aws:SecureTransport');
    }
  });
});

it('publishes the stage-scoped exports other stacks import', () => {
  const outputs = t.findOutputs('*');
  const names = Object.values(outputs).map((o) => (o as { Export?: { Name: string } }).Export?.Name);
  for (const e of DATA_EXPORTS) expect(names).toContain(dataExportName('dev', e));
});

/**
 * "DeletionPolicy attribute" (https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-deletionpolicy.html):
 * with Delete, "you must delete all objects in the bucket for deletion to succeed" — a bucket
 * CloudFormation may delete must empty itself first (CDK's auto-delete custom resource), or
 * `cdk destroy` ends DELETE_FAILED on the first object (logs arrive in every log bucket).
 */
describe('cdk destroy', () => {
  const bucketsOf = (app: ReturnType<typeof buildApp>) =>
    app.app.node.children
      .filter((c): c is Stack => c instanceof Stack)
      .flatMap((stack) => {
        const tpl = app.template(stack);
        const emptied = Object.values(resourcesOfType(tpl, 'Custom::S3AutoDeleteObjects')).map((r) =>
          JSON.stringify((r.Properties as { BucketName: unknown }).BucketName),
        );
        return Object.entries(resourcesOfType(tpl, 'AWS::S3::Bucket')).map(([id, b]) => ({
          bucket: `${stack.stackName}/${id}`,
          deletionPolicy: (b as { DeletionPolicy?: string }).DeletionPolicy,
          emptiedFirst: emptied.includes(JSON.stringify({ Ref: id })),
        }));
      });

  it('in dev, every bucket CloudFormation deletes empties itself first', () => {
    const buckets = bucketsOf(built);
    expect(buckets.length).toBeGreaterThanOrEqual(4);
    expect(buckets.filter((b) => b.deletionPolicy === 'Delete' && !b.emptiedFirst)).toEqual([]);
    expect(buckets.filter((b) => b.deletionPolicy !== 'Delete')).toEqual([]);
  });

  it('in prod, every bucket is retained and none is emptied', () => {
    for (const b of bucketsOf(prod())) expect(b).toMatchObject({ deletionPolicy: 'Retain', emptiedFirst: false });
  });
});

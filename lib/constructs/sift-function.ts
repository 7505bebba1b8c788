/**
 * SiftFunction: the one way this app builds a Lambda function.
 *
 * - `nodejs22.x` on arm64, ESM bundle built by the local esbuild (never Docker),
 *   source maps, X-Ray tracing, JSON logs into an explicit log group with retention;
 * - an explicit role whose only baseline permission is writing to that log group
 *   (no AWSLambdaBasicExecutionRole), so every other permission is a visible grant;
 * - an esbuild metafile checked after bundling: onnxruntime and native addons
 *   must never reach a Lambda bundle (they run on ECS / in local mode);
 * - the AWS SDK bundled at the version the tests run (not the runtime's copy).
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import * as nodejs from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { join } from 'node:path';
import { BUNDLE_GUARD, LAMBDAS_DIR, LOCK_FILE, REPO_ROOT } from '../paths';
import { acknowledge } from '../nag';

export const LAMBDA_RUNTIME = lambda.Runtime.NODEJS_22_X;

export interface SiftFunctionProps {
  /** File name under `lambdas/`, e.g. `api.ts`. */
  readonly entry: string;
  /** Powertools service name. */
  readonly service: string;
  readonly stage: string;
  readonly description: string;
  readonly environment?: Record<string, string>;
  readonly timeout?: Duration;
  readonly memorySize?: number;
  readonly logRetentionDays: number;
  readonly retainLogs?: boolean;
  readonly reservedConcurrentExecutions?: number;
  readonly vpc?: ec2.IVpc;
  readonly vpcSubnets?: ec2.SubnetSelection;
  readonly securityGroups?: ec2.ISecurityGroup[];
}

const RETENTION: Record<number, logs.RetentionDays> = {
  7: logs.RetentionDays.ONE_WEEK,
  14: logs.RetentionDays.TWO_WEEKS,
  30: logs.RetentionDays.ONE_MONTH,
  90: logs.RetentionDays.THREE_MONTHS,
  180: logs.RetentionDays.SIX_MONTHS,
  365: logs.RetentionDays.ONE_YEAR,
};

export function retentionDays(days: number): logs.RetentionDays {
  const r = RETENTION[days];
  if (r === undefined)
    throw new Error(`unsupported log retention ${days} days (use ${Object.keys(RETENTION).join(', ')})`);
  return r;
}

/** esbuild options shared by every Lambda bundle (also used by the bundle test). */
export const BUNDLING: nodejs.BundlingOptions = {
  format: nodejs.OutputFormat.ESM,
  target: 'node22',
  platform: 'node',
  mainFields: ['module', 'main'],
  minify: true,
  sourceMap: true,
  sourcesContent: false,
  metafile: true,
  // The AWS SDK is bundled: the functions run the SDK version package-lock.json pins and the tests
  // run, not whichever v3 release the Lambda runtime ships that month (NodejsFunction's default
  // leaves @aws-sdk/* out on Node 18+). Only the local/ECS inference engines stay out, reached by
  // lazy imports alone (the afterBundling guard rejects static imports of them).
  externalModules: ['onnxruntime-node', 'node-llama-cpp', 'tokenizers'],
  // ESM bundles still meet CommonJS dependencies that call require().
  banner:
    "import { createRequire as __siftCreateRequire } from 'node:module'; const require = __siftCreateRequire(import.meta.url);",
  forceDockerBundling: false,
  tsconfig: join(REPO_ROOT, 'tsconfig.json'),
  commandHooks: {
    beforeBundling: () => [],
    beforeInstall: () => [],
    afterBundling: (_inputDir: string, outputDir: string) => [`node "${BUNDLE_GUARD}" "${outputDir}"`],
  },
};

export class SiftFunction extends Construct {
  readonly fn: nodejs.NodejsFunction;
  readonly role: iam.Role;
  readonly logGroup: logs.LogGroup;

  constructor(scope: Construct, id: string, props: SiftFunctionProps) {
    super(scope, id);
    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: retentionDays(props.logRetentionDays),
      removalPolicy: props.retainLogs ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    this.role = new iam.Role(this, 'Role', {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Sift ${props.stage} ${props.service} Lambda`,
    });
    this.role.addToPolicy(
      new iam.PolicyStatement({
        actions: ['logs:CreateLogStream', 'logs:PutLogEvents'],
        resources: [this.logGroup.logGroupArn],
      }),
    );
    if (props.vpc) {
      // ENI management for VPC functions; AWS documents these actions as resource-agnostic.
      this.role.addToPolicy(
        new iam.PolicyStatement({
          actions: [
            'ec2:CreateNetworkInterface',
            'ec2:DescribeNetworkInterfaces',
            'ec2:DeleteNetworkInterface',
            'ec2:AssignPrivateIpAddresses',
            'ec2:UnassignPrivateIpAddresses',
          ],
          resources: ['*'],
        }),
      );
    }

    this.fn = new nodejs.NodejsFunction(this, 'Function', {
      entry: join(LAMBDAS_DIR, props.entry),
      handler: 'handler',
      runtime: LAMBDA_RUNTIME,
      architecture: lambda.Architecture.ARM_64,
      description: props.description,
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? Duration.seconds(30),
      tracing: lambda.Tracing.ACTIVE,
      role: this.role,
      logGroup: this.logGroup,
      loggingFormat: lambda.LoggingFormat.JSON,
      applicationLogLevelV2: lambda.ApplicationLogLevel.INFO,
      systemLogLevelV2: lambda.SystemLogLevel.WARN,
      depsLockFilePath: LOCK_FILE,
      projectRoot: REPO_ROOT,
      bundling: BUNDLING,
      ...(props.reservedConcurrentExecutions !== undefined
        ? { reservedConcurrentExecutions: props.reservedConcurrentExecutions }
        : {}),
      ...(props.vpc ? { vpc: props.vpc, vpcSubnets: props.vpcSubnets, securityGroups: props.securityGroups } : {}),
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        SIFT_STAGE: props.stage,
        POWERTOOLS_SERVICE_NAME: props.service,
        POWERTOOLS_METRICS_NAMESPACE: 'Sift',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        ...props.environment,
      },
    });
    acknowledge(this.fn, {
      id: 'AwsSolutions-L1',
      reason:
        'Pinned to nodejs22.x on purpose: the code is developed and tested on Node 20/22; moving to a newer runtime is a tested upgrade, not an automatic one.',
    });
    acknowledge(this.role, {
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) and, for VPC functions, EC2 network-interface actions do not support resource-level permissions.',
    });
  }
}

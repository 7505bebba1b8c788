/**
 * Public API: API Gateway REST (regional) in front of
 * - the control-plane Lambda (`lambdas/api.ts`, one router behind `{proxy+}`), and
 * - the inference data plane (ECS GPU services behind an internal ALB) through
 *   a VPC link V2, with response streaming and a 15-minute timeout.
 *
 * Also: the API-key authorizers, the SQS worker, per-method throttles from
 * SPEC "Limits", access logs, WAF with the per-IP edge limit, CORS, and
 * gateway responses in the SPEC `{detail}` error shape. Routes, their
 * authorizers and throttles come from the service's route table
 * (src/http/routeTable.ts, through lib/gateway-routes.ts).
 */
import { ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack, type CfnElement, type StackProps } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambdaEvents from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import type { Construct } from 'constructs';
import {
  SPEC_DEFAULT_PER_MINUTE,
  SPEC_EDGE_LIMIT_PER_IP,
  SPEC_EDGE_WINDOW_SECONDS,
  type StageConfig,
} from './config';
import { ApiAuthorizers } from './constructs/api-authorizers';
import { ApiRoutes, type InferenceEndpoint } from './constructs/api-routes';
import { ApiWaf } from './constructs/api-waf';
import { addGatewayResponses } from './constructs/gateway-responses';
import { allocateSkippingGroups } from './constructs/resource-group';
import { SiftFunction, retentionDays } from './constructs/sift-function';
import { UsagePlans } from './constructs/usage-plans';
import { gatewayMethods } from './gateway-routes';
import { acknowledgeDataGrants, importDataRefs } from './data-refs';
import { acknowledge } from './nag';

export type { InferenceEndpoint } from './constructs/api-routes';

/** Workflows the control plane starts (from the workflow stack). */
export interface WorkflowHandles {
  readonly training: sfn.IStateMachine;
  readonly generation: sfn.IStateMachine;
  readonly evaluation: sfn.IStateMachine;
  readonly adaptive: sfn.IStateMachine;
  /** Name prefix of SageMaker training jobs started by the training workflow. */
  readonly trainingJobPrefix: string;
}

export interface ApiStackProps extends StackProps {
  readonly config: StageConfig;
  readonly inference?: InferenceEndpoint;
  readonly workflows?: WorkflowHandles;
}

/** Stage method throttle for a SPEC per-minute limit (rate per second, burst = 10 s worth). */
export function throttleFor(perMinute: number, scale: number): { rateLimit: number; burstLimit: number } {
  const rateLimit = Math.round((perMinute / 60) * scale * 100) / 100;
  const burstLimit = Math.max(1, Math.ceil((perMinute / 6) * scale));
  return { rateLimit, burstLimit };
}

export class ApiStack extends Stack {
  readonly api: apigw.RestApi;
  readonly apiFunction: SiftFunction;
  readonly authorizerFunction: SiftFunction;
  readonly workerFunction: SiftFunction;
  readonly webAcl: wafv2.CfnWebACL;
  readonly webAclName: string;
  readonly accessLogs: logs.LogGroup;

  constructor(scope: Construct, id: string, props: ApiStackProps) {
    super(scope, id, props);
    const { config } = props;
    const data = importDataRefs(this, config.stage);
    // The stage name is the first path segment of {base_url} (a custom domain hides it).
    const stageName = config.stage;
    const common = { stage: config.stage, logRetentionDays: config.logRetentionDays, retainLogs: config.retainData };

    // ---- Lambda functions -------------------------------------------------
    const workflowEnv: Record<string, string> = props.workflows
      ? {
          SIFT_TRAINING_STATE_MACHINE_ARN: props.workflows.training.stateMachineArn,
          SIFT_GENERATION_STATE_MACHINE_ARN: props.workflows.generation.stateMachineArn,
          SIFT_EVALUATION_STATE_MACHINE_ARN: props.workflows.evaluation.stateMachineArn,
          SIFT_ADAPTIVE_STATE_MACHINE_ARN: props.workflows.adaptive.stateMachineArn,
        }
      : {};
    this.apiFunction = new SiftFunction(this, 'Api', {
      ...common,
      entry: 'api.ts',
      service: 'api',
      description: 'Sift control plane (keys, datasets, jobs, evaluations, projects, history, billing)',
      memorySize: 1024,
      timeout: Duration.seconds(29),
      environment: {
        SIFT_TABLE: data.tableName,
        SIFT_BUCKET: data.bucket.bucketName,
        SIFT_QUEUE_URL: data.queue.queueUrl,
        SIFT_CONSOLE_ORIGINS: config.consoleOrigins.join(','),
        ...workflowEnv,
      },
    });
    data.table.grantReadWriteData(this.apiFunction.fn);
    data.bucket.grantReadWrite(this.apiFunction.fn);
    data.queue.grantSendMessages(this.apiFunction.fn);
    if (props.workflows) {
      const w = props.workflows;
      for (const sm of [w.training, w.generation, w.evaluation, w.adaptive]) sm.grantStartExecution(this.apiFunction.fn);
      this.apiFunction.role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'StopAndReadTrainingJobs',
          actions: ['sagemaker:StopTrainingJob', 'sagemaker:DescribeTrainingJob'],
          resources: [
            Stack.of(this).formatArn({
              service: 'sagemaker',
              resource: 'training-job',
              resourceName: `${w.trainingJobPrefix}*`,
            }),
          ],
        }),
      );
      this.apiFunction.role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'ReadTrainingLogs',
          actions: ['logs:FilterLogEvents', 'logs:GetLogEvents', 'logs:StartLiveTail'],
          resources: [
            Stack.of(this).formatArn({
              service: 'logs',
              resource: 'log-group',
              resourceName: '/aws/sagemaker/TrainingJobs',
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
            Stack.of(this).formatArn({
              service: 'logs',
              resource: 'log-group',
              resourceName: `/aws/sagemaker/TrainingJobs:log-stream:${w.trainingJobPrefix}*`,
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
          ],
        }),
      );
    }

    if (props.workflows) {
      const prefix = props.workflows.trainingJobPrefix;
      acknowledge(this.apiFunction.role, {
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/${prefix}*]`,
        reason: `Stop/describe for training jobs started by the Sift training workflow; names are per job and always start with ${prefix}.`,
      }, {
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/TrainingJobs:log-stream:${prefix}*]`,
        reason: 'Training log streams are named <job>/algo-<n>-<ts> by SageMaker; reads are limited to Sift job streams.',
      });
    }

    this.authorizerFunction = new SiftFunction(this, 'Authorizer', {
      ...common,
      entry: 'authorizer.ts',
      service: 'authorizer',
      description: 'Sift API-key authorizer (sha256 of the key looked up in DynamoDB; names the team\'s usage plan key)',
      memorySize: 256,
      // a team's first request also creates its usage plan key (three API Gateway calls)
      timeout: Duration.seconds(10),
      environment: { SIFT_TABLE: data.tableName },
    });
    // The authorizer reads the key and team items, stamps last_used_at, and records a team's usage
    // plan key on first use: item actions on the table itself (no index access), plus its KMS key.
    this.authorizerFunction.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadApiKeyItems',
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem'],
        resources: [data.table.tableArn],
      }),
    );
    data.key.grantEncryptDecrypt(this.authorizerFunction.fn);

    this.workerFunction = new SiftFunction(this, 'Worker', {
      ...common,
      entry: 'worker.ts',
      service: 'worker',
      description: 'Sift background worker (dataset processing) consuming the work queue',
      memorySize: 2048,
      timeout: Duration.minutes(15),
      environment: {
        SIFT_TABLE: data.tableName,
        SIFT_BUCKET: data.bucket.bucketName,
        SIFT_QUEUE_URL: data.queue.queueUrl,
      },
    });
    data.table.grantReadWriteData(this.workerFunction.fn);
    data.bucket.grantReadWrite(this.workerFunction.fn);
    data.queue.grantSendMessages(this.workerFunction.fn);
    this.workerFunction.fn.addEventSource(
      new lambdaEvents.SqsEventSource(data.queue, {
        batchSize: 5,
        maxBatchingWindow: Duration.seconds(2),
        reportBatchItemFailures: true,
        maxConcurrency: 10,
      }),
    );
    for (const f of [this.apiFunction, this.workerFunction]) {
      acknowledgeDataGrants(f.role, config.stage, { table: true, bucket: 'readwrite', kms: true });
    }
    acknowledgeDataGrants(this.authorizerFunction.role, config.stage, { kms: true });

    // ---- REST API -----------------------------------------------------------
    this.accessLogs = new logs.LogGroup(this, 'AccessLogs', {
      retention: retentionDays(config.logRetentionDays),
      removalPolicy: config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    const scale = config.throttleScale;
    const loggingDefaults = {
      loggingLevel: apigw.MethodLoggingLevel.INFO,
      dataTraceEnabled: false,
      metricsEnabled: true,
    };
    // Stage-wide defaults ('/*/*') come from the deployOptions below.
    const methodOptions: Record<string, apigw.MethodDeploymentOptions> = {};
    for (const m of gatewayMethods()) {
      if (m.perMinute !== undefined) methodOptions[`${m.path}/${m.method}`] = { ...loggingDefaults, ...throttleOptions(m.perMinute, scale) };
    }

    const cors: apigw.CorsOptions | undefined =
      config.consoleOrigins.length > 0
        ? {
            allowOrigins: config.consoleOrigins,
            allowMethods: apigw.Cors.ALL_METHODS,
            allowHeaders: [...apigw.Cors.DEFAULT_HEADERS, 'X-API-Key', 'Accept', 'Idempotency-Key'],
            exposeHeaders: ['x-request-id', 'Retry-After', 'X-RateLimit-Reason'],
            maxAge: Duration.hours(1),
          }
        : undefined;

    this.api = new apigw.RestApi(this, 'RestApi', {
      restApiName: `sift-${config.stage}`,
      description: `Sift ${config.stage} public API`,
      endpointConfiguration: { types: [apigw.EndpointType.REGIONAL] },
      cloudWatchRole: true,
      cloudWatchRoleRemovalPolicy: RemovalPolicy.RETAIN,
      deployOptions: {
        stageName,
        tracingEnabled: true,
        accessLogDestination: new apigw.LogGroupLogDestination(this.accessLogs),
        accessLogFormat: apigw.AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            extendedRequestId: '$context.extendedRequestId',
            ip: '$context.identity.sourceIp',
            requestTime: '$context.requestTime',
            httpMethod: '$context.httpMethod',
            resourcePath: '$context.resourcePath',
            path: '$context.path',
            status: '$context.status',
            responseLength: '$context.responseLength',
            responseLatency: '$context.responseLatency',
            integrationLatency: '$context.integrationLatency',
            integrationStatus: '$context.integrationStatus',
            principalId: '$context.authorizer.principalId',
            authorizerError: '$context.authorizer.error',
            wafStatus: '$context.waf.status',
            errorMessage: '$context.error.message',
            errorType: '$context.error.responseType',
          }),
        ),
        methodOptions,
        ...loggingDefaults,
        ...throttleOptions(SPEC_DEFAULT_PER_MINUTE, scale),
      },
      ...(cors ? { defaultCorsPreflightOptions: cors } : {}),
      disableExecuteApiEndpoint: false,
      // usage plans count the key the authorizer names (the team's), never one a client sends
      apiKeySourceType: apigw.ApiKeySourceType.AUTHORIZER,
    });
    acknowledge(this.api, {
      id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
      reason: 'Account-level API Gateway logging role; AWS managed policy is the documented way to let API Gateway write execution logs.',
    });
    addGatewayResponses(this.api, config.consoleOrigins);

    const authorizers = new ApiAuthorizers(this, 'Authorizers', this.authorizerFunction.fn);
    new UsagePlans(this, 'UsagePlans', {
      api: this.api,
      stage: config.stage,
      throttles: config.usagePlans,
      authorizerRole: this.authorizerFunction.role,
    });
    new ApiRoutes(this, 'Routes', { api: this.api, control: this.apiFunction.fn, authorizers, inference: props.inference });

    acknowledge(this.api, {
      id: 'AwsSolutions-COG4',
      reason:
        'Callers authenticate with Sift API keys (SPEC "Authentication"), verified by the Lambda authorizers over sha256 hashes in DynamoDB; there are no Cognito users.',
    });

    const waf = new ApiWaf(this, 'Waf', {
      stage: config.stage,
      stageArn: this.api.deploymentStage.stageArn,
      edgeLimit: { limit: SPEC_EDGE_LIMIT_PER_IP, windowSeconds: SPEC_EDGE_WINDOW_SECONDS },
      logRetentionDays: config.logRetentionDays,
      retainLogs: config.retainData,
    });
    this.webAcl = waf.webAcl;
    this.webAclName = waf.webAclName;

    new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'Sift API base URL ({base_url})' });
    new CfnOutput(this, 'ApiId', { value: this.api.restApiId });
  }

  /** Resources inside the focused constructs (lib/constructs/resource-group.ts) keep the logical IDs they had at the stack's top level. */
  protected override allocateLogicalId(element: CfnElement): string {
    return allocateSkippingGroups(element) ?? super.allocateLogicalId(element);
  }
}

function throttleOptions(perMinute: number, scale: number): { throttlingRateLimit: number; throttlingBurstLimit: number } {
  const t = throttleFor(perMinute, scale);
  return { throttlingRateLimit: t.rateLimit, throttlingBurstLimit: t.burstLimit };
}

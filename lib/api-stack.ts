/**
 * Public API: API Gateway REST (regional) in front of
 * - the control-plane Lambda (`lambdas/api.ts`, one router behind `{proxy+}`), and
 * - the inference data plane (ECS GPU services behind an internal ALB) through
 *   a VPC link V2, with response streaming and a 15-minute timeout.
 *
 * Also: the API-key authorizers, the SQS worker, per-method throttles from
 * docs/reference/decisions.md#limits, access logs, WAF with the per-IP edge limit, CORS, and
 * gateway responses in the `{detail}` error shape (docs/reference/decisions.md#errors). Routes, their
 * authorizers and throttles come from the service's route table
 * (src/http/routeTable.ts, through lib/gateway-routes.ts).
 */
import { CfnOutput, Duration, RemovalPolicy, Stack, type CfnElement, type StackProps } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import type { Construct } from 'constructs';
import { SPEC_DEFAULT_PER_MINUTE, SPEC_EDGE_LIMIT_PER_IP, SPEC_EDGE_WINDOW_SECONDS, type StageConfig } from './config';
import { ApiAuthorizers } from './constructs/api-authorizers';
import { ApiFunctions, type WorkflowHandles } from './constructs/api-functions';
import { ApiRoutes, type InferenceEndpoint } from './constructs/api-routes';
import { API_BINARY_MEDIA_TYPES, API_GATEWAY_ACCOUNT_THROTTLE } from './aws-rules';
import { ApiWaf } from './constructs/api-waf';
import { addGatewayResponses } from './constructs/gateway-responses';
import { allocateSkippingGroups } from './constructs/resource-group';
import { retentionDays, type SiftFunction } from './constructs/sift-function';
import { UsagePlans } from './constructs/usage-plans';
import { gatewayMethods } from './gateway-routes';
import { importDataRefs } from './data-refs';
import { acknowledge } from './nag';
import { CORS_ALLOW_HEADERS, CORS_ALLOW_METHODS, CORS_EXPOSE_HEADERS, CORS_MAX_AGE_SECONDS } from '../src/http/cors';

export type { InferenceEndpoint } from './constructs/api-routes';

export type { WorkflowHandles } from './constructs/api-functions';

export interface ApiStackProps extends StackProps {
  readonly config: StageConfig;
  readonly inference?: InferenceEndpoint;
  readonly workflows?: WorkflowHandles;
}

/**
 * Stage method throttle for a per-minute limit (docs/reference/decisions.md#limits): the minute's
 * requests refilled evenly, and a burst of the whole minute's allowance (up to the account's burst,
 * lib/aws-rules.ts), so one user at the limit, however bunched within the minute, is never refused
 * by the stage: the service's own per-user limit answers first. `scale` makes room for more users.
 */
export function throttleFor(perMinute: number, scale: number): { rateLimit: number; burstLimit: number } {
  // rounded up: a rate rounded down refills less than the minute allows
  const rateLimit = Math.ceil((perMinute / 60) * scale * 100) / 100;
  const burstLimit = Math.max(1, Math.min(Math.ceil(perMinute * scale), API_GATEWAY_ACCOUNT_THROTTLE.burstLimit));
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

    const functions = new ApiFunctions(this, 'Functions', {
      stage: config.stage,
      data,
      workflows: props.workflows,
      consoleOrigins: config.consoleOrigins,
      logRetentionDays: config.logRetentionDays,
      retainLogs: config.retainData,
    });
    this.apiFunction = functions.apiFunction;
    this.authorizerFunction = functions.authorizerFunction;
    this.workerFunction = functions.workerFunction;

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
      if (m.perMinute !== undefined)
        methodOptions[`${m.path}/${m.method}`] = { ...loggingDefaults, ...throttleOptions(m.perMinute, scale) };
    }

    const cors: apigw.CorsOptions | undefined =
      config.consoleOrigins.length > 0
        ? {
            // the preflight only (a MOCK): every other response gets its CORS headers from the backend (src/http/cors.ts)
            allowOrigins: config.consoleOrigins,
            allowMethods: [...CORS_ALLOW_METHODS],
            allowHeaders: [...CORS_ALLOW_HEADERS],
            exposeHeaders: [...CORS_EXPOSE_HEADERS],
            maxAge: Duration.seconds(CORS_MAX_AGE_SECONDS),
          }
        : undefined;

    this.api = new apigw.RestApi(this, 'RestApi', {
      restApiName: `sift-${config.stage}`,
      description: `Sift ${config.stage} public API`,
      endpointConfiguration: { types: [apigw.EndpointType.REGIONAL] },
      binaryMediaTypes: [...API_BINARY_MEDIA_TYPES],
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
      reason:
        'Account-level API Gateway logging role; AWS managed policy is the documented way to let API Gateway write execution logs.',
    });
    addGatewayResponses(this.api, config.consoleOrigins);

    const authorizers = new ApiAuthorizers(this, 'Authorizers', this.authorizerFunction.fn);
    new UsagePlans(this, 'UsagePlans', {
      api: this.api,
      stage: config.stage,
      throttles: config.usagePlans,
      authorizerRole: this.authorizerFunction.role,
    });
    new ApiRoutes(this, 'Routes', {
      api: this.api,
      control: this.apiFunction.fn,
      authorizers,
      inference: props.inference,
    });

    acknowledge(this.api, {
      id: 'AwsSolutions-COG4',
      reason:
        'Callers authenticate with Sift API keys (docs/reference/decisions.md#authentication), verified by the Lambda authorizers over sha256 hashes in DynamoDB; there are no Cognito users.',
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

function throttleOptions(
  perMinute: number,
  scale: number,
): { throttlingRateLimit: number; throttlingBurstLimit: number } {
  const t = throttleFor(perMinute, scale);
  return { throttlingRateLimit: t.rateLimit, throttlingBurstLimit: t.burstLimit };
}

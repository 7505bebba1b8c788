/**
 * Public API: API Gateway REST (regional) in front of
 * - the control-plane Lambda (`lambdas/api.ts`, one router behind `{proxy+}`), and
 * - the inference data plane (ECS GPU services behind an internal ALB) through
 *   a VPC link V2, with response streaming and a 15-minute timeout.
 *
 * Also: the API-key authorizers, the SQS worker, per-method throttles from
 * SPEC "Limits", access logs, WAF with the per-IP edge limit, CORS, and
 * gateway responses in the SPEC `{detail}` error shape.
 */
import { ArnFormat, CfnOutput, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambdaEvents from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import type { Construct } from 'constructs';
import {
  PLANS,
  SPEC_DEFAULT_PER_MINUTE,
  SPEC_EDGE_LIMIT_PER_IP,
  SPEC_EDGE_WINDOW_SECONDS,
  SPEC_METHOD_LIMITS_PER_MINUTE,
  type StageConfig,
} from './config';
import { SiftFunction, retentionDays } from './constructs/sift-function';
import { acknowledgeDataGrants, importDataRefs } from './data-refs';
import { acknowledge } from './nag';

/** Where the inference data plane is reached (from the inference stack). */
export interface InferenceEndpoint {
  readonly vpcLinkId: string;
  readonly loadBalancerArn: string;
  readonly loadBalancerDnsName: string;
}

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

/** Routes that need no credentials (SPEC "Authentication"). */
export const PUBLIC_ROUTES: ReadonlyArray<{ path: string; method: string }> = [
  { path: '/health', method: 'GET' },
  { path: '/openapi.json', method: 'GET' },
  { path: '/v1/models', method: 'GET' },
];

/** OpenAI/Anthropic-compatible routes: accept `X-API-Key` or `Authorization: Bearer`. */
export const COMPAT_ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/responses', '/v1/messages'] as const;

/** Data-plane routes served by the ECS gateway (everything else is the control-plane Lambda). */
export const INFERENCE_ROUTES: ReadonlyArray<string> = [
  '/inference',
  ...COMPAT_ROUTES,
  '/gliner-2/{proxy+}',
  '/generate/ner/label-existing',
  '/generate/classification/label-existing',
];

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
    for (const limit of SPEC_METHOD_LIMITS_PER_MINUTE) {
      methodOptions[`${limit.path}/${limit.method}`] = { ...loggingDefaults, ...throttleOptions(limit.perMinute, scale) };
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

    const validator = this.api.addRequestValidator('ParamValidator', {
      requestValidatorName: 'validate-parameters',
      validateRequestParameters: true,
      validateRequestBody: true,
    });
    // Bodies of POST routes must be JSON objects; field-level validation (SPEC 422
    // with `errors`) is done by the handlers, which share one schema module.
    const jsonObject = this.api.addModel('JsonObject', {
      contentType: 'application/json',
      modelName: 'JsonObject',
      schema: { schema: apigw.JsonSchemaVersion.DRAFT4, title: 'JsonObject', type: apigw.JsonSchemaType.OBJECT },
    });

    // Cached TOKEN authorizer on X-API-Key: every native and /core route.
    const keyAuthorizer = new apigw.TokenAuthorizer(this, 'KeyAuthorizer', {
      handler: this.authorizerFunction.fn,
      identitySource: apigw.IdentitySource.header('X-API-Key'),
      resultsCacheTtl: Duration.seconds(60),
      authorizerName: 'api-key',
    });
    // Compatible routes accept X-API-Key *or* Authorization: Bearer. A listed identity source that
    // is missing gets a 401 from API Gateway before the function runs, so this REQUEST authorizer
    // lists none and runs uncached, for every request (lib/aws-rules.ts, authorizerRuns); the
    // function keeps its own short in-memory cache.
    const compatAuthorizer = new apigw.RequestAuthorizer(this, 'CompatAuthorizer', {
      handler: this.authorizerFunction.fn,
      identitySources: [],
      resultsCacheTtl: Duration.seconds(0),
      authorizerName: 'api-key-or-bearer',
    });
    // CDK writes the empty list as ""; leave the property out, as the API does for "none".
    (compatAuthorizer.node.defaultChild as apigw.CfnAuthorizer).addPropertyDeletionOverride('IdentitySource');

    const controlIntegration = new apigw.LambdaIntegration(this.apiFunction.fn, {
      proxy: true,
      scopePermissionToMethod: false,
    });

    this.addUsagePlans(config);

    const routes = new RouteBuilder(this.api, controlIntegration, { native: keyAuthorizer, compat: compatAuthorizer }, validator, jsonObject);
    for (const r of PUBLIC_ROUTES) routes.add(r.path, r.method, { public: true });

    const inferenceIntegration = (path: string): apigw.Integration => {
      if (!props.inference) return controlIntegration;
      const inf = props.inference;
      const isProxy = path.endsWith('{proxy+}');
      const target = isProxy ? path.replace('{proxy+}', '{proxy}') : path;
      return new apigw.Integration({
        type: apigw.IntegrationType.HTTP_PROXY,
        integrationHttpMethod: 'POST',
        uri: `http://${inf.loadBalancerDnsName}${target}`,
        options: {
          connectionType: apigw.ConnectionType.VPC_LINK,
          // VPC link V2 (to an ALB); the L1 takes its id in ConnectionId.
          vpcLink: { vpcLinkId: inf.vpcLinkId } as unknown as apigw.IVpcLink,
          timeout: Duration.minutes(15),
          responseTransferMode: apigw.ResponseTransferMode.STREAM,
          requestParameters: {
            'integration.request.header.x-sift-principal': 'context.authorizer.principalId',
            'integration.request.header.x-request-id': 'context.requestId',
            ...(isProxy ? { 'integration.request.path.proxy': 'method.request.path.proxy' } : {}),
          },
        },
      });
    };

    for (const path of INFERENCE_ROUTES) {
      const compat = (COMPAT_ROUTES as readonly string[]).includes(path);
      const method = routes.add(path, 'POST', {
        integration: inferenceIntegration(path),
        authorizer: compat ? compatAuthorizer : keyAuthorizer,
        ...(path.endsWith('{proxy+}') ? { requestParameters: { 'method.request.path.proxy': true } } : {}),
      });
      if (props.inference) {
        (method.node.defaultChild as apigw.CfnMethod).addPropertyOverride(
          'Integration.IntegrationTarget',
          props.inference.loadBalancerArn,
        );
      }
    }
    // Control-plane routes with their own SPEC limits need their own method.
    routes.add('/generate', 'POST', {});
    routes.add('/generate/{proxy+}', 'POST', {});
    routes.add('/generate/{proxy+}', 'ANY', {});
    routes.add('/core/training-jobs', 'POST', {});
    routes.add('/core/training-jobs', 'GET', {});
    routes.add('/core/training-jobs/{proxy+}', 'ANY', {});
    routes.add('/{proxy+}', 'ANY', {});
    routes.addFallbacks();

    acknowledge(this.api, {
      id: 'AwsSolutions-COG4',
      reason:
        'Callers authenticate with Sift API keys (SPEC "Authentication"), verified by the Lambda authorizers over sha256 hashes in DynamoDB; there are no Cognito users.',
    });

    // ---- WAF ------------------------------------------------------------------
    this.webAclName = `sift-${config.stage}-api`;
    this.webAcl = new wafv2.CfnWebACL(this, 'WebAcl', {
      name: this.webAclName,
      scope: 'REGIONAL',
      defaultAction: { allow: {} },
      visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: `sift-${config.stage}-api`, sampledRequestsEnabled: true },
      customResponseBodies: {
        'rate-limited': { contentType: 'APPLICATION_JSON', content: '{"detail":"Rate limit exceeded"}' },
      },
      rules: [
        {
          name: 'edge-rate-limit-per-ip',
          priority: 0,
          statement: {
            rateBasedStatement: {
              limit: SPEC_EDGE_LIMIT_PER_IP,
              evaluationWindowSec: SPEC_EDGE_WINDOW_SECONDS,
              aggregateKeyType: 'IP',
            },
          },
          action: {
            block: {
              customResponse: {
                responseCode: 429,
                customResponseBodyKey: 'rate-limited',
                responseHeaders: [{ name: 'Retry-After', value: String(SPEC_EDGE_WINDOW_SECONDS) }],
              },
            },
          },
          visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: 'edge-rate-limit-per-ip', sampledRequestsEnabled: true },
        },
        managedRule('AWSManagedRulesAmazonIpReputationList', 1),
        managedRule('AWSManagedRulesKnownBadInputsRuleSet', 2),
        // Request bodies are user text and datasets: body-inspecting rules only count.
        managedRule('AWSManagedRulesCommonRuleSet', 3, [
          'SizeRestrictions_BODY',
          'CrossSiteScripting_BODY',
          'GenericLFI_BODY',
          'GenericRFI_BODY',
          'EC2MetaDataSSRF_BODY',
          'NoUserAgent_HEADER',
        ]),
      ],
    });
    new wafv2.CfnWebACLAssociation(this, 'WebAclAssociation', {
      resourceArn: this.api.deploymentStage.stageArn,
      webAclArn: this.webAcl.attrArn,
    });
    const wafLogName = `aws-waf-logs-sift-${config.stage}-api`;
    const wafLogs = new logs.LogGroup(this, 'WafLogs', {
      logGroupName: wafLogName,
      retention: retentionDays(config.logRetentionDays),
      removalPolicy: config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    const wafLogging = new wafv2.CfnLoggingConfiguration(this, 'WafLogging', {
      resourceArn: this.webAcl.attrArn,
      logDestinationConfigs: [
        Stack.of(this).formatArn({
          service: 'logs',
          resource: 'log-group',
          resourceName: wafLogName,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ],
      redactedFields: [{ singleHeader: { Name: 'x-api-key' } }, { singleHeader: { Name: 'authorization' } }],
    });
    wafLogging.node.addDependency(wafLogs);

    new CfnOutput(this, 'ApiUrl', { value: this.api.url, description: 'Sift API base URL ({base_url})' });
    new CfnOutput(this, 'ApiId', { value: this.api.restApiId });
  }

  /**
   * One usage plan per plan tier on this stage. Each team's key is created by the authorizer on the
   * team's first request (src/aws/gatewayKeys.ts), found by the plan's name, so nothing here refers
   * to keys. The authorizer's grants are a policy of their own: the function must not depend on the
   * plans (they hang off the stage, which depends on the authorizer).
   */
  private addUsagePlans(config: StageConfig): void {
    const plans = PLANS.map((plan) =>
      this.api.addUsagePlan(`UsagePlan${plan.charAt(0).toUpperCase()}${plan.slice(1)}`, {
        name: `sift-${config.stage}-${plan}`,
        description: `Sift ${config.stage}: per-team request rate of the ${plan} plan`,
        throttle: config.usagePlans[plan],
        apiStages: [{ api: this.api, stage: this.api.deploymentStage }],
      }),
    );
    const apigwArn = (path: string) => `arn:${this.partition}:apigateway:${this.region}::${path}`;
    const policy = new iam.Policy(this, 'AuthorizerUsagePlanKeys', {
      roles: [this.authorizerFunction.role],
      statements: [
        new iam.PolicyStatement({ sid: 'FindUsagePlans', actions: ['apigateway:GET'], resources: [apigwArn('/usageplans')] }),
        new iam.PolicyStatement({ sid: 'CreateTeamKeys', actions: ['apigateway:POST'], resources: [apigwArn('/apikeys'), ...plans.map((p) => apigwArn(`/usageplans/${p.usagePlanId}/keys`))] }),
        new iam.PolicyStatement({ sid: 'TagTeamKeys', actions: ['apigateway:PUT', 'apigateway:POST'], resources: [apigwArn('/tags/*')] }),
        new iam.PolicyStatement({ sid: 'DeleteReplacedTeamKeys', actions: ['apigateway:DELETE'], resources: [apigwArn('/apikeys/*')] }),
      ],
    });
    acknowledge(policy, {
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:apigateway:<AWS::Region>::/apikeys/*]`,
      reason: 'A team key replaced by a plan change is deleted by id; key ids are generated by API Gateway at runtime. The authorizer creates only keys it then puts in a Sift usage plan.',
    }, {
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:apigateway:<AWS::Region>::/tags/*]`,
      reason: 'CreateApiKey with tags needs tag permission on the new key, whose ARN is unknown until it exists.',
    });
  }
}

function throttleOptions(perMinute: number, scale: number): { throttlingRateLimit: number; throttlingBurstLimit: number } {
  const t = throttleFor(perMinute, scale);
  return { throttlingRateLimit: t.rateLimit, throttlingBurstLimit: t.burstLimit };
}

function managedRule(name: string, priority: number, countOnly: string[] = []): wafv2.CfnWebACL.RuleProperty {
  return {
    name,
    priority,
    overrideAction: { none: {} },
    statement: {
      managedRuleGroupStatement: {
        vendorName: 'AWS',
        name,
        ...(countOnly.length > 0 ? { ruleActionOverrides: countOnly.map((n) => ({ name: n, actionToUse: { count: {} } })) } : {}),
      },
    },
    visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: name, sampledRequestsEnabled: true },
  };
}

/**
 * SPEC error bodies (`{detail}`) and statuses for responses API Gateway generates itself. These
 * templates are plain substitution, not VTL: only API Gateway's own quoted `messageString` (or a
 * fixed text) may stand for a JSON string (lib/aws-rules.ts, GATEWAY_RESPONSE_VARIABLES).
 */
function addGatewayResponses(api: apigw.RestApi, origins: string[]): void {
  const headers: Record<string, string> = { 'Content-Type': "'application/json'" };
  if (origins.length === 1) headers['Access-Control-Allow-Origin'] = `'${origins[0]}'`;
  const requestId = '"request_id":"$context.requestId"';
  const fixed = (text: string): string => `{"detail":${JSON.stringify(text)},${requestId}}`;
  const add = (id: string, type: apigw.ResponseType, statusCode: string, body: string, extra: Record<string, string> = {}): void => {
    api.addGatewayResponse(id, { type, statusCode, responseHeaders: { ...headers, ...extra }, templates: { 'application/json': body } });
  };
  add('Unauthorized', apigw.ResponseType.UNAUTHORIZED, '401', fixed('API key missing, invalid or revoked'));
  add('AccessDenied', apigw.ResponseType.ACCESS_DENIED, '401', fixed('API key missing, invalid or revoked'));
  add('MissingAuthToken', apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, '404', fixed('Not Found'));
  add('Throttled', apigw.ResponseType.THROTTLED, '429', fixed('Rate limit exceeded'), { 'Retry-After': "'1'" });
  add('QuotaExceeded', apigw.ResponseType.QUOTA_EXCEEDED, '429', fixed('Rate limit exceeded'), { 'Retry-After': "'60'" });
  add('WafFiltered', apigw.ResponseType.WAF_FILTERED, '403', fixed('Forbidden'));
  // The only body rule API Gateway checks is "a JSON object" (the JsonObject model); its own
  // validationErrorString is unquoted text, so the field error is written out here.
  add(
    'BadRequestBody',
    apigw.ResponseType.BAD_REQUEST_BODY,
    '422',
    `{"detail":$context.error.messageString,"errors":[{"loc":["body"],"msg":"The request body must be a JSON object","type":"json_invalid"}],${requestId}}`,
  );
  add('Default4xx', apigw.ResponseType.DEFAULT_4XX, '400', `{"detail":$context.error.messageString,${requestId}}`);
  add('Default5xx', apigw.ResponseType.DEFAULT_5XX, '500', fixed('Internal server error'));
}

interface RouteOptions {
  readonly public?: boolean;
  readonly integration?: apigw.Integration;
  readonly authorizer?: apigw.IAuthorizer;
  readonly requestParameters?: Record<string, boolean>;
}

/** Adds methods by path and, afterwards, `{proxy+}` fallbacks so no sub-path escapes the router. */
class RouteBuilder {
  private readonly methods = new Map<string, apigw.Method>();

  constructor(
    private readonly api: apigw.RestApi,
    private readonly control: apigw.Integration,
    /** native: X-API-Key only (SPEC "Authentication" 1); compat: every /v1/ path, X-API-Key or Bearer (3). */
    private readonly authorizers: { native: apigw.IAuthorizer; compat: apigw.IAuthorizer },
    private readonly validator: apigw.IRequestValidator,
    private readonly jsonObject: apigw.IModel,
  ) {}

  add(path: string, httpMethod: string, opts: RouteOptions): apigw.Method {
    const resource = this.api.root.resourceForPath(path);
    const isProxy = path.endsWith('{proxy+}');
    const method = resource.addMethod(httpMethod, opts.integration ?? this.control, {
      requestValidator: this.validator,
      ...(httpMethod === 'POST' ? { requestModels: { 'application/json': this.jsonObject } } : {}),
      requestParameters: opts.requestParameters ?? (isProxy ? { 'method.request.path.proxy': true } : {}),
      ...(opts.public
        ? { authorizationType: apigw.AuthorizationType.NONE }
        : {
            authorizationType: apigw.AuthorizationType.CUSTOM,
            authorizer: opts.authorizer ?? (path.startsWith('/v1/') ? this.authorizers.compat : this.authorizers.native),
            apiKeyRequired: true,
          }),
    });
    if (opts.public) {
      apiPublicAck(method);
    }
    this.methods.set(`${httpMethod} ${path}`, method);
    return method;
  }

  /** Every resource with children but no `{proxy+}` child gets one (ANY → control plane). */
  addFallbacks(): void {
    const visit = (res: apigw.IResource): void => {
      const children = (res.node.children.filter((c) => c instanceof apigw.Resource) as apigw.Resource[]);
      const isProxy = (c: apigw.Resource): boolean => c.path.endsWith('/{proxy+}');
      if (children.length > 0 && res !== this.api.root && !children.some(isProxy)) {
        this.add(`${res.path}/{proxy+}`, 'ANY', {});
      }
      for (const c of children) if (!isProxy(c)) visit(c);
    };
    visit(this.api.root);
  }
}

function apiPublicAck(method: apigw.Method): void {
  acknowledge(method, {
    id: 'AwsSolutions-APIG4',
    reason: 'Public by SPEC: GET /v1/models, GET /openapi.json and GET /health answer without credentials.',
  }, {
    id: 'AwsSolutions-COG4',
    reason: 'Public by SPEC: GET /v1/models, GET /openapi.json and GET /health answer without credentials.',
  });
}

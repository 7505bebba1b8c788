/**
 * AWS behaviour the stacks rely on but that cannot run here (SageMaker, CloudWatch, API Gateway,
 * ALB). Each rule is written down once, beside the AWS page that states it; the stacks decide from
 * these tables and test/cdk/aws-rules.test.ts checks the synthesized templates against them.
 *
 * Imports nothing from aws-cdk-lib: the runtime (src/) and the workflow definitions read it too.
 */

// ---- SageMaker: volume KMS keys and instance storage ------------------------------------------

/**
 * Instance families whose storage is local NVMe (instance store) rather than an EBS volume.
 * SageMaker refuses `ResourceConfig.VolumeKmsKeyId` for them: the instance store is encrypted by
 * the hardware, and there is no EBS volume to encrypt.
 * https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_ResourceConfig.html (VolumeKmsKeyId)
 * https://docs.aws.amazon.com/sagemaker/latest/dg/key-management.html
 * The SageMaker Python SDK drops the key for the same families
 * (sagemaker-python-sdk src/sagemaker/utils.py `instance_supports_kms`).
 */
const SAGEMAKER_INSTANCE_STORAGE_FAMILIES: ReadonlyArray<string> = [
  'c5d',
  'c6gd',
  'c6id',
  'm5d',
  'm6gd',
  'm6id',
  'r5d',
  'r6gd',
  'r6id',
  'g4ad',
  'g4dn',
  'g5',
  'g6',
  'g6e',
  'gr6',
  'p3dn',
  'p4d',
  'p4de',
  'p5',
  'p5e',
  'p5en',
  'trn1',
  'trn1n',
  'trn2',
  'inf2',
];

/** `ml.g5.xlarge` → `g5`; throws on a name that is not `ml.<family>.<size>`. */
function sagemakerInstanceFamily(instanceType: string): string {
  const m = /^ml\.([a-z0-9-]+)\.[a-z0-9]+$/.exec(instanceType);
  if (!m) throw new Error(`not a SageMaker instance type: ${instanceType} (expected ml.<family>.<size>)`);
  return m[1]!;
}

/** Whether a training job on this instance type may name a volume KMS key. */
export function acceptsVolumeKmsKey(instanceType: string): boolean {
  return !SAGEMAKER_INSTANCE_STORAGE_FAMILIES.includes(sagemakerInstanceFamily(instanceType));
}

// ---- CloudWatch: which ALB metrics exist while a target group has no targets ------------------

/**
 * ALB metrics are published only for minutes with a non-zero value, and per-target-group request
 * metrics only count requests the load balancer routed to a target. With zero registered targets
 * the ALB answers 503 itself: that shows up as the load balancer's HTTPCode_ELB_503_Count, never as
 * the target group's RequestCount. An alarm that must fire at zero tasks has to read a metric that
 * is `emittedWithoutTargets`.
 * https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-cloudwatch-metrics.html
 * https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-troubleshooting.html#http-503-issues
 * A target tracking policy does nothing on missing data, so it never scales in an idle service:
 * https://docs.aws.amazon.com/AmazonECS/latest/developerguide/service-autoscaling-targettracking.html
 */
export const ALB_METRICS: Readonly<
  Record<string, { readonly dimension: 'LoadBalancer' | 'TargetGroup'; readonly emittedWithoutTargets: boolean }>
> = {
  HTTPCode_ELB_503_Count: { dimension: 'LoadBalancer', emittedWithoutTargets: true },
  HTTPCode_ELB_5XX_Count: { dimension: 'LoadBalancer', emittedWithoutTargets: true },
  RequestCount: { dimension: 'TargetGroup', emittedWithoutTargets: false },
  RequestCountPerTarget: { dimension: 'TargetGroup', emittedWithoutTargets: false },
};

// ---- CloudWatch: which ECS metrics exist while a service's task boots -------------------------

/**
 * When an ECS metric has a data point. `AWS/ECS` service metrics (CPUUtilization, …) are computed
 * from the service's RUNNING tasks only: none while a woken task is PROVISIONING or PENDING
 * ("Amazon ECS CloudWatch metrics",
 * https://docs.aws.amazon.com/AmazonECS/latest/developerguide/available-metrics.html), so a service
 * that is booting looks exactly like one at zero. Container Insights' service-level task counts
 * (`ECS/ContainerInsights` DesiredTaskCount, RunningTaskCount, PendingTaskCount: "Amazon ECS
 * Container Insights metrics",
 * https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Container-Insights-metrics-ECS.html)
 * describe the service, not a task, and so exist while its tasks are still pending. Whether they
 * are published for a service at desired 0 the documentation does not say: the stacks must not
 * depend on it (FILL(…, 0) either way) and the simulator takes the unkind reading (not published).
 */
export const ECS_METRICS: Readonly<
  Record<
    string,
    { readonly namespace: 'AWS/ECS' | 'ECS/ContainerInsights'; readonly publishedWhile: 'running' | 'desired' }
  >
> = {
  CPUUtilization: { namespace: 'AWS/ECS', publishedWhile: 'running' },
  MemoryUtilization: { namespace: 'AWS/ECS', publishedWhile: 'running' },
  DesiredTaskCount: { namespace: 'ECS/ContainerInsights', publishedWhile: 'desired' },
  RunningTaskCount: { namespace: 'ECS/ContainerInsights', publishedWhile: 'desired' },
  PendingTaskCount: { namespace: 'ECS/ContainerInsights', publishedWhile: 'desired' },
};

/**
 * Scale to zero with alarms and step scaling:
 * - An alarm with an Application Auto Scaling action invokes it again every minute it stays in
 *   ALARM, so an idle (scale-to-zero) alarm must leave ALARM as soon as a wake-up signal appears,
 *   or it undoes the wake-up ("How step scaling for Application Auto Scaling works",
 *   https://docs.aws.amazon.com/autoscaling/application/userguide/step-scaling-policy-overview.html;
 *   https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/alarm-evaluation.html).
 * - Boot counts as activity: from the wake-up until the task is RUNNING no request reaches it and
 *   `AWS/ECS` publishes nothing (ECS_METRICS), so the idle expression reads whether desired exceeds running
 *   tasks (Container Insights); RUNNING but not yet healthy, the ALB answers 503 itself
 *   (ALB_METRICS), which the expression counts too.
 * - Metric math FILL(m, 0) turns the minutes a metric was not published into zeros; a term with no
 *   FILL and no data makes the whole result missing for that minute
 *   ("Using metric math", https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/using-metric-math.html).
 * - Cooldowns: a step policy does not repeat a scale-out within its cooldown (unless larger);
 *   scale-in is blocked during the cooldown after a scale-in, and a scale-out ends that cooldown
 *   (the step-scaling page above, "Cooldown period").
 */
export const SCALE_TO_ZERO = {
  /** Minutes without a request (or a 503) before a service goes to its minimum. */
  idleMinutes: 15,
} as const;

// ---- ALB keep-alive ordering ------------------------------------------------------------------

/** The timeouts live with the server that obeys them (src/http/keepAlive.ts, shipped in the image). */
export { KEEP_ALIVE } from '../src/http/keepAlive';

// ---- API Gateway ------------------------------------------------------------------------------

/**
 * REQUEST authorizers: with result caching on, every listed identity source must be present or
 * API Gateway answers 401 without calling the function; with caching off (TTL 0) identity sources
 * may be left empty and the function runs for every request.
 * https://docs.aws.amazon.com/apigateway/latest/api/API_CreateAuthorizer.html (identitySource)
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/apigateway-use-lambda-authorizer.html
 * A TOKEN authorizer reads exactly one header and refuses requests without it.
 */
export function authorizerRuns(
  authorizer: { type: 'TOKEN' | 'REQUEST'; identitySources: string[]; ttlSeconds: number },
  requestHeaders: string[],
): boolean {
  const sent = new Set(requestHeaders.map((h) => h.toLowerCase()));
  const present = (source: string): boolean => sent.has(source.replace(/^method\.request\.header\./, '').toLowerCase());
  if (authorizer.type === 'TOKEN')
    return authorizer.identitySources.length === 1 && present(authorizer.identitySources[0]!);
  if (authorizer.identitySources.length === 0) return authorizer.ttlSeconds === 0;
  return authorizer.identitySources.every(present);
}

/**
 * Gateway response templates are not VTL: API Gateway only substitutes variables, as is. A value
 * put inside a JSON string must therefore be one API Gateway quotes itself (`messageString`) or one
 * that can hold no quote (`requestId`). `$util` does not exist there.
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-swagger-extensions-gateway-responses.responseTemplates.html
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-mapping-template-reference.html#context-variable-reference
 */
export const GATEWAY_RESPONSE_VARIABLES: Readonly<Record<string, 'json-quoted' | 'raw-text' | 'request-id'>> = {
  '$context.error.messageString': 'json-quoted',
  '$context.error.message': 'raw-text',
  '$context.error.validationErrorString': 'raw-text',
  '$context.error.responseType': 'raw-text',
  '$context.authorizer.error': 'raw-text',
  '$context.requestId': 'request-id',
};

/** What API Gateway would send for a gateway response template, given one value for every variable. */
export function renderGatewayResponse(template: string, text: string, requestId: string): string {
  return template.replace(/\$context(?:\.[A-Za-z]+)+/g, (name) => {
    const kind = GATEWAY_RESPONSE_VARIABLES[name];
    if (kind === undefined) throw new Error(`gateway response variable ${name} is not in GATEWAY_RESPONSE_VARIABLES`);
    return kind === 'json-quoted' ? JSON.stringify(text) : kind === 'request-id' ? requestId : text;
  });
}

/**
 * Each gateway response type's default status code, and how a status set on DEFAULT_4XX or
 * DEFAULT_5XX replaces it: "Gateway response types for API Gateway"
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/supported-gateway-response-types.html
 * ("Changing the status code of this fallback gateway response changes the status codes of all other
 * 4XX responses to the new value"; the same for DEFAULT_5XX). The two defaults have none of their own.
 */
export const GATEWAY_RESPONSE_DEFAULT_STATUS: Readonly<Record<string, number | null>> = {
  ACCESS_DENIED: 403,
  API_CONFIGURATION_ERROR: 500,
  AUTHORIZER_CONFIGURATION_ERROR: 500,
  AUTHORIZER_FAILURE: 500,
  BAD_REQUEST_PARAMETERS: 400,
  BAD_REQUEST_BODY: 400,
  DEFAULT_4XX: null,
  DEFAULT_5XX: null,
  EXPIRED_TOKEN: 403,
  INTEGRATION_FAILURE: 504,
  INTEGRATION_TIMEOUT: 504,
  INVALID_API_KEY: 403,
  INVALID_SIGNATURE: 403,
  MISSING_AUTHENTICATION_TOKEN: 403,
  QUOTA_EXCEEDED: 429,
  REQUEST_TOO_LARGE: 413,
  RESOURCE_NOT_FOUND: 404,
  THROTTLED: 429,
  UNAUTHORIZED: 401,
  UNSUPPORTED_MEDIA_TYPE: 415,
  WAF_FILTERED: 403,
};

/**
 * The status API Gateway sends for a response type, given the StatusCode each configured gateway
 * response sets (undefined where unset): its own, else its class's DEFAULT_4XX/5XX one, else AWS's default.
 */
export function gatewayResponseStatus(type: string, configured: Readonly<Record<string, string | undefined>>): number {
  const fallback = GATEWAY_RESPONSE_DEFAULT_STATUS[type];
  if (fallback === undefined) throw new Error(`${type} is not a gateway response type`);
  if (fallback === null) throw new Error(`${type} is a fallback, not a response API Gateway sends`);
  const own = configured[type];
  if (own !== undefined) return Number(own);
  const classDefault = configured[fallback < 500 ? 'DEFAULT_4XX' : 'DEFAULT_5XX'];
  return classDefault !== undefined ? Number(classDefault) : fallback;
}

// ---- EBS: what a gp3 volume accepts -------------------------------------------------------------

/**
 * gp3 includes 3,000 IOPS and 125 MiB/s; more throughput is provisioned at most 0.25 MiB/s per
 * provisioned IOPS (so 1,000 MiB/s needs 4,000 IOPS). EBS has since raised the ceiling for new
 * volumes; 1,000 MiB/s is the limit every region has documented longest, so it is the one held here.
 * "Amazon EBS General Purpose SSD volumes" https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html
 */
export const GP3 = {
  baselineIops: 3000,
  baselineThroughputMiBs: 125,
  maxThroughputMiBs: 1000,
  maxMiBsPerIops: 0.25,
} as const;

/** Why EBS would refuse this gp3 volume (undefined when it accepts it). */
export function gp3Refusal(iops: number, throughputMiBs: number): string | undefined {
  if (throughputMiBs < GP3.baselineThroughputMiBs || throughputMiBs > GP3.maxThroughputMiBs)
    return `gp3 throughput ${throughputMiBs} MiB/s is outside ${GP3.baselineThroughputMiBs}–${GP3.maxThroughputMiBs}`;
  if (throughputMiBs > iops * GP3.maxMiBsPerIops)
    return `gp3 throughput ${throughputMiBs} MiB/s needs at least ${throughputMiBs / GP3.maxMiBsPerIops} IOPS, not ${iops}`;
  return undefined;
}

// ---- API Gateway: throttling ------------------------------------------------------------------

/**
 * API Gateway throttles with a token bucket: `burstLimit` tokens, refilled at `rateLimit` a
 * second; a request without a token gets 429. Per account and region: 10,000 requests a second
 * with a burst of 5,000 (adjustable), across every API — a method's burst is held to it.
 * "Throttle requests to your REST APIs for better throughput in API Gateway"
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-request-throttling.html
 * "Amazon API Gateway quotas" https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html
 */
export const API_GATEWAY_ACCOUNT_THROTTLE = { rateLimit: 10_000, burstLimit: 5_000 } as const;

/** Requests of `arrivals` (seconds from the first) that a token bucket answers with 429. */
export function throttled(bucket: { rateLimit: number; burstLimit: number }, arrivals: number[]): number {
  const burst = Math.min(bucket.burstLimit, API_GATEWAY_ACCOUNT_THROTTLE.burstLimit);
  let tokens = burst;
  let last = 0;
  let refused = 0;
  for (const at of arrivals) {
    tokens = Math.min(burst, tokens + (at - last) * bucket.rateLimit);
    last = at;
    if (tokens >= 1) tokens -= 1;
    else refused += 1;
  }
  return refused;
}

/**
 * A proxy integration hands the Lambda a request body as UTF-8 text unless the request's Content-Type
 * is one of the API's `binaryMediaTypes`; then as base64 with `isBase64Encoded` (which the Lambda
 * adapter decodes). A multipart upload (POST /v1/files) carries the file's bytes as they are, so it
 * goes as binary: text would re-encode any byte that is not UTF-8.
 * "Binary media types for REST APIs in API Gateway"
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-payload-encodings.html
 */
export const API_BINARY_MEDIA_TYPES: readonly string[] = ['multipart/form-data'];

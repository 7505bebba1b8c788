/**
 * The event shapes AWS hands Sift's Lambda entry points (lambdas/*.ts), for tests that invoke them:
 * REST proxy events ("Lambda proxy integrations in API Gateway",
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/set-up-lambda-proxy-integrations.html)
 * and REQUEST authorizer events ("Input to an API Gateway Lambda authorizer",
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-lambda-authorizer-input.html).
 * Not modelled: multi-value query strings beyond what the routes read, the full requestContext
 * (identity, authorizer caching), payload format 2.0 (HTTP APIs; Sift's API is REST).
 */
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';
import type { AwsServices } from '../../src/adapters/aws';
import { OPERATOR_KEY } from './localStack';

/** An API Gateway REST proxy event (`/{proxy+}`), header names in the client's mixed case as API Gateway passes them. */
export function apiGatewayEvent(
  method: string,
  pathWithQuery: string,
  opts: { key?: string | null; body?: unknown; headers?: Record<string, string>; base64?: boolean } = {},
): APIGatewayProxyEvent {
  const url = new URL(pathWithQuery, 'http://x');
  const headers: Record<string, string> = { Host: 'abc.execute-api.us-east-1.amazonaws.com', ...(opts.headers ?? {}) };
  const key = opts.key === undefined ? OPERATOR_KEY : opts.key;
  if (key) headers['X-Api-Key'] = key;
  let body: string | null = null;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
    if (opts.base64) body = Buffer.from(body).toString('base64');
  }
  const query = [...url.searchParams].length ? Object.fromEntries(url.searchParams) : null;
  return {
    httpMethod: method,
    path: url.pathname,
    resource: '/{proxy+}',
    headers,
    multiValueHeaders: {},
    queryStringParameters: query,
    multiValueQueryStringParameters: null,
    pathParameters: { proxy: url.pathname.slice(1) },
    stageVariables: null,
    body,
    isBase64Encoded: Boolean(opts.base64),
    requestContext: { identity: { sourceIp: '198.51.100.7' } } as APIGatewayProxyEvent['requestContext'],
  };
}

/** An API Gateway REQUEST authorizer event (the authorizer sees headers, not the body). */
export function authorizerRequestEvent(
  methodArn: string,
  httpMethod: string,
  path: string,
  headers: Record<string, string>,
  resource = path,
) {
  return {
    type: 'REQUEST' as const,
    methodArn,
    resource,
    path,
    httpMethod,
    headers,
    multiValueHeaders: {},
    pathParameters: {},
    queryStringParameters: {},
    multiValueQueryStringParameters: {},
    stageVariables: {},
    requestContext: {} as never,
  };
}

export const lambdaContext = {
  functionName: 'sift-test',
  functionVersion: '$LATEST',
  invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:sift-test',
  memoryLimitInMB: '512',
  awsRequestId: 'req-1',
  logGroupName: '/aws/lambda/sift-test',
  logStreamName: 's',
  callbackWaitsForEmptyEventLoop: true,
  getRemainingTimeInMillis: () => 30_000,
} as unknown as Context;

/** The environment every Lambda entry point gets here: the stack's variables, the SDK pointed at the emulators. */
export async function emulatorEnv(svc: AwsServices) {
  const ep = await svc.records.client.config.endpoint!();
  const s3 = await svc.blobs.s3.config.endpoint!();
  // the stores' fronts accept only this start's credentials, as the service's own clients sign with
  const credentials = await svc.records.client.config.credentials();
  return {
    SIFT_STAGE: 'test',
    AWS_REGION: 'us-east-1',
    SIFT_TABLE: 'sift-records',
    SIFT_BUCKET: 'sift-data',
    AWS_ENDPOINT_URL_DYNAMODB: `${ep.protocol}//${ep.hostname}:${ep.port}`,
    AWS_ENDPOINT_URL_S3: `${s3.protocol}//${s3.hostname}:${s3.port}`,
    AWS_ACCESS_KEY_ID: credentials.accessKeyId,
    AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    AWS_MAX_ATTEMPTS: '1',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_TRACE_ENABLED: 'false',
    POWERTOOLS_LOG_LEVEL: 'SILENT',
  };
}

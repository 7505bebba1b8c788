import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { ApiRequest, ApiResponse } from '../../http/types';

/** API Gateway REST proxy event → the router's request. */
export function fromApiGatewayEvent(event: APIGatewayProxyEvent): ApiRequest {
  const headers: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(event.headers ?? {})) headers[k.toLowerCase()] = v;
  const query: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(event.queryStringParameters ?? {})) query[k] = v;
  const body = event.body == null ? undefined : Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8');
  return {
    method: event.httpMethod.toUpperCase(),
    path: event.path,
    query,
    headers,
    ...(body ? { body } : {}),
    sourceIp: event.requestContext?.identity?.sourceIp ?? 'unknown',
  };
}

/** The router's response → API Gateway's. Streams are collected: streaming routes run on ECS. */
export async function toApiGatewayResult(response: ApiResponse): Promise<APIGatewayProxyResult> {
  let body = '';
  let isBase64Encoded = false;
  if (response.stream) {
    const parts: Buffer[] = [];
    for await (const chunk of response.stream) parts.push(Buffer.from(chunk));
    body = Buffer.concat(parts).toString('utf8');
  } else if (response.raw !== undefined) {
    if (Buffer.isBuffer(response.raw)) {
      body = response.raw.toString('base64');
      isBase64Encoded = true;
    } else body = response.raw;
  } else if (response.body !== undefined) body = JSON.stringify(response.body);
  return { statusCode: response.status, headers: response.headers ?? {}, body, isBase64Encoded };
}

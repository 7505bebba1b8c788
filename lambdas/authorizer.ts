/**
 * API Gateway Lambda authorizer (TOKEN or REQUEST). The same `authenticate` as the router, so the
 * gateway and the handlers can never disagree about a key. The policy is a wildcard over the API:
 * a cached policy scoped to one method ARN would 403 the caller's other routes.
 */
import type { APIGatewayAuthorizerResult, APIGatewayRequestAuthorizerEvent, APIGatewayTokenAuthorizerEvent } from 'aws-lambda';
import { servicesFromEnv } from '../src/adapters/aws';
import { authenticate } from '../src/core/apiKeys';
import { logger } from '../src/lambda/observability';

const svc = servicesFromEnv('dynamodb');

function wildcardArn(methodArn: string): string {
  const [arnPrefix, stage] = methodArn.split('/');
  return `${arnPrefix}/${stage}/*`;
}

export async function handler(event: APIGatewayTokenAuthorizerEvent | APIGatewayRequestAuthorizerEvent): Promise<APIGatewayAuthorizerResult> {
  let headers: Record<string, string | undefined>;
  let path: string;
  if (event.type === 'TOKEN') {
    const token = event.authorizationToken;
    headers = /^Bearer\s/i.test(token) ? { authorization: token } : { 'x-api-key': token };
    path = `/${event.methodArn.split('/').slice(3).join('/')}`;
  } else {
    headers = Object.fromEntries(Object.entries(event.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]));
    path = event.path;
  }
  try {
    const principal = await authenticate(svc, { path, headers });
    return {
      principalId: principal.key_id,
      policyDocument: { Version: '2012-10-17', Statement: [{ Action: 'execute-api:Invoke', Effect: 'Allow', Resource: wildcardArn(event.methodArn) }] },
      context: { team_id: principal.team_id, key_id: principal.key_id, role: principal.role },
    };
  } catch (error) {
    logger.info('rejected credentials', { reason: (error as Error).message });
    // API Gateway turns exactly this message into a 401.
    throw new Error('Unauthorized');
  }
}

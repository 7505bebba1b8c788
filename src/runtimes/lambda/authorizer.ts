/**
 * API Gateway Lambda authorizer (TOKEN or REQUEST). The same `authenticate` as the router, so the
 * gateway and the handlers can never disagree about a key. The policy is a wildcard over the API:
 * a cached policy scoped to one method ARN would 403 the caller's other routes.
 */
import type {
  APIGatewayAuthorizerResult,
  APIGatewayRequestAuthorizerEvent,
  APIGatewayTokenAuthorizerEvent,
} from 'aws-lambda';
import { authenticate } from '../../core/apiKeys';
import { usageIdentifierFor } from '../../core/gatewayKeys';
import { TtlCache } from '../../core/hotPath';
import { getTeam } from '../../core/teams';
import { composeLambda, lambdaSettings } from './compose';
import { logger } from './observability';

// usage plans per team plan: on unless the stack turned them off (lambdaSettings)
const svc = composeLambda(lambdaSettings(), { gatewayKeys: true });

/** Team → its usage identifier, for a few minutes per container (plans change rarely; keys never). */
const identifiers = new TtlCache<{ value: string | undefined }>(5 * 60_000);
async function usageIdentifier(teamId: string): Promise<string | undefined> {
  const hit = identifiers.get(teamId);
  if (hit) return hit.value;
  const value = await usageIdentifierFor(svc, await getTeam(svc, teamId));
  identifiers.set(teamId, { value });
  return value;
}

function wildcardArn(methodArn: string): string {
  const [arnPrefix, stage] = methodArn.split('/');
  return `${arnPrefix}/${stage}/*`;
}

export async function handler(
  event: APIGatewayTokenAuthorizerEvent | APIGatewayRequestAuthorizerEvent,
): Promise<APIGatewayAuthorizerResult> {
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
  let principal: Awaited<ReturnType<typeof authenticate>>;
  try {
    principal = await authenticate(svc, { path, headers });
  } catch (error) {
    logger.info('rejected credentials', { reason: (error as Error).message });
    // API Gateway turns exactly this message into a 401.
    throw new Error('Unauthorized');
  }
  // A team whose gateway key can't be made is let through without one: API Gateway then answers
  // 403 on key-required methods, and the error is logged for the operator.
  const usageIdentifierKey = await usageIdentifier(principal.team_id).catch((error: unknown) => {
    logger.error("could not resolve the team's usage plan key", { team_id: principal.team_id, error: error as Error });
    return undefined;
  });
  return {
    principalId: principal.key_id,
    policyDocument: {
      Version: '2012-10-17',
      Statement: [{ Action: 'execute-api:Invoke', Effect: 'Allow', Resource: wildcardArn(event.methodArn) }],
    },
    context: { team_id: principal.team_id, key_id: principal.key_id, role: principal.role },
    ...(usageIdentifierKey ? { usageIdentifierKey } : {}),
  };
}

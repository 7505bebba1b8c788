import * as apigw from 'aws-cdk-lib/aws-apigateway';
import { CORS_EXPOSE_HEADERS } from '../../src/http/cors';

/**
 * The statuses we set on purpose instead of AWS's default for the type (lib/aws-rules.ts
 * GATEWAY_RESPONSE_DEFAULT_STATUS), each with its reason. Nothing else sets one: a status on
 * DEFAULT_4XX/DEFAULT_5XX would replace every other type's (403/413/415 → one 4xx, 504 → one 5xx).
 */
export const GATEWAY_STATUS_OVERRIDES: Readonly<Record<string, { status: number; why: string }>> = {
  ACCESS_DENIED: {
    status: 401,
    why: 'the authorizer denies a missing, invalid or revoked key, which the API answers 401 (decisions.md#errors)',
  },
  MISSING_AUTHENTICATION_TOKEN: {
    status: 404,
    why: 'API Gateway sends it for a path or method it has no route for: a 404, as the API answers',
  },
  BAD_REQUEST_BODY: { status: 422, why: 'a body that fails validation is a 422 everywhere in the API' },
};

/**
 * Error bodies (`{detail}`, docs/reference/decisions.md#errors) for responses API Gateway generates itself. These
 * templates are plain substitution, not VTL: only API Gateway's own quoted `messageString` (or a
 * fixed text) may stand for a JSON string (lib/aws-rules.ts, GATEWAY_RESPONSE_VARIABLES).
 *
 * CORS (src/http/cors.ts): a gateway response's headers are static values, so it can name one
 * origin, never choose among several; with one console origin it carries it, with several none (a
 * browser then sees API Gateway's own 401/403/429/5xx as a network error: docs/reference/security.md).
 */
export function addGatewayResponses(api: apigw.RestApi, origins: string[]): void {
  const headers: Record<string, string> = { 'Content-Type': "'application/json'" };
  if (origins.length === 1) {
    headers['Access-Control-Allow-Origin'] = `'${origins[0]}'`;
    headers['Access-Control-Expose-Headers'] = `'${CORS_EXPOSE_HEADERS.join(', ')}'`;
  }
  const requestId = '"request_id":"$context.requestId"';
  const fixed = (text: string): string => `{"detail":${JSON.stringify(text)},${requestId}}`;
  const add = (id: string, type: apigw.ResponseType, body: string, extra: Record<string, string> = {}): void => {
    const override = GATEWAY_STATUS_OVERRIDES[type.responseType];
    api.addGatewayResponse(id, {
      type,
      ...(override ? { statusCode: String(override.status) } : {}),
      responseHeaders: { ...headers, ...extra },
      templates: { 'application/json': body },
    });
  };
  add('Unauthorized', apigw.ResponseType.UNAUTHORIZED, fixed('API key missing, invalid or revoked'));
  add('AccessDenied', apigw.ResponseType.ACCESS_DENIED, fixed('API key missing, invalid or revoked'));
  add('MissingAuthToken', apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, fixed('Not Found'));
  add('Throttled', apigw.ResponseType.THROTTLED, fixed('Rate limit exceeded'), { 'Retry-After': "'1'" });
  add('QuotaExceeded', apigw.ResponseType.QUOTA_EXCEEDED, fixed('Rate limit exceeded'), { 'Retry-After': "'60'" });
  add('WafFiltered', apigw.ResponseType.WAF_FILTERED, fixed('Forbidden'));
  // The only body rule API Gateway checks is "a JSON object" (the JsonObject model); its own
  // validationErrorString is unquoted text, so the field error is written out here.
  add(
    'BadRequestBody',
    apigw.ResponseType.BAD_REQUEST_BODY,
    `{"detail":$context.error.messageString,"errors":[{"loc":["body"],"msg":"The request body must be a JSON object","type":"json_invalid"}],${requestId}}`,
  );
  // the fallbacks of every other type: body and headers only, each type keeps its own status
  add('Default4xx', apigw.ResponseType.DEFAULT_4XX, `{"detail":$context.error.messageString,${requestId}}`);
  add('Default5xx', apigw.ResponseType.DEFAULT_5XX, fixed('Internal server error'));
}

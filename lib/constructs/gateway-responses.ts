import * as apigw from 'aws-cdk-lib/aws-apigateway';

/**
 * Error bodies (`{detail}`, docs/reference/decisions.md#errors) and statuses for responses API Gateway generates itself. These
 * templates are plain substitution, not VTL: only API Gateway's own quoted `messageString` (or a
 * fixed text) may stand for a JSON string (lib/aws-rules.ts, GATEWAY_RESPONSE_VARIABLES).
 */
export function addGatewayResponses(api: apigw.RestApi, origins: string[]): void {
  const headers: Record<string, string> = { 'Content-Type': "'application/json'" };
  if (origins.length === 1) headers['Access-Control-Allow-Origin'] = `'${origins[0]}'`;
  const requestId = '"request_id":"$context.requestId"';
  const fixed = (text: string): string => `{"detail":${JSON.stringify(text)},${requestId}}`;
  const add = (
    id: string,
    type: apigw.ResponseType,
    statusCode: string,
    body: string,
    extra: Record<string, string> = {},
  ): void => {
    api.addGatewayResponse(id, {
      type,
      statusCode,
      responseHeaders: { ...headers, ...extra },
      templates: { 'application/json': body },
    });
  };
  add('Unauthorized', apigw.ResponseType.UNAUTHORIZED, '401', fixed('API key missing, invalid or revoked'));
  add('AccessDenied', apigw.ResponseType.ACCESS_DENIED, '401', fixed('API key missing, invalid or revoked'));
  add('MissingAuthToken', apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, '404', fixed('Not Found'));
  add('Throttled', apigw.ResponseType.THROTTLED, '429', fixed('Rate limit exceeded'), { 'Retry-After': "'1'" });
  add('QuotaExceeded', apigw.ResponseType.QUOTA_EXCEEDED, '429', fixed('Rate limit exceeded'), {
    'Retry-After': "'60'",
  });
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

/**
 * Cross-origin access for the web console on another origin (CloudFront, or a dev server): the one
 * CORS policy of every runtime (SiftApp applies it to every response it makes; the node:http adapter
 * to the few it answers itself) and of API Gateway's preflight (lib/api-stack.ts reads the lists here).
 *
 * The AWS rule this rests on, "CORS for REST APIs in API Gateway"
 * (https://docs.aws.amazon.com/apigateway/latest/developerguide/how-to-cors.html): with a proxy
 * integration (the api Lambda, the VPC link to the ECS gateway) API Gateway passes the backend's
 * response through, so the backend must send `Access-Control-Allow-Origin` itself; API Gateway's
 * CORS setting only answers the OPTIONS preflight (a MOCK integration).
 *
 * The policy: an allowlist of exact origins (`SIFT_CONSOLE_ORIGINS`), the request's Origin echoed
 * only when it is on the list (never `*`, never any Origin reflected), `Vary: Origin` so no cache
 * serves one origin's answer to another, no `Access-Control-Allow-Credentials` (keys travel in
 * `X-API-Key`/`Authorization`, which a page must set itself: there are no cookies to lend), and the
 * headers clients read exposed. docs/reference/security.md has the threat model.
 */
import type { ApiResponse } from './types';

/** The methods the API serves (preflight's Access-Control-Allow-Methods). */
export const CORS_ALLOW_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

/**
 * Request headers a browser client may send: the key, JSON, SSE, idempotency, tracing, and what the
 * official OpenAI/Anthropic SDKs set when a page uses them (`dangerouslyAllowBrowser`): their
 * platform and retry headers, the Anthropic version/beta and its browser acknowledgement, OpenAI's
 * organization/project. test/http/cors.test.ts records what the SDKs send, so a header a new SDK
 * release adds fails there rather than in users' browsers.
 */
export const CORS_ALLOW_HEADERS = [
  'Content-Type',
  'Authorization',
  'X-API-Key',
  'Accept',
  'Idempotency-Key',
  'X-Request-Id',
  'anthropic-version',
  'anthropic-beta',
  'anthropic-dangerous-direct-browser-access',
  'OpenAI-Organization',
  'OpenAI-Project',
  'X-Stainless-Arch',
  'X-Stainless-Lang',
  'X-Stainless-OS',
  'X-Stainless-Package-Version',
  'X-Stainless-Retry-Count',
  'X-Stainless-Runtime',
  'X-Stainless-Runtime-Version',
  'X-Stainless-Timeout',
  'X-Stainless-Helper-Method',
  'X-Stainless-Helper',
] as const;

/**
 * Response headers a browser page may read beyond the CORS-safelisted ones (Content-Type and the
 * like): the request id, the rate-limit and retry advice, the inference id, a 405's Allow.
 */
export const CORS_EXPOSE_HEADERS = [
  'x-request-id',
  'request-id',
  'retry-after',
  'x-ratelimit-limit',
  'x-ratelimit-remaining',
  'x-ratelimit-reset',
  'x-ratelimit-reason',
  'x-should-retry',
  'x-inference-id',
  'allow',
] as const;

/** How long a browser may cache a preflight's answer (one hour, as API Gateway's preflight). */
export const CORS_MAX_AGE_SECONDS = 3600;

/**
 * Reads a comma-separated origin list (`SIFT_CONSOLE_ORIGINS`, cdk.json `consoleOrigins`). Each
 * entry must be an exact `http(s)://host[:port]` origin as a browser sends it: `*`, a path, a
 * trailing slash or a default port written out would never match (or match everyone), so they are
 * refused here, at start-up, instead of leaving the console to fail in the browser.
 */
export function parseOrigins(list: string): string[] {
  const out: string[] = [];
  for (const raw of list.split(',')) {
    const entry = raw.trim();
    if (!entry) continue;
    let origin: string | undefined;
    try {
      const url = new URL(entry);
      if (url.protocol === 'http:' || url.protocol === 'https:') origin = url.origin;
    } catch {
      // not a URL: refused below
    }
    if (origin !== entry)
      throw new Error(
        `console origin '${entry}' is not an exact origin: write scheme://host[:port] as the browser sends it${origin ? ` ('${origin}')` : ''}, never '*' or a path`,
      );
    if (!out.includes(origin)) out.push(origin);
  }
  return out;
}

/** Adds `Origin` to a Vary header value, keeping what the response already varies on. */
function varyOnOrigin(existing: string | undefined): string {
  if (!existing) return 'Origin';
  return existing.split(',').some((v) => v.trim().toLowerCase() === 'origin' || v.trim() === '*')
    ? existing
    : `${existing}, Origin`;
}

/**
 * The CORS headers of an actual (non-preflight) response, merged over `headers`: the origin echoed
 * when allowed, and `Vary: Origin` whenever an allowlist is configured (the answer depends on it).
 */
export function withCors(
  allowed: readonly string[],
  origin: string | undefined,
  headers: Record<string, string>,
): Record<string, string> {
  if (allowed.length === 0) return headers;
  const out: Record<string, string> = { ...headers, vary: varyOnOrigin(headers.vary) };
  if (origin !== undefined && allowed.includes(origin)) {
    out['access-control-allow-origin'] = origin;
    out['access-control-expose-headers'] = CORS_EXPOSE_HEADERS.join(', ');
  }
  return out;
}

/**
 * The answer to a CORS preflight (OPTIONS with Origin and Access-Control-Request-Method), or
 * undefined for any other request. A preflight from an origin not on the list gets a 204 without
 * `Access-Control-Allow-Origin`: the browser then refuses the actual request.
 */
export function preflightResponse(
  allowed: readonly string[],
  method: string,
  headers: Record<string, string | undefined>,
): ApiResponse | undefined {
  if (method !== 'OPTIONS' || !headers.origin || !headers['access-control-request-method']) return undefined;
  const base = { vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers' };
  if (!allowed.includes(headers.origin)) return { status: 204, headers: base };
  return {
    status: 204,
    headers: {
      ...base,
      'access-control-allow-origin': headers.origin,
      'access-control-allow-methods': CORS_ALLOW_METHODS.join(', '),
      'access-control-allow-headers': CORS_ALLOW_HEADERS.join(', '),
      'access-control-max-age': String(CORS_MAX_AGE_SECONDS),
    },
  };
}

/**
 * The bucket's CORS rule for the console's presigned uploads, read by lib/data-stack.ts (with the
 * console origins) and by the local S3 front (src/local/storeFront.ts), which answers as S3 does:
 * a preflight whose method or any requested header is not in the rule is refused with 403
 * ("Configuring cross-origin resource sharing (CORS)", https://docs.aws.amazon.com/AmazonS3/latest/userguide/cors.html:
 * each header in Access-Control-Request-Headers must match an AllowedHeader).
 */
export const UPLOAD_CORS = {
  methods: ['PUT', 'GET', 'HEAD'],
  headers: ['content-type', 'content-md5', 'x-amz-checksum-sha256', 'x-amz-sdk-checksum-algorithm'],
  exposeHeaders: ['ETag'],
  maxAgeSeconds: 3000,
} as const;

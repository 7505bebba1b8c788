import { type ApiError, ValidationError } from '../core/errors';
import type { ApiResponse, ErrorFormat } from './types';

const OPENAI_TYPE: Record<number, string> = {
  401: 'invalid_request_error',
  402: 'insufficient_quota',
  403: 'permission_error',
  429: 'rate_limit_error',
  500: 'server_error',
  503: 'server_error',
};
const OPENAI_CODE: Record<number, string> = {
  401: 'invalid_api_key',
  402: 'insufficient_quota',
  404: 'not_found',
  413: 'request_too_large',
  429: 'rate_limit_exceeded',
  503: 'server_is_overloaded',
};
const ANTHROPIC_TYPE: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'overloaded_error',
  529: 'overloaded_error',
};

/**
 * Renders an error in the route's format. Native: `{detail}` (+ `errors` on 422). Vendor formats
 * carry the vendor envelope plus `detail`; body validation failures are 400 there (both vendors
 * answer invalid requests with 400, and the SDKs map it to BadRequestError). Errors a retry cannot
 * fix (out of credits, daily spend cap) carry `x-should-retry: false`, which both SDKs obey.
 */
/** The error body a path's route renders: its own `errorFormat`, else the vendor envelope of `/v1/*`, else `{detail}`. */
export function errorFormatFor(path: string, spec?: { errorFormat?: ErrorFormat | undefined }): ErrorFormat {
  return (
    spec?.errorFormat ?? (path.startsWith('/v1/messages') ? 'anthropic' : path.startsWith('/v1/') ? 'openai' : 'native')
  );
}

export function renderError(format: ErrorFormat, err: ApiError | undefined, requestId: string): ApiResponse {
  const message = err?.message ?? `Internal server error (request id ${requestId})`;
  let status = err?.status ?? 500;
  const headers: Record<string, string> = { ...(err?.headers ?? {}) };
  if (format === 'native') return { status, headers, body: err ? err.toBody() : { detail: message } };
  const extra = err instanceof ValidationError ? { errors: err.errors } : {};
  if (status === 422) status = 400;
  if (status === 402 || headers['x-ratelimit-reason']) headers['x-should-retry'] = 'false';
  if (format === 'openai') {
    const loc = err instanceof ValidationError ? err.errors[0]?.loc : undefined;
    const param = err?.param ?? (loc && loc[0] === 'body' && loc.length > 1 ? loc.slice(1).join('.') : null);
    const code =
      err?.code ??
      (headers['x-ratelimit-reason']
        ? headers['x-ratelimit-reason']
        : (OPENAI_CODE[status] ?? (status === 400 ? 'invalid_value' : null)));
    return {
      status,
      headers,
      body: {
        error: { message, type: OPENAI_TYPE[status] ?? 'invalid_request_error', param, code },
        detail: message,
        ...extra,
      },
    };
  }
  return {
    status,
    headers,
    body: {
      type: 'error',
      error: { type: ANTHROPIC_TYPE[status] ?? 'invalid_request_error', message },
      request_id: requestId,
      detail: message,
      ...extra,
    },
  };
}

/**
 * The service's error hierarchy. Every failure a caller can cause is one of these; anything else
 * is a 500 whose details stay in the logs. Native routes render `{detail}` (422 adds `errors`).
 */
export interface FieldError {
  /** Where the problem is, FastAPI-style: ["body", "datasets", 0, "name"], ["query", "limit"]. */
  loc: (string | number)[];
  msg: string;
  type: string;
}

export abstract class ApiError extends Error {
  abstract readonly status: number;
  /** A short machine-readable kind, used by the vendor-compatible envelopes. */
  abstract readonly kind: string;
  readonly headers: Record<string, string> = {};
  /** Optional hints for the vendor-compatible envelopes (OpenAI `param` / `code`). */
  param?: string;
  code?: string;

  constructor(message: string, hints?: { param?: string; code?: string }) {
    super(message);
    this.name = new.target.name;
    if (hints?.param) this.param = hints.param;
    if (hints?.code) this.code = hints.code;
  }

  toBody(): Record<string, unknown> {
    return { detail: this.message };
  }
}

export class BadRequestError extends ApiError {
  readonly status = 400;
  readonly kind = 'invalid_request_error';
}

export class UnauthorizedError extends ApiError {
  readonly status = 401;
  readonly kind = 'authentication_error';
}

export class PaymentRequiredError extends ApiError {
  readonly status = 402;
  readonly kind = 'insufficient_credits';
}

export class ForbiddenError extends ApiError {
  readonly status = 403;
  readonly kind = 'permission_error';
}

export class NotFoundError extends ApiError {
  readonly status = 404;
  readonly kind = 'not_found_error';
}

export class MethodNotAllowedError extends ApiError {
  readonly status = 405;
  readonly kind = 'invalid_request_error';
}

export class ConflictError extends ApiError {
  readonly status = 409;
  readonly kind = 'conflict_error';
}

export class PayloadTooLargeError extends ApiError {
  readonly status = 413;
  readonly kind = 'request_too_large';
}

export class UnsupportedMediaTypeError extends ApiError {
  readonly status = 415;
  readonly kind = 'invalid_request_error';
}

export class ValidationError extends ApiError {
  readonly status = 422;
  readonly kind = 'invalid_request_error';

  constructor(
    readonly errors: FieldError[],
    message?: string,
  ) {
    super(message ?? ValidationError.summarize(errors));
  }

  /** One field error, the common case in hand-written checks. */
  static field(loc: (string | number)[], msg: string, type = 'value_error'): ValidationError {
    return new ValidationError([{ loc, msg, type }]);
  }

  private static summarize(errors: FieldError[]): string {
    const parts = errors.slice(0, 5).map((e) => `${e.loc.join('.')}: ${e.msg}`);
    const more = errors.length > 5 ? ` (and ${errors.length - 5} more)` : '';
    return `Validation failed: ${parts.join('; ')}${more}`;
  }

  override toBody(): Record<string, unknown> {
    return { detail: this.message, errors: this.errors };
  }
}

export class RateLimitError extends ApiError {
  readonly status = 429;
  readonly kind = 'rate_limit_error';

  constructor(message: string, retryAfterSeconds: number, reason?: string) {
    super(message);
    this.headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterSeconds)));
    if (reason) this.headers['x-ratelimit-reason'] = reason;
  }
}

export class ServiceUnavailableError extends ApiError {
  readonly status = 503;
  readonly kind = 'overloaded_error';

  /** `retryAfterSeconds`: when the condition is expected to clear (sent as Retry-After). */
  constructor(message: string, retryAfterSeconds?: number) {
    super(message);
    if (retryAfterSeconds !== undefined)
      this.headers['retry-after'] = String(Math.max(1, Math.ceil(retryAfterSeconds)));
  }
}

/** How long a caller waits before retrying a request a store could not serve (Retry-After). */
export const STORE_RETRY_AFTER_SECONDS = 3;

/**
 * A store the service depends on did not answer: throttled, a server error, unreachable. The
 * adapters raise it (src/adapters/storeErrors.ts) in the core's terms, so neither the core nor the
 * pipeline sees AWS types; it is never "not found". Callers get 503 + Retry-After; the cause goes
 * to the log with the request id (src/http/app.ts).
 */
export class StoreUnavailableError extends ServiceUnavailableError {
  override readonly cause: unknown;

  constructor(
    readonly store: 'records' | 'blobs',
    /** What went wrong, in a few words ("throttled", "unreachable", "server error"). */
    readonly reason: string,
    cause: unknown,
  ) {
    super(
      `The ${store === 'records' ? 'record' : 'blob'} store is unavailable (${reason}); retry in a few seconds`,
      STORE_RETRY_AFTER_SECONDS,
    );
    this.cause = cause;
  }
}

/**
 * For `.catch(notFoundAsUndefined)`: a lookup whose target may be missing answers undefined for
 * exactly that (NotFoundError); every other failure, a store outage above all, propagates.
 */
export function notFoundAsUndefined(err: unknown): undefined {
  if (err instanceof NotFoundError) return undefined;
  throw err;
}

/**
 * For `.catch(changedOrGoneAsUndefined)` on a compensating state change (mark a job failed after its
 * launch failed): a record that meanwhile moved on (ConflictError) or was deleted (NotFoundError)
 * needs no change; every other failure propagates.
 */
export function changedOrGoneAsUndefined(err: unknown): undefined {
  if (err instanceof ConflictError || err instanceof NotFoundError) return undefined;
  throw err;
}

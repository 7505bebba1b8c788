/**
 * AWS SDK failures that mean "the store is not answering right now", in the core's terms. The
 * records (DynamoDB) and blobs (S3) adapters pass every SDK error through `storeFailure`: throttling,
 * 5xx and network failures become `StoreUnavailableError` (503 + Retry-After); anything else (a
 * validation error, access denied, a missing table) stays what it is, a 500 with its cause logged.
 *
 * The classification is the SDK's own (the rules its retry strategy uses), so an error the SDK
 * already retried as transient is the error we call unavailable once its retries are spent.
 */
import { isServerError, isThrottlingError, isTransientError } from '@smithy/core/retry';
import { StoreUnavailableError } from '../core/errors';

type SdkError = Parameters<typeof isTransientError>[0];

/** A few words for the log and the caller: why the store did not serve the request. */
function unavailableReason(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null) return undefined;
  const e = err as SdkError;
  if (isThrottlingError(e)) return 'throttled';
  if (isTransientError(e))
    return e.$metadata?.httpStatusCode ? `server error ${e.$metadata.httpStatusCode}` : 'unreachable';
  if (isServerError(e)) return `server error ${e.$metadata?.httpStatusCode}`;
  return undefined;
}

/** The error a store adapter throws for an SDK failure: `StoreUnavailableError` or the error itself. */
export function storeFailure(store: 'records' | 'blobs', err: unknown): unknown {
  if (err instanceof StoreUnavailableError) return err;
  const reason = unavailableReason(err);
  return reason ? new StoreUnavailableError(store, reason, err) : err;
}

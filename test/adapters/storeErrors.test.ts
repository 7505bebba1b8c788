/**
 * Which SDK failures the store adapters report as StoreUnavailableError (503 + Retry-After), with
 * the error shapes the AWS SDK v3 produces: a refused connection (as `sift serve` saw it with the
 * emulator stopped: `code` ECONNREFUSED and `$metadata`), DynamoDB throttling, 5xx, S3 SlowDown —
 * and what stays a plain error (a 500): validation, access, a missing table.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { storeFailure } from '../../src/adapters/storeErrors';
import { DynamoRecordStore } from '../../src/adapters/dynamodb/recordStore';
import { StoreUnavailableError, STORE_RETRY_AFTER_SECONDS } from '../../src/core/errors';
import { WriteConflict } from '../../src/core/ports';

const sdkError = (name: string, status: number | undefined, extra: object = {}) =>
  Object.assign(new Error(`${name} from the service`), {
    name,
    $metadata: status === undefined ? {} : { httpStatusCode: status },
    ...extra,
  });

describe('storeFailure: unavailable means throttled, 5xx or unreachable', () => {
  it.each([
    [
      'a refused connection',
      Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:8000'), {
        code: 'ECONNREFUSED',
        $metadata: { attempts: 3 },
      }),
      'unreachable',
    ],
    [
      'a reset connection',
      Object.assign(new Error('socket hang up'), { code: 'ECONNRESET', $metadata: {} }),
      'unreachable',
    ],
    [
      'a DNS failure',
      Object.assign(new Error('getaddrinfo ENOTFOUND dynamodb'), { code: 'ENOTFOUND', $metadata: {} }),
      'unreachable',
    ],
    ['a request timeout', sdkError('TimeoutError', undefined), 'unreachable'],
    ['DynamoDB throttling', sdkError('ThrottlingException', 400), 'throttled'],
    ['DynamoDB over provisioned throughput', sdkError('ProvisionedThroughputExceededException', 400), 'throttled'],
    ['DynamoDB over the account request limit', sdkError('RequestLimitExceeded', 400), 'throttled'],
    ['S3 SlowDown', sdkError('SlowDown', 503), 'throttled'],
    ['DynamoDB InternalServerError', sdkError('InternalServerError', 500), 'server error 500'],
    ['a 503 ServiceUnavailable', sdkError('ServiceUnavailable', 503), 'server error 503'],
    ['a 501 from a proxy', sdkError('NotImplemented', 501), 'server error 501'],
  ])('%s → StoreUnavailableError', (_what, err, reason) => {
    const mapped = storeFailure('records', err);
    expect(mapped).toBeInstanceOf(StoreUnavailableError);
    expect(mapped).toMatchObject({
      status: 503,
      store: 'records',
      reason,
      cause: err,
      headers: { 'retry-after': String(STORE_RETRY_AFTER_SECONDS) },
    });
  });

  it.each([
    ['a DynamoDB validation error (an item over 400 KB)', sdkError('ValidationException', 400)],
    ['access denied', sdkError('AccessDeniedException', 400)],
    ['a missing table', sdkError('ResourceNotFoundException', 400)],
    ['a plain programming error', new TypeError('x is not a function')],
    ['something not an error', 'just a string'],
  ])('%s stays what it is (a 500 with its cause logged)', (_what, err) => {
    expect(storeFailure('blobs', err)).toBe(err);
  });
});

describe("the DynamoDB adapter speaks the core's terms", () => {
  /** A DynamoDB client whose every call fails with `err`, as the SDK would throw it. */
  const storeFailingWith = (err: unknown) => {
    const store = new DynamoRecordStore(
      new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } }),
      'sift-records',
    );
    store.doc.send = (async () => {
      throw err;
    }) as typeof store.doc.send;
    return store;
  };

  it('every operation turns throttling into StoreUnavailableError, reads and queries included', async () => {
    const store = storeFailingWith(sdkError('ThrottlingException', 400));
    for (const call of [
      () => store.get('TEAM#t', 'JOB#j'),
      () => store.query('TEAM#t', { beginsWith: 'JOB#' }),
      () => store.queryAll('TEAM#t'),
      () => store.put({ pk: 'TEAM#t', sk: 'X' }, {}),
      () => store.putAll([{ keys: { pk: 'TEAM#t', sk: 'X' }, record: {} }]),
      () => store.update('TEAM#t', 'X', { set: { a: 1 } }),
      () => store.delete('TEAM#t', 'X'),
    ]) {
      await expect(call()).rejects.toBeInstanceOf(StoreUnavailableError);
    }
  });

  it('a failed condition is still WriteConflict, and a validation error still itself', async () => {
    await expect(
      storeFailingWith(sdkError('ConditionalCheckFailedException', 400)).put(
        { pk: 'a', sk: 'b' },
        {},
        { ifAbsent: true },
      ),
    ).rejects.toBeInstanceOf(WriteConflict);
    const invalid = sdkError('ValidationException', 400);
    await expect(storeFailingWith(invalid).get('a', 'b')).rejects.toBe(invalid);
  });
});

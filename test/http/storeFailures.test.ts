/**
 * A store that fails is a 503 with Retry-After and an error log line carrying the request id —
 * never "not found", never silence (#25 item 6). Here part of the record store (chosen by key) and
 * the whole blob store are the real DynamoDB and S3 adapters pointed at an endpoint that answers
 * as an overloaded DynamoDB (ThrottlingException) and S3 (503 SlowDown) do, so the failure is the
 * SDK's own error, turned into StoreUnavailableError by the adapters (src/adapters/storeErrors.ts)
 * and answered by the pipeline (src/http/app.ts). (A refused connection is classified in
 * test/adapters/storeErrors.test.ts: under Jest's VM realms the SDK wraps node's socket errors
 * and drops their code.)
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { jest } from '@jest/globals';
import { createServer, type Server } from 'node:http';
import { DynamoRecordStore } from '../../src/adapters/dynamodb/recordStore';
import { S3BlobStore } from '../../src/adapters/s3/blobStore';
import type { BlobStore, RecordStore } from '../../src/core/ports';
import { jobItem } from '../../src/core/recordKeys';
import { silentLogger } from '../../src/http/logger';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
let teamId: string;
let records: RecordStore;
let overloaded: Server;
let deadRecords: DynamoRecordStore;
let deadBlobs: S3BlobStore;
/** Which records fail: a predicate on the partition and the sort key (or query prefix). */
let failing: (pk: string, sk: string) => boolean = () => false;

/** An endpoint answering every call as an overloaded DynamoDB (JSON protocol) or S3 (REST/XML) does. */
async function overloadedAws(): Promise<string> {
  overloaded = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.headers['x-amz-target']) {
        res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
        res.end(
          JSON.stringify({
            __type: 'com.amazonaws.dynamodb.v20120810#ThrottlingException',
            message: 'Rate of requests exceeds the allowed throughput.',
          }),
        );
      } else {
        res.writeHead(503, { 'content-type': 'application/xml' });
        res.end(
          '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>',
        );
      }
    });
  });
  await new Promise<void>((ok) => overloaded.listen(0, '127.0.0.1', () => ok()));
  return `http://127.0.0.1:${(overloaded.address() as { port: number }).port}`;
}

/** The stack's record store, except that keys `failing` names go to the unreachable DynamoDB. */
function partlyFailing(real: RecordStore, dead: RecordStore): RecordStore {
  const pick = (pk: string, sk = '') => (failing(pk, sk) ? dead : real);
  return {
    get: (pk, sk, consistent) => pick(pk, sk).get(pk, sk, consistent),
    put: (keys, record, opts) => pick(keys.pk, keys.sk).put(keys, record, opts),
    putAll: (items) => real.putAll(items),
    update: (pk, sk, change) => pick(pk, sk).update(pk, sk, change),
    delete: (pk, sk, condition) => pick(pk, sk).delete(pk, sk, condition),
    query: (partition, opts) => pick(partition, opts?.beginsWith).query(partition, opts),
    queryAll: (partition, opts) => pick(partition, opts?.beginsWith).queryAll(partition, opts),
  } as RecordStore;
}

/** The blob store the stack serves with: its own, or the overloaded one while a test says so. */
let blobsDown = false;
function switchableBlobs(real: BlobStore): BlobStore {
  return new Proxy(real, {
    get(target, prop) {
      const store = blobsDown ? deadBlobs : target;
      const value = Reflect.get(store, prop, store) as unknown;
      return typeof value === 'function' ? value.bind(store) : value;
    },
  });
}

beforeAll(async () => {
  const endpoint = await overloadedAws();
  const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
  // one attempt: the SDK's backed-off retries of a throttled call would only slow the test down
  deadRecords = new DynamoRecordStore(
    new DynamoDBClient({ endpoint, region: 'us-east-1', credentials, maxAttempts: 1 }),
    'sift-records',
  );
  deadBlobs = new S3BlobStore(
    new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials, maxAttempts: 1 }),
    'sift-data',
  );
  // the stack's graph is read-only: the failing stores go in through its composition, around its own
  stack = await TestStack.start({
    ports: (own) => {
      records = own.records;
      // start-up creates the table through the graph's store: the wrapper passes that on
      const wrapped = Object.assign(partlyFailing(own.records, deadRecords), {
        ensureTable: () => own.records.ensureTable(),
      });
      return { records: wrapped, blobs: switchableBlobs(own.blobs) };
    },
  });
  teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
}, 120_000);
afterEach(() => {
  failing = () => false;
  blobsDown = false;
  jest.restoreAllMocks();
});
afterAll(async () => {
  await stack?.stop();
  await new Promise((ok) => overloaded?.close(ok));
});

const UUID = '0b0e9a8e-5f4e-4c6a-9a53-3f1c2d4e5f60';
/** A complete encoder job's record under UUID, for the lookups that come after it. */
async function withCompleteJob(body: () => Promise<void>): Promise<void> {
  const item = jobItem(teamId, UUID);
  await records.put(item, {
    id: UUID,
    status: 'complete',
    model_type: 'encoder',
    model_name: 'm',
    base_model: 'sift/gliner2-mini-v1',
    created_at: new Date().toISOString(),
  });
  try {
    await body();
  } finally {
    await records.delete(item.pk, item.sk);
  }
}

const failSortKeys = (...prefixes: string[]) => {
  failing = (_pk, sk) => prefixes.some((p) => sk.startsWith(p));
};

/** The answer is the store's 503 (Retry-After, detail) and one error line names its request id. */
async function expectStoreUnavailable(
  method: string,
  path: string,
  opts: Parameters<TestStack['call']>[2] = {},
  reason: string | RegExp = 'throttled',
) {
  jest.restoreAllMocks();
  const logged = jest.spyOn(silentLogger, 'error');
  const res = await stack.call(method, path, opts);
  expect({ status: res.status, body: res.body }).toEqual({
    status: 503,
    body: expect.objectContaining({ detail: expect.stringMatching(/store is unavailable/) }),
  });
  expect(res.headers.get('retry-after')).toBe('3');
  const lines = logged.mock.calls.filter(([message]) => message === 'store unavailable');
  expect(lines).toEqual([
    [
      'store unavailable',
      expect.objectContaining({
        request_id: res.headers.get('x-request-id'),
        reason: typeof reason === 'string' ? reason : expect.stringMatching(reason),
      }),
    ],
  ]);
  return res;
}

describe('a record store that fails is a 503, not "not found" (#25 item 6)', () => {
  it('inference on a project name: 503, not 404 "model does not exist"', async () => {
    failSortKeys('PROJECTNAME#');
    await expectStoreUnavailable('POST', '/inference', {
      body: { model_id: 'support-ner', text: 'Tim Cook', schema: { entities: ['person'] } },
    });
  });

  it('inference on a training job id: 503, not 404', async () => {
    failSortKeys('JOB#');
    await expectStoreUnavailable('POST', '/inference', {
      body: { model_id: UUID, text: 'Tim Cook', schema: { entities: ['person'] } },
    });
  });

  it('GET of a training job: 503', async () => {
    failSortKeys('JOB#');
    await expectStoreUnavailable('GET', `/core/training-jobs/${UUID}`);
  });

  it("a project's deployments: listing them is a 503, and promoting a job whose record cannot be read is a 503, not 422 'no training job'", async () => {
    expect((await stack.call('POST', '/projects', { body: { name: 'store-down' } })).status).toBe(201);
    failSortKeys('PROJDEP#');
    await expectStoreUnavailable('GET', '/projects/store-down/deployments');
    failSortKeys('JOB#');
    await expectStoreUnavailable('POST', '/projects/store-down/deployments', { body: { training_job_id: UUID } });
  });

  it("deploying a job's checkpoint whose record cannot be read: 503, not 422 'not a checkpoint'", async () => {
    await withCompleteJob(async () => {
      failSortKeys('CKPT#');
      await expectStoreUnavailable('POST', `/core/training-jobs/${UUID}/deploy`, {
        body: { checkpoint_id: '7c9e6679-7425-40de-944b-e07fc1f90ae7' },
      });
    });
  });

  it("an evaluation of a job, or in a project, whose record cannot be read: 503, not 422 'no training job' / 'no project'", async () => {
    failSortKeys('JOB#');
    await expectStoreUnavailable('POST', '/core/evaluations', { body: { base_model: UUID, dataset_name: 'anything' } });
    await withCompleteJob(async () => {
      failSortKeys('PROJECTNAME#');
      await expectStoreUnavailable('POST', '/core/evaluations', {
        body: { base_model: UUID, dataset_name: 'anything', project_id: 'support-ner' },
      });
    });
  });

  it('stored inferences filtered by a project name: 503, not an empty list', async () => {
    failSortKeys('PROJECTNAME#');
    await expectStoreUnavailable('GET', '/inferences?project_id=support-ner');
  });

  it('a public route called with a key the store cannot check: 503, not served as anonymous (its usage would go uncounted)', async () => {
    failing = (pk) => pk.startsWith('KEY#');
    await expectStoreUnavailable('GET', '/v1/models', { key: 'svc_sk_never-seen-before-key-0123456789abcdefghijkl' });
  });
});

describe('a blob store that fails is a 503 (#25 item 6)', () => {
  it('processing an upload whose object the store cannot check: 503', async () => {
    const url = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: 'blobs-down', file_name: 'rows.jsonl' },
    });
    expect(url.status).toBe(200);
    blobsDown = true;
    // HeadObject answers have no body: the SDK sees the 503 alone
    await expectStoreUnavailable(
      'POST',
      '/core/datasets/upload/process',
      { body: { dataset_name: 'blobs-down', version: url.body.version } },
      /throttled|server error 503/,
    );
  });
});

it('the service answers again once the store does', async () => {
  expect((await stack.call('GET', `/core/training-jobs/${UUID}`)).status).toBe(404);
  expect((await stack.call('GET', '/health')).status).toBe(200);
});

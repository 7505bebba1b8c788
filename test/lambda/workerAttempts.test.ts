/**
 * The AWS path of dataset processing (issue #25 row 3): the real worker Lambda (lambdas/worker.ts)
 * against the emulators. A Lambda killed mid-validation (out of memory, its 15-minute limit) runs no
 * catch, so SQS redelivers; each delivery claims an attempt on the record first, and the delivery
 * after the last attempt (SQS delivers at most 3 times) marks the version failed instead of dying
 * again into the DLQ with the version stuck `processing`.
 */
import type { Context, SQSEvent } from 'aws-lambda';
import { MAX_PROCESSING_ATTEMPTS } from '../../src/core/datasets/service';
import { emulatorEnv, lambdaContext as context } from '../helpers/lambdaEvents';
import { jsonl, TestStack } from '../helpers/localStack';

let stack: TestStack;
let worker: (e: SQSEvent, c: Context) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;
const saved = { ...process.env };

beforeAll(async () => {
  stack = await TestStack.start();
  Object.assign(process.env, await emulatorEnv(stack.svc), {
    SIFT_QUEUE_URL: 'http://127.0.0.1:1/000000000000/unused',
    AWS_ENDPOINT_URL_SQS: 'http://127.0.0.1:1',
  });
  worker = (await import('../../lambdas/worker')).handler as unknown as typeof worker;
});
afterAll(async () => {
  process.env = saved;
  await stack.stop();
});

/** An uploaded version, put in `processing` as POST …/process does before its message goes to SQS. */
async function processingVersion(name: string, content: string) {
  const team = await stack.newTeam(name);
  const url = await stack.call('POST', '/core/datasets/upload/url', {
    key: team.key,
    body: { dataset_name: name, file_name: 'rows.jsonl' },
  });
  expect((await fetch(url.body.upload_url, { method: 'PUT', body: content })).status).toBe(200);
  const pk = `TEAM#${team.teamId}`;
  const sk = `DSV#${name}#000001`;
  await stack.svc.records.update(pk, sk, {
    set: {
      status: 'processing',
      size_bytes: Buffer.byteLength(content),
      processing_started_at: new Date().toISOString(),
    },
  });
  const body = JSON.stringify({ type: 'dataset.process', team_id: team.teamId, dataset_name: name, version: 1 });
  const event = { Records: [{ messageId: `m-${name}`, body } as SQSEvent['Records'][number]] };
  const read = async () => (await stack.call('GET', `/core/datasets/${name}/1`, { key: team.key })).body;
  return { team, pk, sk, event, read };
}

describe('the worker Lambda and a version whose deliveries died', () => {
  it('each delivery claims an attempt on the record before reading the file', async () => {
    const v = await processingVersion('claimed', jsonl([{ text: 'a', label: 'x' }]));
    expect(await worker(v.event, context)).toEqual({ batchItemFailures: [] });
    expect(await stack.svc.records.get(v.pk, v.sk)).toMatchObject({ status: 'ready', processing_attempts: 1 });
    // bookkeeping, not part of the API
    expect(await v.read()).not.toHaveProperty('processing_attempts');
  });

  it(`after ${MAX_PROCESSING_ATTEMPTS} deliveries that died, the next marks it failed with the reason and succeeds`, async () => {
    const v = await processingVersion('poisoned', jsonl([{ text: 'a', label: 'x' }]));
    // what two invocations killed after their claim leave on the record
    await stack.svc.records.update(v.pk, v.sk, { add: { processing_attempts: MAX_PROCESSING_ATTEMPTS } });
    expect(await worker(v.event, context)).toEqual({ batchItemFailures: [] });
    const failed = await v.read();
    expect(failed).toMatchObject({
      status: 'failed',
      error_count: 1,
      errors: [
        {
          row: null,
          field: null,
          message: expect.stringMatching(
            /^validation of this version stopped the worker 2 times: each attempt ended without a result/,
          ),
        },
      ],
    });
    expect((await stack.call('GET', '/core/datasets/poisoned/1/report', { key: v.team.key })).body).toMatchObject({
      status: 'failed',
      errors: failed.errors,
    });
    // a late redelivery changes nothing
    expect(await worker(v.event, context)).toEqual({ batchItemFailures: [] });
    expect(await v.read()).toEqual(failed);
  });

  it('a file replaced by a bigger one after the size check fails with the reason, not streamed whole', async () => {
    const small = jsonl([{ text: 'a', label: 'x' }]);
    const v = await processingVersion('replaced', small);
    const [sourceKey] = (await stack.svc.blobs.list(`datasets/${v.team.teamId}/replaced/v1/source/`)) as [string];
    await stack.svc.blobs.put(
      sourceKey,
      jsonl(Array.from({ length: 20_000 }, (_, i) => ({ text: `row ${i}`, label: 'x' }))),
    );
    expect(await worker(v.event, context)).toEqual({ batchItemFailures: [] });
    expect(await v.read()).toMatchObject({
      status: 'failed',
      errors: [
        {
          row: null,
          field: null,
          message: expect.stringMatching(
            new RegExp(
              `^the stored file is larger than the ${Buffer.byteLength(small)} bytes checked when processing started`,
            ),
          ),
        },
      ],
    });
  });
});

/**
 * Dataset processing when its worker dies, its file changes, or its dataset is deleted meanwhile
 * (issue #25 row 3: a version that crashed its worker is failed with the reason, not re-queued
 * forever; security review F4, F9). On the in-memory service graph; a "death" is an attempt that
 * claimed the version and never finished, which is what a killed process leaves behind.
 */
import { createMemoryServices, type MemoryServices } from '../../../src/adapters/memory/services';
import { recoverInterruptedWork } from '../../../src/core/bootstrap';
import {
  createUploadUrl,
  deleteDataset,
  getReport,
  getVersion,
  MAX_PROCESSING_ATTEMPTS,
  PROCESSING_STALE_MS,
  processVersion,
  sourceKey,
  startProcessing,
} from '../../../src/core/datasets/service';
import { validateDataset } from '../../../src/adapters/fs/datasetFiles';
import { REPORT_LIMITS, type DatasetValidator } from '../../../src/core/datasets/validation';
import { ConflictError } from '../../../src/core/errors';
import { createTeam } from '../../../src/core/teams';
import { handleWorkMessage } from '../../../src/core/worker';

const jsonl = (rows: object[]) => `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;

let clock = Date.parse('2026-11-27T10:00:00Z');
async function setUp(): Promise<{ svc: MemoryServices; teamId: string }> {
  const svc = createMemoryServices({ now: () => new Date(clock) });
  const team = await createTeam(svc, { name: 'acme' });
  return { svc, teamId: team.id };
}

/** Reserves, uploads and starts processing; the queued message is left in `svc.sent`. */
async function uploaded(svc: MemoryServices, teamId: string, name: string, content: string) {
  const url = await createUploadUrl(svc, teamId, { dataset_name: name, file_name: 'rows.jsonl', new_version: true });
  await svc.blobs.put(sourceKey(teamId, await getVersion(svc, teamId, name, url.version)), content);
  await startProcessing(svc, teamId, name, url.version);
  return url.version;
}

/** A validator whose process dies: the attempt never finishes (nothing after the claim is written). */
const dies: DatasetValidator = async () => {
  throw new Error('process killed (simulated)');
};

const rawVersion = (svc: MemoryServices, teamId: string, name: string, version = 1) =>
  svc.records.get<Record<string, unknown>>(`TEAM#${teamId}`, `DSV#${name}#${String(version).padStart(6, '0')}`);

describe('a version whose processing keeps killing its worker', () => {
  it(`is failed with the reason after ${MAX_PROCESSING_ATTEMPTS} attempts, at start-up, and not re-queued`, async () => {
    const { svc, teamId } = await setUp();
    await uploaded(svc, teamId, 'poison', jsonl([{ text: 'a', label: 'x' }]));
    expect(svc.sent.splice(0)).toEqual([
      { type: 'dataset.process', team_id: teamId, dataset_name: 'poison', version: 1 },
    ]);

    for (let attempt = 1; attempt <= MAX_PROCESSING_ATTEMPTS; attempt += 1) {
      // processVersion alone (not handleWorkMessage, whose catch would record the error): the process died
      await expect(processVersion(svc, teamId, 'poison', 1, dies)).rejects.toThrow('process killed');
      expect(await rawVersion(svc, teamId, 'poison')).toMatchObject({
        status: 'processing',
        processing_attempts: attempt,
      });
      // local start-up after the crash
      await recoverInterruptedWork(svc);
      const queued = svc.sent.splice(0);
      if (attempt < MAX_PROCESSING_ATTEMPTS) expect(queued).toHaveLength(1);
      else expect(queued).toEqual([]);
    }
    const v = await getVersion(svc, teamId, 'poison', 1);
    expect(v).toMatchObject({
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
    expect((await getReport(svc, teamId, 'poison', 1)).errors).toEqual(v.errors);
    // the bookkeeping stays off the API
    expect(v).not.toHaveProperty('processing_attempts');
    // and a later start finds nothing to do
    expect((await recoverInterruptedWork(svc)).datasets).toBe(0);
    expect(svc.sent).toEqual([]);
  });

  it('the SQS path: the delivery after the last attempt marks it failed and succeeds (so the message leaves the queue, not for the DLQ)', async () => {
    const { svc, teamId } = await setUp();
    await uploaded(svc, teamId, 'poison', jsonl([{ text: 'a', label: 'x' }]));
    const [message] = svc.sent.splice(0);
    for (let i = 0; i < MAX_PROCESSING_ATTEMPTS; i += 1)
      await expect(processVersion(svc, teamId, 'poison', 1, dies)).rejects.toThrow();
    // delivery number MAX+1 (SQS maxReceiveCount is 3): no validation is run at all
    let validated = false;
    const noted: DatasetValidator = async (s, j) => {
      validated = true;
      return validateDataset(s, j);
    };
    await handleWorkMessage(svc, message!, { validateDataset: noted });
    expect(validated).toBe(false);
    expect((await getVersion(svc, teamId, 'poison', 1)).errors[0]!.message).toMatch(/stopped the worker 2 times/);
    // a further redelivery is a no-op
    await handleWorkMessage(svc, message!);
    expect((await getVersion(svc, teamId, 'poison', 1)).status).toBe('failed');
  });

  it('an attempt that fails with an error (not a death) fails the version at once with that reason', async () => {
    const { svc, teamId } = await setUp();
    await uploaded(svc, teamId, 'broken', jsonl([{ text: 'a', label: 'x' }]));
    const [message] = svc.sent.splice(0);
    await expect(
      handleWorkMessage(svc, message!, {
        validateDataset: async () => Promise.reject(new Error('the validation worker ran out of memory')),
      }),
    ).rejects.toThrow();
    expect((await getVersion(svc, teamId, 'broken', 1)).errors).toEqual([
      { row: null, field: null, message: 'processing failed: the validation worker ran out of memory' },
    ]);
  });

  it('a version that died once and then succeeds is ready', async () => {
    const { svc, teamId } = await setUp();
    await uploaded(svc, teamId, 'flaky', jsonl([{ text: 'a', label: 'x' }]));
    const [message] = svc.sent.splice(0);
    await expect(processVersion(svc, teamId, 'flaky', 1, dies)).rejects.toThrow();
    await handleWorkMessage(svc, message!);
    expect(await getVersion(svc, teamId, 'flaky', 1)).toMatchObject({ status: 'ready', row_count: 1 });
  });
});

describe('the bytes processing reads (F9)', () => {
  it('a file replaced by a bigger one after the size check is not read past the checked size, and fails with the reason', async () => {
    const { svc, teamId } = await setUp();
    const small = jsonl([{ text: 'a', label: 'x' }]);
    await uploaded(svc, teamId, 'swapped', small);
    const [message] = svc.sent.splice(0);
    // re-PUT through the same URL between POST …/process and the worker
    const big = jsonl(Array.from({ length: 5000 }, (_, i) => ({ text: `row ${i}`, label: 'x' })));
    await svc.blobs.put(sourceKey(teamId, await getVersion(svc, teamId, 'swapped', 1)), big);
    let bytesSeen = 0;
    const counting: DatasetValidator = async (source, job) => {
      async function* counted() {
        for await (const chunk of source) {
          bytesSeen += chunk.length;
          yield chunk;
        }
      }
      return validateDataset(counted(), job);
    };
    await handleWorkMessage(svc, message!, { validateDataset: counting });
    expect(bytesSeen).toBeLessThanOrEqual(Buffer.byteLength(small));
    expect(await getVersion(svc, teamId, 'swapped', 1)).toMatchObject({
      status: 'failed',
      errors: [
        {
          row: null,
          field: null,
          message: `the stored file is larger than the ${Buffer.byteLength(small)} bytes checked when processing started: it was replaced after the check, so it is not processed; upload it as a new version`,
        },
      ],
    });
  });

  it('a file replaced by a shorter one fails too', async () => {
    const { svc, teamId } = await setUp();
    const content = jsonl([
      { text: 'a', label: 'x' },
      { text: 'b', label: 'y' },
    ]);
    await uploaded(svc, teamId, 'shrunk', content);
    const [message] = svc.sent.splice(0);
    await svc.blobs.put(
      sourceKey(teamId, await getVersion(svc, teamId, 'shrunk', 1)),
      jsonl([{ text: 'a', label: 'x' }]),
    );
    await handleWorkMessage(svc, message!);
    expect((await getVersion(svc, teamId, 'shrunk', 1)).errors[0]!.message).toMatch(
      /^the stored file has \d+ bytes, not the \d+ checked/,
    );
  });
});

describe('the report of an error storm', () => {
  it(`keeps at most ${REPORT_LIMITS.errors} errors within ${REPORT_LIMITS.bytes} bytes, and counts them all`, async () => {
    const { svc, teamId } = await setUp();
    const longName = 'c'.repeat(250);
    const rows = Array.from({ length: 20_000 }, (_, i) => ({ text: `row ${i}`, label: 'x', [`${longName}${i}`]: 1 }));
    await uploaded(svc, teamId, 'storm', jsonl(rows));
    for (const m of svc.sent.splice(0)) await handleWorkMessage(svc, m);
    const v = await getVersion(svc, teamId, 'storm', 1);
    expect(v).toMatchObject({ status: 'failed', error_count: 20_000 });
    expect(v.errors).toHaveLength(100);
    const reportKey = (await svc.blobs.list('datasets/')).find((k) => k.endsWith('/storm/v1/report.json'))!;
    const stored = await svc.blobs.getText(reportKey);
    expect(Buffer.byteLength(stored)).toBeLessThanOrEqual(REPORT_LIMITS.bytes + 100);
    const report = JSON.parse(stored) as { error_count: number; errors: { row: number; field: string }[] };
    expect(report.error_count).toBe(20_000);
    expect(report.errors.length).toBeGreaterThan(1000);
    expect(report.errors.length).toBeLessThanOrEqual(REPORT_LIMITS.errors);
    // the errors kept are the first ones, row numbers and fields exact
    expect(report.errors.slice(0, 3).map((e) => [e.row, e.field])).toEqual([
      [1, `${longName}0`],
      [2, `${longName}1`],
      [3, `${longName}2`],
    ]);
  });
});

describe('DELETE of a dataset with a version processing', () => {
  it('is refused while processing is live, and allowed once it has been stuck for PROCESSING_STALE_MS', async () => {
    const { svc, teamId } = await setUp();
    await uploaded(svc, teamId, 'stuck', jsonl([{ text: 'a', label: 'x' }]));
    // the message is lost: nothing ever processes it (on AWS, a DLQ'd message)
    svc.sent.splice(0);
    await expect(deleteDataset(svc, teamId, 'stuck')).rejects.toThrow(ConflictError);
    clock += PROCESSING_STALE_MS - 1000;
    await expect(deleteDataset(svc, teamId, 'stuck')).rejects.toThrow(/being processed \(version 1\)/);
    clock += 2000;
    await deleteDataset(svc, teamId, 'stuck');
    await expect(getVersion(svc, teamId, 'stuck', 1)).rejects.toThrow(/not found/);
    expect(await svc.blobs.list(`datasets/${teamId}/stuck/`)).toEqual([]);
  });

  it("a late worker's result never lands on a deleted version, nor on one re-created under its name", async () => {
    const { svc, teamId } = await setUp();
    await uploaded(svc, teamId, 'reborn', jsonl([{ text: 'old', label: 'old' }]));
    const [message] = svc.sent.splice(0);
    // The first worker is slow: while it validates, the version goes stale, is deleted and is uploaded anew.
    const slow: DatasetValidator = async (source, job) => {
      const outcome = await validateDataset(source, job);
      clock += PROCESSING_STALE_MS + 1000;
      await deleteDataset(svc, teamId, 'reborn');
      await uploaded(svc, teamId, 'reborn', jsonl([{ text: 'new', label: 'new' }]));
      return outcome;
    };
    await handleWorkMessage(svc, message!, { validateDataset: slow });
    // the new version 1 is untouched by the old attempt: still processing, no rows file from the old one
    expect(await getVersion(svc, teamId, 'reborn', 1)).toMatchObject({ status: 'processing', label_vocabulary: [] });
    expect((await svc.blobs.list(`datasets/${teamId}/reborn/`)).filter((k) => k.endsWith('/v1/rows.jsonl'))).toEqual(
      [],
    );
    for (const m of svc.sent.splice(0)) await handleWorkMessage(svc, m);
    expect(await getVersion(svc, teamId, 'reborn', 1)).toMatchObject({ status: 'ready', label_vocabulary: ['new'] });
  });
});

/**
 * Local mode validates dataset rows in child processes (issue #25 row 3, security review F4): the
 * outcome is the in-process validator's; a child that runs out of memory or exits takes only
 * itself down (this Jest process goes on), and the version is failed with the reason.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMemoryServices } from '../../src/adapters/memory/services';
import { createUploadUrl, getVersion, sourceKey, startProcessing } from '../../src/core/datasets/service';
import { validateDataset } from '../../src/adapters/fs/datasetFiles';
import type { ValidationJob } from '../../src/core/datasets/validation';
import { createTeam } from '../../src/core/teams';
import { handleWorkMessage } from '../../src/core/worker';
import { ValidationProcesses, ValidationProcessDied } from '../../src/local/validationProcess';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-vproc-'));
});
afterEach(async () => rm(dir, { recursive: true, force: true }));

const job = (name: string, extra: Partial<ValidationJob> = {}): ValidationJob => ({
  format: 'jsonl',
  maxRowBytes: 1024 * 1024,
  maxJsonBytes: 64 * 1024 * 1024,
  rowsFile: join(dir, `${name}.jsonl`),
  declaredSha256: null,
  ...extra,
});
async function* bytes(...parts: string[]) {
  for (const p of parts) yield Buffer.from(p);
}
const ROWS = [
  '{"text":"Tim Cook runs Apple","entities":[["Tim Cook","person"]]}\n',
  '{"text":"b","label":"x","colour":"red"}\n',
  '{"text":"c","labels":["y"]}\n',
];

/** A .json array parsed whole: its text alone (~24 MB) is more than a 16 MB heap. */
function* bigJsonArray(rows = 25_000) {
  const words = 'with some words in it '.repeat(40);
  yield '[';
  for (let i = 0; i < rows; i += 1)
    yield `${i ? ',' : ''}{"text":"row number ${i} ${words}","label":"label-${i % 50}"}`;
  yield ']';
}

describe('ValidationProcesses', () => {
  it('gives the in-process outcome, from a child process that is kept for the next file', async () => {
    const pool = new ValidationProcesses({ heapMb: 256 });
    try {
      const inChild = await pool.validate(bytes(...ROWS), job('a'));
      const inProcess = await validateDataset(bytes(...ROWS), job('b'));
      expect(inChild).toEqual(inProcess);
      expect(inChild).toMatchObject({
        rowsRead: 3,
        errorCount: 1,
        errors: [{ row: 2, field: 'colour' }],
        summary: { row_count: 2, entity_types: ['person'] },
      });
      expect(pool.started).toBe(1);
      expect((await pool.validate(bytes(ROWS[0]!), job('c'))).errorCount).toBe(0);
      expect(pool.started).toBe(1);
    } finally {
      await pool.close();
    }
  });

  it('a child out of memory rejects with the reason; the next file gets a fresh child', async () => {
    const pool = new ValidationProcesses({ heapMb: 16 });
    try {
      const huge = pool.validate(
        (async function* () {
          for (const part of bigJsonArray()) yield Buffer.from(part);
        })(),
        job('huge', { format: 'json' }),
      );
      await expect(huge).rejects.toThrow(ValidationProcessDied);
      await expect(huge).rejects.toThrow('the validation process ran out of memory (its heap is limited to 16 MB)');
      expect((await pool.validate(bytes(...ROWS), job('after'))).rowsRead).toBe(3);
      expect(pool.started).toBe(2);
    } finally {
      await pool.close();
    }
  }, 60_000);

  it('an idle child holds nothing open: a process that validated a file exits without closing the pool', () => {
    const script = fileURLToPath(new URL('../fixtures/validateOnceAndLeave.mts', import.meta.url));
    // the limit only guards the test run: without the fix the process never exits
    const run = spawnSync(process.execPath, ['--import', 'tsx', script], {
      encoding: 'utf8',
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TMPDIR: tmpdir() },
    });
    expect({ status: run.status, signal: run.signal, stdout: run.stdout }).toEqual({
      status: 0,
      signal: null,
      stdout: 'validated 1 row(s) in 1 child\n',
    });
  }, 70_000);

  it('a child that exits rejects with its exit code', async () => {
    const pool = new ValidationProcesses({
      heapMb: 64,
      entry: new URL('../fixtures/validationChildExits.mjs', import.meta.url),
    });
    await expect(pool.validate(bytes(...ROWS), job('x'))).rejects.toThrow(
      'the validation process exited with code 7 before it finished',
    );
    await pool.close();
  });

  it('through the core: a version whose child died is failed with the reason, and this process went on', async () => {
    const svc = createMemoryServices();
    const team = await createTeam(svc, { name: 'acme' });
    const url = await createUploadUrl(svc, team.id, { dataset_name: 'big', file_name: 'big.json' });
    await svc.blobs.put(
      sourceKey(team.id, await getVersion(svc, team.id, 'big', url.version)),
      [...bigJsonArray()].join(''),
    );
    await startProcessing(svc, team.id, 'big', url.version);
    const pool = new ValidationProcesses({ heapMb: 16 });
    try {
      for (const m of svc.sent.splice(0))
        await expect(handleWorkMessage(svc, m, { validateDataset: pool.validate })).rejects.toThrow(
          ValidationProcessDied,
        );
      expect(await getVersion(svc, team.id, 'big', 1)).toMatchObject({
        status: 'failed',
        errors: [
          {
            row: null,
            field: null,
            message:
              "processing failed: the validation process ran out of memory (its heap is limited to 16 MB): the file's rows need more than that",
          },
        ],
      });
    } finally {
      await pool.close();
    }
  }, 60_000);
});

/**
 * The CPU- and memory-heavy part of dataset processing: read an uploaded file once, validate every
 * row, write the normalized rows, and keep a bounded report. No records, no blobs: its input is a
 * byte stream and its output a stream of rows and a value, so a runtime may run it elsewhere than on
 * the thread that serves requests (local mode: a child process, src/local/validationProcess.ts). The
 * rows go to a file the runtime provides (`DatasetFiles`, src/adapters/fs/datasetFiles.ts).
 */
import type { Readable, Writable } from 'node:stream';
import { ByteTally, readRows, type DatasetFormat } from './reader';
import { boundRowError, DatasetSummary, validateRow, type RowError } from './rows';

/**
 * What one report keeps: the first errors up to both bounds (every row's errors are capped as well,
 * rows.ts ROW_LIMITS); `error_count` still counts them all. The version record keeps its first 100.
 */
export const REPORT_LIMITS = { errors: 10_000, bytes: 4 * 1024 * 1024 } as const;

export interface ValidationJob {
  format: DatasetFormat;
  maxRowBytes: number;
  /** A .json file is parsed whole: at most this many bytes. */
  maxJsonBytes: number;
  /** Where the normalized rows are written, one JSON object per line, while no error is found. */
  rowsFile: string;
  /** The sha256 the uploader declared (lower-case hex), checked against the bytes read. */
  declaredSha256: string | null;
}

export interface ValidationOutcome {
  rowsRead: number;
  /** Every problem found; `errors` holds the first of them, within REPORT_LIMITS. */
  errorCount: number;
  errors: RowError[];
  summary: ReturnType<DatasetSummary['describe']>;
  sha256: string;
  bytes: number;
}

/** Runs a validation job over a file's bytes: `validateRows` into `job.rowsFile` (src/adapters/fs/datasetFiles.ts), in this thread or elsewhere. */
export type DatasetValidator = (source: AsyncIterable<Buffer>, job: ValidationJob) => Promise<ValidationOutcome>;

/** One processing attempt's scratch space: `rowsFile` for the validator, read back for the upload, removed by `dispose`. */
export interface RowsScratch {
  rowsFile: string;
  rows(): Readable;
  dispose(): Promise<void>;
}

/**
 * Dataset processing's local files (`svc.datasetFiles`; src/adapters/fs/datasetFiles.ts): where an
 * attempt's normalized rows are written before they are uploaded, and the validator that writes them.
 */
export interface DatasetFiles {
  open(): Promise<RowsScratch>;
  validate: DatasetValidator;
}

/** Errors as they are found: all counted, the first kept within REPORT_LIMITS (count and bytes). */
export class ErrorReport {
  count = 0;
  bytes = 0;
  readonly kept: RowError[] = [];

  note(error: RowError): void {
    this.count += 1;
    if (this.kept.length >= REPORT_LIMITS.errors) return;
    const e = boundRowError(error);
    const size = Buffer.byteLength(JSON.stringify(e)) + 1;
    if (this.bytes + size > REPORT_LIMITS.bytes) return;
    this.bytes += size;
    this.kept.push(e);
  }
}

/**
 * Validates every row of `source`, writing the normalized rows to `out` (one JSON object per line)
 * while no error is found, and ends `out`. The runtime opens `out` (a file: datasetFiles.ts).
 */
export async function validateRows(
  source: AsyncIterable<Buffer>,
  job: ValidationJob,
  out: Writable,
): Promise<ValidationOutcome> {
  const summary = new DatasetSummary();
  const report = new ErrorReport();
  const note = (e: RowError) => report.note(e);
  let rowsRead = 0;
  const tally = new ByteTally();
  try {
    for await (const parsed of readRows(job.format, tally.tap(source), {
      maxRowBytes: job.maxRowBytes,
      maxJsonBytes: job.maxJsonBytes,
    })) {
      rowsRead += 1;
      if ('error' in parsed) {
        note({ row: parsed.row || null, field: null, message: parsed.error });
        continue;
      }
      const result = validateRow(job.format === 'csv' ? csvRow(parsed.value) : parsed.value, parsed.row);
      result.errors.forEach(note);
      if (!result.row) continue;
      summary.add(result.row, result.tasks, parsed.row).forEach(note);
      if (report.count === 0 && !out.write(`${JSON.stringify(result.row)}\n`))
        await new Promise((r) => out.once('drain', () => r(undefined)));
    }
  } finally {
    await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
  }
  summary.finish(rowsRead).forEach(note);
  const sha256 = tally.hash.digest('hex');
  if (job.declaredSha256 && job.declaredSha256 !== sha256) {
    note({
      row: null,
      field: null,
      message: `the file's sha256 is ${sha256}, not the declared ${job.declaredSha256}: the upload is truncated or altered`,
    });
  }
  return {
    rowsRead,
    errorCount: report.count,
    errors: report.kept,
    summary: summary.describe(),
    sha256,
    bytes: tally.bytes,
  };
}

/** The stored file is not the one that was checked when processing started (security review F9). */
export class SourceChangedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SourceChangedError';
  }
}

/**
 * Passes at most `expected` bytes through and fails past them, so a file re-PUT bigger after its
 * size was checked is never read whole; with `exact`, a file that ends short fails too.
 */
export async function* limitBytes(
  source: AsyncIterable<Buffer | Uint8Array>,
  expected: number,
  exact: boolean,
): AsyncGenerator<Buffer> {
  let read = 0;
  for await (const chunk of source) {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    read += buf.length;
    if (read > expected) {
      // leaving the loop destroys the source stream: nothing more is downloaded
      throw new SourceChangedError(
        `the stored file is larger than the ${expected} bytes checked when processing started: it was replaced after the check, so it is not processed; upload it as a new version`,
      );
    }
    yield buf;
  }
  if (exact && read < expected) {
    throw new SourceChangedError(
      `the stored file has ${read} bytes, not the ${expected} checked when processing started: it was replaced after the check, so it is not processed; upload it as a new version`,
    );
  }
}

/** CSV cells are strings; `labels` may be given as a JSON array or `a|b|c`. Empty cells are absent. */
function csvRow(value: unknown): unknown {
  const cells: [string, unknown][] = [];
  for (const [k, v] of Object.entries(value as Record<string, string>)) {
    if (v === '') continue;
    cells.push([k, k === 'labels' ? (v.trim().startsWith('[') ? safeJson(v) : v.split('|').map((s) => s.trim())) : v]);
  }
  // fromEntries defines own properties: a `__proto__` header stays a column (reported unknown), not a prototype
  return Object.fromEntries(cells);
}

function safeJson(v: string): unknown {
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

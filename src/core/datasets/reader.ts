import { parse as parseCsv } from 'csv-parse';
import { createHash, type Hash } from 'node:crypto';

export type DatasetFormat = 'jsonl' | 'json' | 'csv';

export type ParsedRow = { row: number; value: unknown } | { row: number; error: string };

export function formatOf(fileName: string): DatasetFormat | undefined {
  const ext = fileName.toLowerCase().split('.').pop();
  if (ext === 'jsonl' || ext === 'ndjson') return 'jsonl';
  if (ext === 'json') return 'json';
  if (ext === 'csv') return 'csv';
  return undefined;
}

/** Hashes and counts the bytes as they stream past, to check them against what the client declared. */
export class ByteTally {
  readonly hash: Hash = createHash('sha256');
  bytes = 0;

  async *tap(source: AsyncIterable<Buffer | Uint8Array>): AsyncGenerator<Buffer> {
    for await (const chunk of source) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      this.bytes += buf.length;
      this.hash.update(buf);
      yield buf;
    }
  }
}

const decoder = () => new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/**
 * JSONL, one row per line. A line longer than `maxRowBytes` is skipped (not buffered) and reported;
 * bytes that are not UTF-8 fail that row only; blank lines are ignored.
 */
async function* readJsonl(source: AsyncIterable<Buffer>, maxRowBytes: number): AsyncGenerator<ParsedRow> {
  let parts: Buffer[] = [];
  let length = 0;
  let oversized = false;
  let line = 0;
  const finishLine = function* (): Generator<ParsedRow> {
    line += 1;
    const wasOversized = oversized;
    const bytes = wasOversized ? undefined : Buffer.concat(parts, length);
    // Reset before yielding anything: a bad line must not leak its bytes into the next one.
    parts = [];
    length = 0;
    oversized = false;
    if (!bytes) {
      yield { row: line, error: `row is larger than the ${maxRowBytes} byte row limit` };
      return;
    }
    let text: string;
    try {
      text = decoder().decode(bytes);
    } catch {
      yield { row: line, error: 'row is not valid UTF-8 text' };
      return;
    }
    if (line === 1 && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
    if (text.trim() !== '') {
      try {
        yield { row: line, value: JSON.parse(text) };
      } catch (e) {
        yield { row: line, error: `not valid JSON: ${(e as Error).message}` };
      }
    }
  };
  for await (const chunk of source) {
    let offset = 0;
    while (offset < chunk.length) {
      const nl = chunk.indexOf(0x0a, offset);
      const end = nl === -1 ? chunk.length : nl;
      if (!oversized) {
        if (length + (end - offset) > maxRowBytes) {
          oversized = true;
          parts = [];
        } else {
          parts.push(chunk.subarray(offset, end));
          length += end - offset;
        }
      }
      if (nl === -1) break;
      yield* finishLine();
      offset = nl + 1;
    }
  }
  if (length > 0 || oversized) yield* finishLine();
}

/** A whole-file JSON array; bounded by `maxBytes` since it must be held in memory to parse. */
async function* readJsonArray(source: AsyncIterable<Buffer>, maxBytes: number): AsyncGenerator<ParsedRow> {
  const parts: Buffer[] = [];
  let length = 0;
  for await (const chunk of source) {
    length += chunk.length;
    if (length > maxBytes) {
      // Read the rest without keeping it, so the size and sha256 checks see the whole upload.
      for await (const rest of source) length += rest.length;
      yield {
        row: 0,
        error: `a .json dataset is parsed whole and may be at most ${maxBytes} bytes; use JSONL for larger files`,
      };
      return;
    }
    parts.push(chunk);
  }
  let value: unknown;
  try {
    value = JSON.parse(decoder().decode(Buffer.concat(parts)));
  } catch (e) {
    yield { row: 0, error: e instanceof SyntaxError ? `not valid JSON: ${e.message}` : 'file is not valid UTF-8 text' };
    return;
  }
  if (!Array.isArray(value)) {
    yield { row: 0, error: 'a .json dataset must be an array of row objects' };
    return;
  }
  for (let i = 0; i < value.length; i += 1) yield { row: i + 1, value: value[i] };
}

/** CSV with a header; `text` plus `label` columns (the common classification export). */
async function* readCsv(source: AsyncIterable<Buffer>, maxRowBytes: number): AsyncGenerator<ParsedRow> {
  const parser = parseCsv({
    columns: true,
    bom: true,
    skip_empty_lines: true,
    max_record_size: maxRowBytes,
    trim: false,
  });
  const utf8 = decoder();
  // Resolves on 'drain', or on 'close' once the parser has failed: a destroyed parser never drains.
  const writable = () =>
    new Promise<void>((resolve) => {
      const done = () => {
        parser.off('drain', done);
        parser.off('close', done);
        resolve();
      };
      parser.on('drain', done);
      parser.on('close', done);
    });
  const feed = (async () => {
    try {
      for await (const chunk of source) {
        // After a parse error the rest is still read (not parsed), so the size and sha256 checks see the whole upload.
        if (parser.destroyed) continue;
        if (!parser.write(utf8.decode(chunk, { stream: true })) && !parser.destroyed) await writable();
      }
      if (!parser.destroyed) parser.end(utf8.decode());
    } catch (e) {
      // TextDecoder throws a TypeError (ERR_ENCODING_INVALID_ENCODED_DATA); compare by name, it may come from another realm.
      parser.destroy((e as Error).name === 'TypeError' ? new Error('file is not valid UTF-8 text') : (e as Error));
    }
  })();
  let row = 0;
  try {
    for await (const record of parser) {
      row += 1;
      yield { row, value: record };
    }
  } catch (e) {
    // csv-parse errors count the records parsed before the bad one; records still buffered when it failed are not yielded.
    const before = (e as { records?: unknown }).records;
    yield { row: (typeof before === 'number' ? before : row) + 1, error: `CSV: ${(e as Error).message}` };
  }
  await feed;
}

export function readRows(
  format: DatasetFormat,
  source: AsyncIterable<Buffer>,
  limits: { maxRowBytes: number; maxJsonBytes: number },
) {
  switch (format) {
    case 'jsonl':
      return readJsonl(source, limits.maxRowBytes);
    case 'json':
      return readJsonArray(source, limits.maxJsonBytes);
    case 'csv':
      return readCsv(source, limits.maxRowBytes);
  }
}

import { Readable } from 'node:stream';
import { ByteTally, formatOf, readRows, type DatasetFormat, type ParsedRow } from '../../src/core/datasets/reader';

const LIMITS = { maxRowBytes: 1024, maxJsonBytes: 64 * 1024 };

async function* chunks(parts: (string | Buffer)[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield Buffer.isBuffer(p) ? p : Buffer.from(p, 'utf8');
}

/** Splits a buffer into pieces of `size` bytes, so lines (and multi-byte characters) straddle chunk boundaries. */
function split(buf: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < buf.length; i += size) out.push(buf.subarray(i, i + size));
  return out;
}

async function collect(format: DatasetFormat, source: AsyncIterable<Buffer>, limits = LIMITS): Promise<ParsedRow[]> {
  const out: ParsedRow[] = [];
  for await (const r of readRows(format, source, limits)) out.push(r);
  return out;
}

describe('formatOf', () => {
  it('maps extensions, case-insensitively, and refuses others', () => {
    expect(formatOf('a.jsonl')).toBe('jsonl');
    expect(formatOf('a.NDJSON')).toBe('jsonl');
    expect(formatOf('a.Json')).toBe('json');
    expect(formatOf('a.csv')).toBe('csv');
    expect(formatOf('a.txt')).toBeUndefined();
    expect(formatOf('jsonl')).toBe('jsonl'); // a bare name is its own "extension"; the route's regex still asks for a dot
    expect(formatOf('a.jsonl.gz')).toBeUndefined();
  });
});

describe('readRows: JSONL', () => {
  const rows = [
    { text: 'héllo 🎉 wörld', label: 'a' },
    { text: 'second', label: 'b' },
    { text: 'third 中文', label: 'c' },
  ];
  const body = Buffer.from(`${rows.map((r) => JSON.stringify(r)).join('\n')}\n`);

  it.each([1, 2, 3, 7, 64, 4096])('parses the same rows whatever the chunk size (%i bytes)', async (size) => {
    expect(await collect('jsonl', chunks(split(body, size)))).toEqual(rows.map((value, i) => ({ row: i + 1, value })));
  });

  it('handles CRLF, a BOM, blank lines (row numbers stay line numbers) and no final newline', async () => {
    const text = '\uFEFF{"text":"a","label":"x"}\r\n\r\n   \n{"text":"b","label":"y"}\r\n{"text":"c","label":"z"}';
    const got = await collect('jsonl', chunks(split(Buffer.from(text), 5)));
    expect(got).toEqual([
      { row: 1, value: { text: 'a', label: 'x' } },
      { row: 4, value: { text: 'b', label: 'y' } },
      { row: 5, value: { text: 'c', label: 'z' } },
    ]);
  });

  it('reports invalid JSON per line and goes on', async () => {
    const got = await collect('jsonl', chunks(['{"text":"a","label":"x"}\n{"text": \n[1,2]\n']));
    expect(got).toEqual([
      { row: 1, value: { text: 'a', label: 'x' } },
      { row: 2, error: expect.stringMatching(/^not valid JSON/) },
      { row: 3, value: [1, 2] },
    ]);
  });

  it('fails only the line with invalid UTF-8, even when a valid multi-byte character straddles chunks', async () => {
    const good1 = Buffer.from('{"text":"🎉 party","label":"x"}\n');
    const badLine = Buffer.concat([Buffer.from('{"text":"caf'), Buffer.from([0xe9]), Buffer.from('","label":"x"}\n')]); // Latin-1 é
    const good2 = Buffer.from('{"text":"naïve","label":"y"}\n');
    const got = await collect('jsonl', chunks(split(Buffer.concat([good1, badLine, good2]), 3)));
    expect(got).toEqual([
      { row: 1, value: { text: '🎉 party', label: 'x' } },
      { row: 2, error: 'row is not valid UTF-8 text' },
      { row: 3, value: { text: 'naïve', label: 'y' } },
    ]);
  });

  it('skips a line over the row limit without buffering it, and parses the next line', async () => {
    const max = 100;
    let yielded = 0;
    // 50 chunks of 64 bytes: a 3,200-byte line with no newline until the end.
    async function* source(): AsyncGenerator<Buffer> {
      yield Buffer.from('{"text":"before","label":"a"}\n{"text":"');
      for (let i = 0; i < 50; i += 1) {
        yielded += 1;
        yield Buffer.alloc(64, 'x');
      }
      yield Buffer.from('","label":"b"}\n{"text":"after","label":"c"}\n');
    }
    const got = await collect('jsonl', source(), { maxRowBytes: max, maxJsonBytes: 1 });
    expect(yielded).toBe(50);
    expect(got).toEqual([
      { row: 1, value: { text: 'before', label: 'a' } },
      { row: 2, error: 'row is larger than the 100 byte row limit' },
      { row: 3, value: { text: 'after', label: 'c' } },
    ]);
  });

  it('accepts a line of exactly the row limit and rejects one byte more', async () => {
    const line = (n: number) => {
      const base = '{"text":"","label":"a"}';
      return `{"text":"${'x'.repeat(n - base.length)}","label":"a"}`;
    };
    expect(Buffer.byteLength(line(100))).toBe(100);
    const got = await collect('jsonl', chunks([`${line(100)}\n${line(101)}\n${line(101)}`]), {
      maxRowBytes: 100,
      maxJsonBytes: 1,
    });
    expect(got.map((r) => ('error' in r ? `err${r.row}` : `ok${r.row}`))).toEqual(['ok1', 'err2', 'err3']);
  });

  it('yields nothing for an empty file or only blank lines', async () => {
    expect(await collect('jsonl', chunks([]))).toEqual([]);
    expect(await collect('jsonl', chunks(['\n\r\n  \n']))).toEqual([]);
  });
});

describe('readRows: JSON array', () => {
  it('yields each element with a 1-based row number, whatever the chunking', async () => {
    const body = Buffer.from('\uFEFF[{"text":"a","label":"x"}, 5, {"text":"🎉","label":"y"}]');
    expect(await collect('json', chunks(split(body, 3)))).toEqual([
      { row: 1, value: { text: 'a', label: 'x' } },
      { row: 2, value: 5 },
      { row: 3, value: { text: '🎉', label: 'y' } },
    ]);
  });

  it('reports a file-level problem as row 0: not an array, bad JSON, bad UTF-8, too large', async () => {
    expect(await collect('json', chunks(['{"text":"a"}']))).toEqual([
      { row: 0, error: expect.stringMatching(/must be an array/) },
    ]);
    expect(await collect('json', chunks(['[{"text":']))).toEqual([
      { row: 0, error: expect.stringMatching(/^not valid JSON/) },
    ]);
    expect(await collect('json', chunks([Buffer.from([0x5b, 0x22, 0xff, 0x22, 0x5d])]))).toEqual([
      { row: 0, error: 'file is not valid UTF-8 text' },
    ]);
    const bigFile = Buffer.from(JSON.stringify([{ text: 'x'.repeat(500) }]));
    const tally = new ByteTally();
    const big = await collect('json', tally.tap(chunks(split(bigFile, 100))), { maxRowBytes: 1, maxJsonBytes: 300 });
    expect(big).toEqual([{ row: 0, error: expect.stringMatching(/at most 300 bytes/) }]);
    // The rest is still read (not kept): the recorded size and sha256 are the upload's.
    expect(tally.bytes).toBe(bigFile.length);
  });
});

describe('readRows: CSV', () => {
  it('reads a header and records, with quotes, embedded newlines, CRLF and a BOM, across chunks', async () => {
    const body = Buffer.from(
      '\uFEFFtext,label\r\n"Hello, ""world""",greeting\r\n"two\nlines 🎉",multi\r\n\r\nplain,x\r\n',
    );
    expect(await collect('csv', chunks(split(body, 4)))).toEqual([
      { row: 1, value: { text: 'Hello, "world"', label: 'greeting' } },
      { row: 2, value: { text: 'two\nlines 🎉', label: 'multi' } },
      { row: 3, value: { text: 'plain', label: 'x' } },
    ]);
  });

  it('reports invalid UTF-8 as an error after the rows before it', async () => {
    const body = Buffer.concat([Buffer.from('text,label\nok,a\ncaf'), Buffer.from([0xe9]), Buffer.from(',b\n')]);
    const got = await collect('csv', chunks([body]));
    expect(got[got.length - 1]).toMatchObject({ error: 'CSV: file is not valid UTF-8 text' });
    expect(got.filter((r) => 'value' in r).length).toBeLessThanOrEqual(1);
  });

  it('reports a record with the wrong number of columns', async () => {
    // A structural CSV error ends the parse; records the parser still buffered may not come out,
    // but the error names the bad record (2), not the count of records consumed so far.
    for (const size of [4, 1000]) {
      const got = await collect('csv', chunks(split(Buffer.from('text,label\na,b\nc,d,e\nf,g\n'), size)));
      expect(got[got.length - 1]).toEqual({ row: 2, error: expect.stringMatching(/^CSV: .*columns/) });
      expect(got.slice(0, -1)).toEqual(got.length > 1 ? [{ row: 1, value: { text: 'a', label: 'b' } }] : []);
    }
    const whole = await collect('csv', chunks(['text,label\na,b\nc,d,e\nf,g\n']));
    expect(whole[whole.length - 1]).toEqual({ row: 2, error: expect.stringMatching(/^CSV:/) });
  });

  it('reports a record over the row limit and finishes even when much more data follows it', async () => {
    // Many chunks after the oversized record: the parser stops accepting writes once it has failed,
    // and reading must still end (a dataset must never hang in `processing`).
    const parts: Buffer[] = [Buffer.from(`text,label\nfirst,a\n"${'x'.repeat(5000)}",b\n`)];
    for (let i = 0; i < 300; i += 1) parts.push(Buffer.from(`row ${i} ${'y'.repeat(500)},c\n`));
    const tally = new ByteTally();
    const got = await collect('csv', tally.tap(chunks(parts)), { maxRowBytes: 1000, maxJsonBytes: 1 });
    expect(got[got.length - 1]).toEqual({ row: 2, error: expect.stringMatching(/^CSV: Max Record Size/) });
    expect(got.filter((r) => 'error' in r)).toHaveLength(1);
    // The whole file is still read, so its size and sha256 are those of the upload.
    expect(tally.bytes).toBe(parts.reduce((n, p) => n + p.length, 0));
  });
});

describe('ByteTally', () => {
  it('counts and hashes bytes as they pass, from Buffers or Uint8Arrays', async () => {
    const tally = new ByteTally();
    const seen: Buffer[] = [];
    for await (const c of tally.tap(Readable.from([Buffer.from('ab'), new Uint8Array([99])]))) seen.push(c);
    expect(Buffer.concat(seen).toString()).toBe('abc');
    expect(tally.bytes).toBe(3);
    expect(tally.hash.digest('hex')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });
});

/**
 * The dataset row validator on hostile rows, before and after the linear-time rewrite (issue #25
 * row 3, security review F4): errors, bytes of error text and milliseconds for one `validateRow`
 * call, side by side. `npx tsx bench/serving/row-validator.ts [--before <git rev>] [--limit-s 60]`
 *
 * "before" is src/core/datasets/rows.ts as it was at `--before` (default: the commit before
 * textIndex.ts was added), written to a temporary file; it imports nothing, so it runs as it did.
 * Each measurement (the fastest of up to 5 calls within 10 s) runs in its own process with a 2 GB
 * heap and a time limit, because the old validator does not finish some of these rows: it runs out
 * of memory (a GB-sized report) or past the limit, and the table says which.
 *
 * Rows:
 *   review-148KB     the security review's row: a 100,000-character text and 1,000 entities
 *                    {text: "x", start: 0, end: 100000}
 *   1MiB-10.9k       the same at the 1 MiB row limit: a 524,000-character text, 10,900 such entities
 *   1MiB-5k          a 700,000-character text and 5,000 wrong offsets (the new per-row cap), 1 MiB
 *   1MiB-substrings  a 500,000-character text of a's and ~970 entities 'ab', 'aab', 'aaab', … without
 *                    offsets: each `includes` on the old path scans the whole text
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const REPO = resolve(fileURLToPath(new URL('../..', import.meta.url)));

function row(name: string): unknown {
  switch (name) {
    case 'review-148KB':
      return { text: 'x'.repeat(100_000), entities: Array.from({ length: 1000 }, () => ({ text: 'x', label: 'l', start: 0, end: 100_000 })) };
    case '1MiB-10.9k':
      return { text: 'y'.repeat(524_000), entities: Array.from({ length: 10_900 }, () => ({ text: 'y', label: 'l', start: 0, end: 524_000 })) };
    case '1MiB-5k':
      return { text: 'w'.repeat(700_000), entities: Array.from({ length: 5000 }, (_, i) => ({ text: 'w', label: 'l', start: i, end: 700_000 - i })) };
    case '1MiB-substrings': {
      const entities: [string, string][] = [];
      for (let k = 1, size = 0; size < 450_000; k += 1) {
        entities.push(['a'.repeat(k) + 'b', 'l']);
        size += k + 10;
      }
      return { text: 'a'.repeat(500_000), entities };
    }
    default:
      throw new Error(`unknown row ${name}`);
  }
}
const ROWS = ['review-148KB', '1MiB-10.9k', '1MiB-5k', '1MiB-substrings'];

interface Measured {
  rowBytes: number;
  errors: number;
  reportBytes: number;
  ms: number;
}

/** Child: one validateRow call of `module` on row `name`; prints the measurement as JSON. */
async function child(modulePath: string, name: string): Promise<void> {
  const { validateRow } = (await import(pathToFileURL(modulePath).href)) as { validateRow: (raw: unknown, n: number) => { errors: unknown[] } };
  const raw = row(name);
  const rowBytes = Buffer.byteLength(JSON.stringify(raw));
  validateRow({ text: 'warm up', label: 'x' }, 1);
  // the fastest of up to 5 calls, as long as they take under 10 s together (the old code's first may not)
  let ms = Infinity;
  let errors: unknown[] = [];
  for (let run = 0, spent = 0; run < 5 && spent < 10_000; run += 1) {
    const start = performance.now();
    errors = validateRow(raw, 1).errors;
    const took = performance.now() - start;
    ms = Math.min(ms, took);
    spent += took;
  }
  const measured: Measured = { rowBytes, errors: errors.length, reportBytes: Buffer.byteLength(JSON.stringify(errors)), ms };
  process.stdout.write(JSON.stringify(measured));
}

function measure(modulePath: string, name: string, limitS: number): Measured | string {
  const run = spawnSync(process.execPath, ['--max-old-space-size=2048', '--import', 'tsx', fileURLToPath(import.meta.url), '--child', modulePath, name], {
    cwd: REPO,
    encoding: 'utf8',
    timeout: limitS * 1000,
    maxBuffer: 1024 * 1024,
  });
  if (run.error && (run.error as NodeJS.ErrnoException).code === 'ETIMEDOUT') return `did not finish in ${limitS} s`;
  if (run.status !== 0) return /heap out of memory|Allocation failed|Invalid string length/.test(run.stderr) ? 'out of memory (2 GB heap)' : `failed: ${run.stderr.trim().split('\n').pop()}`;
  return JSON.parse(run.stdout) as Measured;
}

function beforeRev(): string {
  const added = execFileSync('git', ['log', '--diff-filter=A', '--format=%H', '--', 'src/core/datasets/textIndex.ts'], { cwd: REPO, encoding: 'utf8' }).trim().split('\n').pop();
  if (!added) throw new Error('cannot find the commit that added textIndex.ts; pass --before <rev>');
  return `${added}^`;
}

const fmt = (m: Measured | string, key: keyof Measured) => (typeof m === 'string' ? '' : key === 'ms' ? m.ms.toFixed(1) : m[key].toLocaleString('en-US'));

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args[0] === '--child') return child(args[1]!, args[2]!);
  const opt = (name: string) => {
    const at = args.indexOf(name);
    return at === -1 ? undefined : args[at + 1];
  };
  const rev = opt('--before') ?? beforeRev();
  const limitS = Number(opt('--limit-s') ?? 60);
  const dir = mkdtempSync(join(tmpdir(), 'sift-bench-rows-'));
  try {
    const oldPath = join(dir, 'rows.before.ts');
    writeFileSync(oldPath, execFileSync('git', ['show', `${rev}:src/core/datasets/rows.ts`], { cwd: REPO, encoding: 'utf8' }));
    const newPath = join(REPO, 'src/core/datasets/rows.ts');
    console.log(`validateRow, one call per row (before = rows.ts at ${rev}; ${limitS} s and a 2 GB heap per measurement)\n`);
    const header = ['row', 'row bytes', 'before: errors', 'before: error bytes', 'before: ms', 'after: errors', 'after: error bytes', 'after: ms'];
    const lines: string[][] = [header];
    for (const name of ROWS) {
      const before = measure(oldPath, name, limitS);
      const after = measure(newPath, name, limitS);
      const rowBytes = typeof after === 'string' ? '?' : after.rowBytes.toLocaleString('en-US');
      lines.push([name, rowBytes, ...(typeof before === 'string' ? [before, '', ''] : [fmt(before, 'errors'), fmt(before, 'reportBytes'), fmt(before, 'ms')]), ...(typeof after === 'string' ? [after, '', ''] : [fmt(after, 'errors'), fmt(after, 'reportBytes'), fmt(after, 'ms')])]);
    }
    const widths = header.map((_, c) => Math.max(...lines.map((l) => (l[c] ?? '').length)));
    for (const l of lines) console.log(l.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]!) : cell.padStart(widths[c]!))).join('  '));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();

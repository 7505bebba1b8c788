import { mkdir, open, readFile, rename } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { UsageBatch } from '../../core/billing/usageBatch';
import type { UsageSpool } from '../../core/ports';

async function writeDurably(path: string, text: string, flag: 'a' | 'w'): Promise<void> {
  const fh = await open(path, flag);
  try {
    await fh.writeFile(text);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/** Local mode's spool (src/core/billing/spool.ts): an append-only JSONL file, fsync'd, replayed on each flush and at start. */
export class FileUsageSpool implements UsageSpool {
  /** Appends and replays take turns: a replay rewrites the file. */
  private turn: Promise<unknown> = Promise.resolve();
  /** Known to hold nothing (this process is the file's only writer): a flush then reads nothing. */
  private empty = false;

  constructor(readonly path: string) {}

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.turn.then(work, work);
    this.turn = run.catch(() => {}); // the caller gets run's failure; the turn only orders the next one
    return run;
  }

  append(batch: UsageBatch): Promise<void> {
    return this.exclusive(async () => {
      await mkdir(dirname(this.path), { recursive: true });
      await writeDurably(this.path, `${JSON.stringify(batch)}\n`, 'a');
      this.empty = false;
    });
  }

  replay(apply: (batch: UsageBatch) => Promise<void>): Promise<{ applied: number; kept: number }> {
    return this.exclusive(async () => {
      if (this.empty) return { applied: 0, kept: 0 };
      let text: string;
      try {
        text = await readFile(this.path, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
        this.empty = true;
        return { applied: 0, kept: 0 };
      }
      // a torn last line (a crash mid-append) was never acknowledged to the writer: skip it
      const batches = text
        .split('\n')
        .filter(Boolean)
        .flatMap((line) => {
          try {
            return [JSON.parse(line) as UsageBatch];
          } catch {
            return [];
          }
        });
      // (a file holding only a torn line is rewritten too: an append after it would join that line)
      if (text === '') {
        this.empty = true;
        return { applied: 0, kept: 0 };
      }
      const kept: UsageBatch[] = [];
      for (const b of batches) {
        try {
          await apply(b);
        } catch {
          kept.push(b);
        }
      }
      // write the remainder beside the spool, then swap: a crash leaves the old (replayable) file
      const tmp = join(dirname(this.path), `.${Date.now()}.usage-spool.tmp`);
      await writeDurably(tmp, kept.map((b) => `${JSON.stringify(b)}\n`).join(''), 'w');
      await rename(tmp, this.path);
      this.empty = kept.length === 0;
      return { applied: batches.length - kept.length, kept: kept.length };
    });
  }
}

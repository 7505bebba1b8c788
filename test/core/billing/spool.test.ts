import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileUsageSpool } from '../../../src/adapters/fs/usageSpool';
import type { UsageBatch } from '../../../src/core/billing/usageBatch';

const batch = (id: string) => ({ id }) as unknown as UsageBatch;
let dir: string;
beforeEach(async () => (dir = await mkdtemp(join(tmpdir(), 'sift-spool-'))));
afterEach(async () => rm(dir, { recursive: true, force: true }));

describe('FileUsageSpool', () => {
  it('replays what it kept, keeps what still fails, and forgets what was applied', async () => {
    const spool = new FileUsageSpool(join(dir, 'usage-spool.jsonl'));
    await spool.append(batch('a'));
    await spool.append(batch('b'));
    const seen: string[] = [];
    const failB = async (b: UsageBatch) => {
      seen.push((b as unknown as { id: string }).id);
      if ((b as unknown as { id: string }).id === 'b') throw new Error('store down');
    };
    expect(await spool.replay(failB)).toEqual({ applied: 1, kept: 1 });
    expect(await spool.replay(async (b) => void seen.push((b as unknown as { id: string }).id))).toEqual({ applied: 1, kept: 0 });
    expect(seen).toEqual(['a', 'b', 'b']);
    expect(await spool.replay(async () => void seen.push('again'))).toEqual({ applied: 0, kept: 0 });
    expect(seen).toEqual(['a', 'b', 'b']);
  });

  it('a torn last line (a crash mid-append) never swallows the next batch', async () => {
    const path = join(dir, 'usage-spool.jsonl');
    await writeFile(path, '{"id":"to');
    const spool = new FileUsageSpool(path);
    expect(await spool.replay(async () => {})).toEqual({ applied: 0, kept: 0 });
    await spool.append(batch('c'));
    const seen: string[] = [];
    expect(await spool.replay(async (b) => void seen.push((b as unknown as { id: string }).id))).toEqual({ applied: 1, kept: 0 });
    expect(seen).toEqual(['c']);
    expect(await readFile(path, 'utf8')).toBe('');
  });
});

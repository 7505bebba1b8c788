import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FileUsageSpool } from '../../../src/adapters/fs/usageSpool';
import { createMemoryServices } from '../../../src/adapters/memory/services';
import { UsageLedger } from '../../../src/core/billing/ledger';
import type { UsageBatch } from '../../../src/core/billing/usageBatch';
import { emfUsageMetrics } from '../../../src/adapters/metrics/emfUsageMetrics';
import { createTeam } from '../../../src/core/teams';
import { getUsage } from '../../../src/core/usage';

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
    expect(await spool.replay(async (b) => void seen.push((b as unknown as { id: string }).id))).toEqual({
      applied: 1,
      kept: 0,
    });
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
    expect(await spool.replay(async (b) => void seen.push((b as unknown as { id: string }).id))).toEqual({
      applied: 1,
      kept: 0,
    });
    expect(seen).toEqual(['c']);
    expect(await readFile(path, 'utf8')).toBe('');
  });
});

describe('a spool file written by the previous release', () => {
  it('its batches (breakdown attributes on the day and month items, a writer without a day) are applied into the new layout, once', async () => {
    const svc = createMemoryServices({ now: () => new Date('2026-03-10T12:00:00Z') });
    const team = await createTeam(svc, { name: 'old-spool', credit_balance_usd: 1 });
    const add = {
      cost_usd_micros: 9,
      input_tokens: 90,
      'model|my-project|cost_usd_micros': 9,
      'model|my-project|input_tokens': 90,
      'model|my-project|requests': 1,
      'endpoint|/inference|cost_usd_micros': 9,
      'endpoint|/inference|input_tokens': 90,
      'endpoint|/inference|requests': 1,
    };
    const row = {
      inference_id: 'inf_old1',
      endpoint: '/inference',
      model: 'my-project',
      base_model: 'sift/gliner2-mini-v1',
      input_tokens: 90,
      output_tokens: 0,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      cost_usd_micros: 9,
      at: '2026-03-10T11:00:00.000Z',
    };
    // one line exactly as the previous release's FileUsageSpool wrote it
    const line = JSON.stringify({
      writer: 'w0123456789abcdef0123456789abcdef',
      seq: 2,
      team_id: team.id,
      items: [
        { sk: 'USAGE#DAY#2026-03-10', add, set: { day: '2026-03-10' } },
        { sk: 'USAGE#MONTH#2026-03', add },
        { sk: 'TEAM', add: { credit_balance_micros: -9 }, prepaidOnly: true },
      ],
      requests: [row],
      expires_at: 1_900_000_000,
    });
    const path = join(dir, 'usage-spool.jsonl');
    await writeFile(path, `${line}\n${line}\n`); // kept twice (a replay whose success was not recorded)
    const quiet = { info() {}, warn() {}, error() {} };
    const ledger = new UsageLedger({
      records: svc.records,
      spool: new FileUsageSpool(path),
      metrics: emfUsageMetrics(() => {}),
      logger: quiet,
      mode: 'write-through',
      retentionDays: 90,
    });
    await ledger.flush();
    expect(await readFile(path, 'utf8')).toBe('');
    const usage = await getUsage(svc, team.id);
    expect(usage.today).toMatchObject({ input_tokens: 90, cost_usd: 0.000009 });
    expect(usage.today.by_model).toEqual([
      expect.objectContaining({ model: 'my-project', requests: 1, input_tokens: 90 }),
    ]);
    expect(usage.this_month.by_endpoint).toEqual([expect.objectContaining({ endpoint: '/inference', requests: 1 })]);
    expect(usage.credit_balance_usd).toBe(1 - 0.000009);
    expect(await svc.records.get(`TEAM#${team.id}`, 'USAGEBY#DAY#2026-03-10#MODEL#my-project')).toMatchObject({
      requests: 1,
      cost_usd_micros: 9,
    });
  });
});

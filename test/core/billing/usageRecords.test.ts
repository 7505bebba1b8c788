/**
 * Usage records that cannot grow without bound (issue #25 item 4, security review F6), on the
 * in-memory store: breakdowns in their own items keyed by canonical ids, request rows written
 * independently of the counters, writer attributes bounded, and what the previous release wrote
 * (old-layout items, old-format batches) still counted. The same on DynamoDB (dynalite), with its
 * 400 KB item limit: test/adapters/usageApply.test.ts.
 */
import { jest } from '@jest/globals';
import { UsageLedger } from '../../../src/core/billing/ledger';
import { QueueUsageSpool } from '../../../src/core/billing/spool';
import { applyBatch, buildBatch, type UsageBatch, type UsageEvent } from '../../../src/core/billing/usageBatch';
import { emfUsageMetrics } from '../../../src/adapters/metrics/emfUsageMetrics';
import { createMemoryServices, type MemoryServices } from '../../../src/adapters/memory/services';
import type { BilledUsage, Logger, RecordStore, WorkMessage } from '../../../src/core/ports';
import { createTeam } from '../../../src/core/teams';
import {
  checkSpendAllowance,
  getUsage,
  listUsageRequests,
  recordBilledUsage,
  USAGE_READ_LIMITS,
} from '../../../src/core/usage';
import { RateLimitError } from '../../../src/core/errors';
import { handleWorkMessage } from '../../../src/core/worker';

const NOW = Date.parse('2026-03-10T12:00:00Z');
const DAY_MS = 86_400_000;
const pkOf = (teamId: string) => `TEAM#${teamId}`;

const billed = (i: number, over: Partial<BilledUsage> = {}): BilledUsage => ({
  inference_id: `inf_${String(i).padStart(6, '0')}`,
  endpoint: '/inference',
  model: 'sift/gliner2-mini-v1',
  base_model: 'sift/gliner2-mini-v1',
  input_tokens: 100,
  output_tokens: 0,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  cost_usd_micros: 10,
  ...over,
});

/** A project name of the longest length the API allows (128), distinct per i. */
const projectName = (i: number) => `project-${String(i).padStart(5, '0')}-`.padEnd(128, 'x');
const projectId = (i: number) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`;

async function setup(team: { credit_balance_usd?: number; daily_spend_cap_usd?: number } = {}) {
  const svc = createMemoryServices({ now: () => new Date(NOW) });
  const t = await createTeam(svc, { name: 'acme', ...team });
  return { svc, teamId: t.id };
}

async function allRows(svc: MemoryServices, teamId: string) {
  const rows: Array<{ inference_id: string; model: string }> = [];
  let cursor: string | undefined;
  do {
    const page = await listUsageRequests(svc, teamId, { limit: 500, cursor });
    rows.push(...page.data);
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  return rows;
}

/** Attributes a totals item may hold: the fixed counters, its period, and bookkeeping. */
const FIXED_TOTALS =
  /^(requests|requests_[a-z_]+|billed_requests|input_tokens|output_tokens|cache_read_tokens|cache_write_tokens|cost_usd_micros|day|month|seq_floor|seq\|w\d{8}-[0-9a-f]+)$/;

describe('breakdowns in their own items, keyed by canonical ids', () => {
  it('1,000 projects with 128-character names leave the day and month items with fixed attributes; the read is bounded and adds up', async () => {
    const { svc, teamId } = await setup({ daily_spend_cap_usd: 0.01 }); // 10,000 micro-USD: reached by the 1,000th request
    const n = 1000;
    await Promise.all(
      Array.from({ length: n }, (_, i) =>
        recordBilledUsage(
          svc,
          teamId,
          'inference',
          billed(i, { model: projectName(i), model_id: projectId(i), model_name: projectName(i) }),
        ),
      ),
    );
    for (const sk of ['USAGE#DAY#2026-03-10', 'USAGE#MONTH#2026-03']) {
      const item = (await svc.records.get<Record<string, unknown>>(pkOf(teamId), sk))!;
      expect(Object.keys(item).filter((k) => !FIXED_TOTALS.test(k))).toEqual([]);
      expect(item).toMatchObject({ billed_requests: n, cost_usd_micros: n * 10, input_tokens: n * 100 });
    }
    // one item per project per period, named by its id; the name is an attribute, never a key
    const dayItems = await svc.records.queryAll<Record<string, unknown>>(pkOf(teamId), {
      beginsWith: 'USAGEBY#DAY#2026-03-10#MODEL#',
    });
    expect(dayItems).toHaveLength(n);
    expect(dayItems.find((it) => it.model === projectId(7))).toMatchObject({
      name: projectName(7),
      requests: 1,
      cost_usd_micros: 10,
    });
    // the spend cap counts every request
    await expect(checkSpendAllowance(svc, teamId)).rejects.toBeInstanceOf(RateLimitError);
    expect(await allRows(svc, teamId)).toHaveLength(n);

    // a read fetches a bounded number of breakdown items, and its rows add up to the totals
    const query = jest.spyOn(svc.records, 'query');
    const usage = await getUsage(svc, teamId);
    for (const [, opts] of query.mock.calls.filter(([, o]) => o?.beginsWith?.startsWith('USAGEBY#'))) {
      expect(opts!.limit).toBeLessThanOrEqual(USAGE_READ_LIMITS.periodItems);
    }
    query.mockRestore();
    for (const period of [usage.today, usage.this_month]) {
      expect(period.by_model).toHaveLength(USAGE_READ_LIMITS.periodRows + 1);
      expect(period.by_model[0]).toMatchObject({
        model: expect.stringMatching(/^00000000-/),
        name: expect.stringMatching(/^project-/),
      });
      expect(period.by_model.at(-1)).toMatchObject({
        model: '(other)',
        other: true,
        requests: n - USAGE_READ_LIMITS.periodRows,
      });
      expect(period.by_model.reduce((s, r) => s + r.requests, 0)).toBe(n);
      expect(period.by_model.reduce((s, r) => s + Math.round(r.cost_usd * 1e6), 0)).toBe(n * 10);
      expect(period.by_endpoint).toEqual([
        expect.objectContaining({ endpoint: '/inference', requests: n, input_tokens: n * 100 }),
      ]);
    }
    expect(usage.by_day[0]!.by_model).toHaveLength(USAGE_READ_LIMITS.dayRows + 1);
    expect(usage.by_day[0]!.by_model.reduce((s, r) => s + r.input_tokens, 0)).toBe(n * 100);
  });

  it('a project called by name and by id is one row; a model string too long for a key is hashed into one', async () => {
    const { svc, teamId } = await setup();
    const id = projectId(1);
    await recordBilledUsage(
      svc,
      teamId,
      'inference',
      billed(1, { model: 'support-ner', model_id: id, model_name: 'support-ner' }),
    );
    await recordBilledUsage(svc, teamId, 'inference', billed(2, { model: id, model_id: id }));
    const long = 'm'.repeat(5000);
    await recordBilledUsage(svc, teamId, 'compat', billed(3, { model: long }));
    const usage = await getUsage(svc, teamId);
    expect(usage.today.by_model).toEqual([
      expect.objectContaining({ model: id, name: 'support-ner', requests: 2 }),
      expect.objectContaining({ model: long, requests: 1 }),
    ]);
    // the rows keep what each request sent
    expect((await allRows(svc, teamId)).map((r) => r.model).sort()).toEqual([id, long, 'support-ner'].sort());
  });
});

/** Makes writes of one kind fail until `heal()`: 'counters' (updates of usage items) or 'rows' (the per-request puts). */
function failing(records: RecordStore, what: 'counters' | 'rows') {
  const update = records.update.bind(records);
  const putAll = records.putAll.bind(records);
  let broken = true;
  records.update = (async (pk: string, sk: string, change: Parameters<RecordStore['update']>[2]) => {
    if (broken && what === 'counters' && sk.startsWith('USAGE')) throw new Error('injected: counters unavailable');
    return update(pk, sk, change);
  }) as RecordStore['update'];
  records.putAll = async (items) => {
    if (broken && what === 'rows') throw new Error('injected: rows unavailable');
    return putAll(items);
  };
  return { heal: () => (broken = false) };
}

const usageMessages = (svc: MemoryServices) =>
  svc.sent.filter((m): m is Extract<WorkMessage, { type: 'usage.apply' }> => m.type === 'usage.apply');

describe('request rows and counters are written independently', () => {
  it('a counter write that keeps failing loses no request row; the replay counts once', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const faults = failing(svc.records, 'counters');
    for (let i = 0; i < 3; i++) await recordBilledUsage(svc, teamId, 'inference', billed(i));
    expect((await allRows(svc, teamId)).map((r) => r.inference_id).sort()).toEqual([
      'inf_000000',
      'inf_000001',
      'inf_000002',
    ]);
    const kept = usageMessages(svc);
    expect(kept.length).toBeGreaterThan(0); // the batches went to the spool (the queue on AWS)
    faults.heal();
    for (const m of [...kept, ...kept]) await handleWorkMessage(svc, m); // replayed, and redelivered
    const usage = await getUsage(svc, teamId);
    expect(usage.today).toMatchObject({ input_tokens: 300, cost_usd: 0.00003 });
    expect(usage.credit_balance_usd).toBe(1 - 0.00003);
    expect(await allRows(svc, teamId)).toHaveLength(3);
  });

  it('a row write that keeps failing does not stop the counters; the replay adds the rows, not the counts again', async () => {
    const { svc, teamId } = await setup({ daily_spend_cap_usd: 0.00002 });
    const faults = failing(svc.records, 'rows');
    await recordBilledUsage(svc, teamId, 'inference', billed(1));
    await recordBilledUsage(svc, teamId, 'inference', billed(2));
    await expect(checkSpendAllowance(svc, teamId)).rejects.toBeInstanceOf(RateLimitError); // the cap counted both
    expect(await allRows(svc, teamId)).toHaveLength(0);
    faults.heal();
    for (const m of usageMessages(svc)) await handleWorkMessage(svc, m);
    expect(await allRows(svc, teamId)).toHaveLength(2);
    expect((await getUsage(svc, teamId)).today.by_model).toEqual([
      expect.objectContaining({ requests: 2, input_tokens: 200 }),
    ]);
  });
});

describe('idempotent replay', () => {
  it('every item kind counts once, whatever failed, landed unacknowledged, or was delivered again', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const at = new Date(NOW).toISOString();
    const events: UsageEvent[] = [
      { team_id: teamId, at, limit_class: 'inference', requests: 1 },
      {
        team_id: teamId,
        at,
        limit_class: 'inference',
        requests: 0,
        billed: billed(1, { model: 'a-name', model_id: projectId(1), model_name: 'a-name' }),
      },
      {
        team_id: teamId,
        at,
        limit_class: 'compat',
        requests: 0,
        billed: billed(2, { endpoint: '/v1/chat/completions', output_tokens: 7, cost_usd_micros: 25 }),
      },
    ];
    const batch = buildBatch(`w20260310-${'a'.repeat(32)}`, 1, teamId, events, 0);
    const kinds = batch.items.map((it) =>
      it.sk.replace(/#\d{4}-\d{2}(-\d{2})?/, '#<when>').replace(/#(MODEL|ENDPOINT)#.*/, '#$1#<key>'),
    );
    expect([...new Set(kinds)].sort()).toEqual(
      [
        'TEAM',
        'USAGE#DAY#<when>',
        'USAGE#MONTH#<when>',
        'USAGEBY#DAY#<when>#ENDPOINT#<key>',
        'USAGEBY#DAY#<when>#MODEL#<key>',
        'USAGEBY#MONTH#<when>#ENDPOINT#<key>',
        'USAGEBY#MONTH#<when>#MODEL#<key>',
      ].sort(),
    );
    // first attempt: every other item refused, the rest land but their reply is lost
    const update = svc.records.update.bind(svc.records);
    let call = 0;
    svc.records.update = (async (pk: string, sk: string, change: Parameters<RecordStore['update']>[2]) => {
      if (call++ % 2 === 0) throw new Error('injected: refused');
      await update(pk, sk, change);
      throw new Error('injected: reply lost');
    }) as RecordStore['update'];
    await expect(applyBatch(svc.records, batch, { now: new Date(NOW) })).rejects.toThrow(/injected/);
    svc.records.update = update as RecordStore['update'];
    const copy = JSON.parse(JSON.stringify(batch)) as UsageBatch; // as a spool line or a queue message
    for (let i = 0; i < 3; i++)
      expect(await applyBatch(svc.records, copy, { now: new Date(NOW) })).toEqual({ stale: [] });

    const get = (sk: string) => svc.records.get<Record<string, number>>(pkOf(teamId), sk);
    expect(await get('USAGE#DAY#2026-03-10')).toMatchObject({
      requests: 1,
      requests_inference: 1,
      billed_requests: 2,
      input_tokens: 200,
      output_tokens: 7,
      cost_usd_micros: 35,
    });
    expect(await get('USAGE#MONTH#2026-03')).toMatchObject({ requests: 1, billed_requests: 2, cost_usd_micros: 35 });
    for (const period of ['DAY#2026-03-10', 'MONTH#2026-03']) {
      expect(await get(`USAGEBY#${period}#MODEL#${projectId(1)}`)).toMatchObject({
        requests: 1,
        cost_usd_micros: 10,
        name: 'a-name',
      });
      expect(await get(`USAGEBY#${period}#MODEL#sift/gliner2-mini-v1`)).toMatchObject({
        requests: 1,
        output_tokens: 7,
        cost_usd_micros: 25,
      });
      expect(await get(`USAGEBY#${period}#ENDPOINT#/inference`)).toMatchObject({ requests: 1, cost_usd_micros: 10 });
      expect(await get(`USAGEBY#${period}#ENDPOINT#/v1/chat/completions`)).toMatchObject({
        requests: 1,
        cost_usd_micros: 25,
      });
    }
    expect((await get('TEAM'))!.credit_balance_micros).toBe(1_000_000 - 35);
    expect(await allRows(svc, teamId)).toHaveLength(2);
  });
});

describe('writer attributes stay bounded', () => {
  const writer = (day: number, k: number) =>
    `w${new Date(NOW + day * DAY_MS).toISOString().slice(0, 10).replaceAll('-', '')}-${String(k).padStart(32, '0')}`;
  const spend = (teamId: string, w: string, seq: number, at: number, micros = 1) =>
    buildBatch(
      w,
      seq,
      teamId,
      [
        {
          team_id: teamId,
          at: new Date(at).toISOString(),
          limit_class: 'inference',
          requests: 0,
          billed: billed(seq, { inference_id: `inf_${w}_${seq}`, cost_usd_micros: micros }),
        },
      ],
      0,
    );
  const seqAttrs = (item: Record<string, unknown> | undefined) =>
    Object.keys(item ?? {}).filter((k) => k.startsWith('seq|'));

  it('40 days of 10 new writers a day leave at most 64 writer attributes on the team item, and spend exactly', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    let most = 0;
    for (let day = 0; day < 40; day++) {
      for (let k = 0; k < 10; k++) {
        const at = NOW + day * DAY_MS;
        await applyBatch(svc.records, spend(teamId, writer(day, k), 1, at), { now: new Date(at) });
        most = Math.max(most, seqAttrs(await svc.records.get(pkOf(teamId), 'TEAM')).length);
      }
    }
    expect(most).toBeLessThanOrEqual(64);
    const team = (await svc.records.get<Record<string, unknown>>(pkOf(teamId), 'TEAM'))!;
    expect(team.credit_balance_micros).toBe(1_000_000 - 400);
    // today's and yesterday's writers are never pruned
    for (let k = 0; k < 10; k++) expect(team[`seq|${writer(39, k)}`]).toBe(1);
    for (let k = 0; k < 10; k++) expect(team[`seq|${writer(38, k)}`]).toBe(1);
  });

  it('a replay whose writer was pruned is refused, reported and kept for reconciliation; one from after the floor applies once', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const emf: string[] = [];
    const errors: string[] = [];
    const logger: Logger = { info: () => {}, warn: () => {}, error: (msg) => void errors.push(msg) };
    const laterNow = NOW + 40 * DAY_MS;
    const ledger = new UsageLedger({
      records: svc.records,
      spool: new QueueUsageSpool(svc.queue),
      metrics: emfUsageMetrics((l) => emf.push(l)),
      logger,
      mode: 'write-through',
      retentionDays: 90,
      now: () => new Date(laterNow),
    });
    // day 0: a batch applied, whose reply was lost, so it is also in the spool
    const early = spend(teamId, writer(0, 1), 1, NOW, 500);
    await applyBatch(svc.records, early, { now: new Date(NOW) });
    // day 37: a batch spooled before it was applied anywhere
    const unapplied = spend(teamId, writer(37, 9), 1, NOW + 37 * DAY_MS, 70);
    // 100 writers over days 1..10 and 30..39 push the team item past the bound
    for (const day of [...Array(10).keys()].map((d) => d + 1).concat([...Array(10).keys()].map((d) => d + 30))) {
      for (let k = 0; k < 5; k++)
        await applyBatch(svc.records, spend(teamId, writer(day, k), 1, NOW + day * DAY_MS), {
          now: new Date(NOW + day * DAY_MS),
        });
    }
    const team = (await svc.records.get<Record<string, unknown>>(pkOf(teamId), 'TEAM'))!;
    expect(team[`seq|${writer(0, 1)}`]).toBeUndefined();
    expect(team.seq_floor).toBeGreaterThan(20260310);
    expect(team.seq_floor).toBeLessThanOrEqual(Number(writer(37, 0).slice(1, 9)));

    await ledger.applyKept(JSON.parse(JSON.stringify(early)) as UsageBatch);
    const after = (await svc.records.get<Record<string, number>>(pkOf(teamId), 'TEAM'))!;
    expect(after.credit_balance_micros).toBe(1_000_000 - 500 - 100); // not spent twice
    const kept = await svc.records.queryAll<{ team_id: string; writer: string; items: Array<{ sk: string }> }>(
      'USAGESTALE',
    );
    expect(kept).toEqual([
      expect.objectContaining({
        team_id: teamId,
        writer: writer(0, 1),
        items: [expect.objectContaining({ sk: 'TEAM' })],
      }),
    ]);
    expect(emf.join('\n')).toContain('"UsageBatchesStale"');
    expect(errors).toEqual([expect.stringMatching(/kept for reconciliation/)]);

    // a writer the floor did not reach applies, once, however old
    await ledger.applyKept(unapplied);
    await ledger.applyKept(unapplied);
    expect((await svc.records.get<Record<string, number>>(pkOf(teamId), 'TEAM'))!.credit_balance_micros).toBe(
      1_000_000 - 500 - 100 - 70,
    );
  });

  it('a ledger takes a new writer id at UTC midnight, named by its day', async () => {
    const { svc, teamId } = await setup();
    let t = Date.parse('2026-03-10T23:59:59Z');
    const ledger = new UsageLedger({
      records: svc.records,
      spool: new QueueUsageSpool(svc.queue),
      metrics: emfUsageMetrics(() => {}),
      logger: { info() {}, warn() {}, error() {} },
      mode: 'write-through',
      retentionDays: 90,
      now: () => new Date(t),
    });
    await ledger.add({
      team_id: teamId,
      at: new Date(t).toISOString(),
      limit_class: 'inference',
      requests: 0,
      billed: billed(1),
    });
    t += 2000;
    await ledger.add({
      team_id: teamId,
      at: new Date(t).toISOString(),
      limit_class: 'inference',
      requests: 0,
      billed: billed(2),
    });
    const writers = async (sk: string) =>
      seqAttrs(await svc.records.get(pkOf(teamId), sk))
        .map((a) => a.slice(0, 14))
        .sort();
    expect(await writers('USAGE#DAY#2026-03-10')).toEqual(['seq|w20260310-']);
    expect(await writers('USAGE#DAY#2026-03-11')).toEqual(['seq|w20260311-']);
    expect(await writers('USAGE#MONTH#2026-03')).toEqual(['seq|w20260310-', 'seq|w20260311-']);
  });
});

describe('what the previous release wrote', () => {
  /** The previous release's batch builder (attributes `model|<m>|<counter>` on the day and month items; writer `w<hex>`). */
  function legacyBatch(writer: string, seq: number, teamId: string, events: UsageEvent[]): UsageBatch {
    const items = new Map<string, Record<string, number>>();
    const item = (sk: string) => {
      let it = items.get(sk);
      if (!it) {
        it = {};
        items.set(sk, it);
      }
      return it;
    };
    const bump = (add: Record<string, number>, k: string, v: number) => {
      if (v) add[k] = (add[k] ?? 0) + v;
    };
    let spent = 0;
    for (const e of events) {
      for (const add of [item(`USAGE#DAY#${e.at.slice(0, 10)}`), item(`USAGE#MONTH#${e.at.slice(0, 7)}`)]) {
        bump(add, 'requests', e.requests);
        bump(add, `requests_${e.limit_class}`, e.requests);
        const b = e.billed;
        if (!b) continue;
        for (const c of [
          'input_tokens',
          'output_tokens',
          'cache_read_tokens',
          'cache_write_tokens',
          'cost_usd_micros',
        ] as const) {
          bump(add, c, b[c]);
          bump(add, `model|${b.model}|${c}`, b[c]);
          bump(add, `endpoint|${b.endpoint}|${c}`, b[c]);
        }
        bump(add, `model|${b.model}|requests`, 1);
        bump(add, `endpoint|${b.endpoint}|requests`, 1);
      }
      if (e.billed) spent += e.billed.cost_usd_micros;
    }
    const out: UsageBatch['items'] = [...items].map(([sk, add]) => ({
      sk,
      add,
      ...(sk.startsWith('USAGE#DAY#') ? { set: { day: sk.slice(10) } } : {}),
    }));
    if (spent > 0) out.push({ sk: 'TEAM', add: { credit_balance_micros: -spent }, prepaidOnly: true });
    return {
      writer,
      seq,
      team_id: teamId,
      items: out,
      requests: events.flatMap((e) => (e.billed ? [{ ...e.billed, at: e.at }] : [])),
      expires_at: 0,
    };
  }
  /** How the previous release applied one item of it. */
  const legacyApply = (records: RecordStore, b: UsageBatch, it: UsageBatch['items'][number]) =>
    records.update(pkOf(b.team_id), it.sk, { add: it.add, set: { ...(it.set ?? {}), [`seq|${b.writer}`]: b.seq } });

  const event = (teamId: string, i: number, over: Partial<BilledUsage> = {}): UsageEvent => ({
    team_id: teamId,
    at: new Date(NOW).toISOString(),
    limit_class: 'inference',
    requests: 0,
    billed: billed(i, over),
  });

  it('an old-layout day and month item is read as it is, alone and beside new items of the same day', async () => {
    const { svc, teamId } = await setup();
    const old = legacyBatch(`w${'b'.repeat(32)}`, 1, teamId, [
      event(teamId, 1, { model: 'legacy-project' }),
      event(teamId, 2),
    ]);
    for (const it of old.items) await legacyApply(svc.records, old, it);
    let usage = await getUsage(svc, teamId);
    expect(usage.today.by_model).toEqual([
      expect.objectContaining({ model: 'legacy-project', requests: 1, input_tokens: 100 }),
      expect.objectContaining({ model: 'sift/gliner2-mini-v1', requests: 1, input_tokens: 100 }),
    ]);
    expect(usage.this_month.by_endpoint).toEqual([
      expect.objectContaining({ endpoint: '/inference', requests: 2, cost_usd: 0.00002 }),
    ]);
    expect(usage.by_day[0]!.by_model).toHaveLength(2);

    // the same day, now written by this release: the catalog model's rows merge, the project's id is a row of its own
    await recordBilledUsage(svc, teamId, 'inference', billed(3));
    await recordBilledUsage(
      svc,
      teamId,
      'inference',
      billed(4, { model: 'legacy-project', model_id: projectId(9), model_name: 'legacy-project', cost_usd_micros: 30 }),
    );
    usage = await getUsage(svc, teamId);
    for (const period of [usage.today, usage.this_month]) {
      expect(period).toMatchObject({ input_tokens: 400, cost_usd: 0.00006 });
      expect(period.by_model).toEqual([
        expect.objectContaining({ model: projectId(9), name: 'legacy-project', requests: 1, cost_usd: 0.00003 }),
        expect.objectContaining({ model: 'sift/gliner2-mini-v1', requests: 2, cost_usd: 0.00002 }),
        expect.objectContaining({ model: 'legacy-project', requests: 1, cost_usd: 0.00001 }),
      ]);
      expect(period.by_endpoint).toEqual([expect.objectContaining({ endpoint: '/inference', requests: 4 })]);
    }
    expect(usage.by_day[0]!.by_model.map((r) => r.requests)).toEqual([1, 2, 1]);
  });

  it('an old-format usage.apply message is applied once, into the new layout, however often it is delivered', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const old = legacyBatch(`w${'c'.repeat(32)}`, 3, teamId, [
      event(teamId, 1, { model: 'p-old' }),
      event(teamId, 2),
      { team_id: teamId, at: new Date(NOW).toISOString(), limit_class: 'inference', requests: 1 },
    ]);
    const message = JSON.parse(JSON.stringify({ type: 'usage.apply', batch: old })) as WorkMessage;
    for (let i = 0; i < 3; i++) await handleWorkMessage(svc, message);
    const day = (await svc.records.get<Record<string, unknown>>(pkOf(teamId), 'USAGE#DAY#2026-03-10'))!;
    expect(Object.keys(day).filter((k) => k.includes('|') && !k.startsWith('seq|'))).toEqual([]); // no old attributes written
    const usage = await getUsage(svc, teamId);
    expect(usage.today).toMatchObject({ requests: 1, input_tokens: 200, cost_usd: 0.00002 });
    expect(usage.today.by_model.map((r) => [r.model, r.requests])).toEqual([
      ['p-old', 1],
      ['sift/gliner2-mini-v1', 1],
    ]);
    expect(usage.credit_balance_usd).toBe(1 - 0.00002);
    expect(await allRows(svc, teamId)).toHaveLength(2);
  });

  it('an old-format batch the previous release had partly applied is completed without counting twice', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const old = legacyBatch(`w${'d'.repeat(32)}`, 1, teamId, [event(teamId, 1, { model: 'p-old' })]);
    // the old code wrote the day item (with its breakdown attributes), then failed: the batch was spooled
    await legacyApply(svc.records, old, old.items.find((it) => it.sk.startsWith('USAGE#DAY#'))!);
    await svc.usage.applyKept(JSON.parse(JSON.stringify(old)) as UsageBatch);
    await svc.usage.applyKept(JSON.parse(JSON.stringify(old)) as UsageBatch);
    const usage = await getUsage(svc, teamId);
    for (const period of [usage.today, usage.this_month]) {
      expect(period.by_model).toEqual([expect.objectContaining({ model: 'p-old', requests: 1, cost_usd: 0.00001 })]);
      expect(period.cost_usd).toBe(0.00001);
    }
    expect(usage.credit_balance_usd).toBe(1 - 0.00001);
  });
});

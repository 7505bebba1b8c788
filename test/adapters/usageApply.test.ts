/**
 * Usage records on the real store (dynalite, which enforces DynamoDB's 400 KB item size on every
 * UpdateItem, PutItem and BatchWriteItem — node_modules/dynalite/actions/updateItem.js; the limit:
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/ServiceQuotas.html).
 *
 * The AWS side of the usage spool: a batch a gateway could not write travels as a `usage.apply`
 * work message; the worker applies it, and a redelivery (SQS is at-least-once) or a replay after
 * a partial success changes nothing — for this release's batches and the previous release's.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkMessage, WorkQueue } from '../../src/core/ports';
import { QueueUsageSpool } from '../../src/core/billing/spool';
import { applyBatch, buildBatch, type UsageEvent } from '../../src/core/billing/usageBatch';
import { RateLimitError } from '../../src/core/errors';
import { daySk } from '../../src/core/recordKeys';
import {
  checkSpendAllowance,
  getUsage,
  listUsageRequests,
  recordBilledUsage,
  USAGE_READ_LIMITS,
} from '../../src/core/usage';
import { handleWorkMessage } from '../../src/core/worker';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack?.stop());

const billedEvent = (teamId: string, at: string, i: number, model = 'm') => ({
  team_id: teamId,
  at,
  limit_class: 'inference' as const,
  requests: 0,
  billed: {
    inference_id: `inf_test${i}`,
    endpoint: '/inference',
    model,
    base_model: 'm',
    input_tokens: 10,
    output_tokens: 5,
    cache_read_tokens: 0,
    cache_write_tokens: 0,
    cost_usd_micros: 7,
  },
});

it('a spooled batch is applied by the worker once, however often it is delivered', async () => {
  const team = (await stack.call('POST', '/teams', { body: { name: 'queued', credit_balance_usd: 1 } })).body.team;
  const at = new Date().toISOString();
  const events: UsageEvent[] = [1, 2, 3].map((i) => billedEvent(team.id, at, i));
  const sent: WorkMessage[] = [];
  const queue: WorkQueue = { send: async (m) => void sent.push(m) };
  await new QueueUsageSpool(queue).append(
    buildBatch(
      `w${at.slice(0, 10).replaceAll('-', '')}-${'e'.repeat(32)}`,
      1,
      team.id,
      events,
      Math.floor(Date.now() / 1000) + 3600,
    ),
  );
  expect(sent).toHaveLength(1);
  const message = JSON.parse(JSON.stringify(sent[0])) as WorkMessage; // as it crosses SQS
  for (let i = 0; i < 3; i++) await handleWorkMessage(stack.svc, message);

  const pk = `TEAM#${team.id}`;
  expect(await stack.svc.records.get(pk, daySk(at.slice(0, 10)))).toMatchObject({
    cost_usd_micros: 21,
    input_tokens: 30,
    billed_requests: 3,
  });
  expect(await stack.svc.records.get(pk, `USAGEBY#DAY#${at.slice(0, 10)}#MODEL#m`)).toMatchObject({
    model: 'm',
    requests: 3,
    cost_usd_micros: 21,
  });
  expect(await stack.svc.records.get(pk, `USAGEBY#MONTH#${at.slice(0, 7)}#ENDPOINT#/inference`)).toMatchObject({
    endpoint: '/inference',
    requests: 3,
    cost_usd_micros: 21,
  });
  const teamItem = (await stack.svc.records.get<{ credit_balance_micros: number }>(pk, 'TEAM'))!;
  expect(teamItem.credit_balance_micros).toBe(1_000_000 - 21);
  const listed = await stack.svc.records.query(pk, { beginsWith: 'USAGEREQ#' });
  expect(listed.items).toHaveLength(3);
});

it('a usage.apply message of the previous release (breakdown attributes, writer without a day) is applied once', async () => {
  const team = (await stack.call('POST', '/teams', { body: { name: 'old-queued', credit_balance_usd: 1 } })).body.team;
  const at = new Date().toISOString();
  const [day, month] = [at.slice(0, 10), at.slice(0, 7)];
  const add = {
    input_tokens: 20,
    output_tokens: 10,
    cost_usd_micros: 14,
    'model|old-project|input_tokens': 20,
    'model|old-project|output_tokens': 10,
    'model|old-project|cost_usd_micros': 14,
    'model|old-project|requests': 2,
    'endpoint|/inference|input_tokens': 20,
    'endpoint|/inference|output_tokens': 10,
    'endpoint|/inference|cost_usd_micros': 14,
    'endpoint|/inference|requests': 2,
  };
  const message = {
    type: 'usage.apply',
    batch: {
      writer: `w${'f'.repeat(32)}`,
      seq: 4,
      team_id: team.id,
      items: [
        { sk: `USAGE#DAY#${day}`, add, set: { day } },
        { sk: `USAGE#MONTH#${month}`, add },
        { sk: 'TEAM', add: { credit_balance_micros: -14 }, prepaidOnly: true },
      ],
      requests: [1, 2].map((i) => ({ ...billedEvent(team.id, at, i, 'old-project').billed, at })),
      expires_at: Math.floor(Date.now() / 1000) + 3600,
    },
  } as WorkMessage;
  for (let i = 0; i < 2; i++) await handleWorkMessage(stack.svc, JSON.parse(JSON.stringify(message)) as WorkMessage);
  const usage = await getUsage(stack.svc, team.id);
  for (const period of [usage.today, usage.this_month]) {
    expect(period).toMatchObject({ input_tokens: 20, output_tokens: 10, cost_usd: 0.000014 });
    expect(period.by_model).toEqual([
      expect.objectContaining({ model: 'old-project', requests: 2, cost_usd: 0.000014 }),
    ]);
    expect(period.by_endpoint).toEqual([expect.objectContaining({ endpoint: '/inference', requests: 2 })]);
  }
  expect(usage.credit_balance_usd).toBe(1 - 0.000014);
  expect((await listUsageRequests(stack.svc, team.id, { limit: 10 })).data).toHaveLength(2);
});

it('1,000 projects with 128-character names: usage writes keep succeeding, the cap keeps counting, every row is listed', async () => {
  const n = 1000;
  const team = (
    await stack.call('POST', '/teams', { body: { name: 'many-names', daily_spend_cap_usd: (n * 10) / 1e6 } })
  ).body.team;
  const svc = stack.svc;
  for (let i = 0; i < n; i++) {
    const name = `project-${String(i).padStart(5, '0')}-`.padEnd(128, 'x');
    const usage = {
      inference_id: `inf_${String(i).padStart(6, '0')}`,
      endpoint: '/inference',
      model: name,
      base_model: 'sift/gliner2-mini-v1',
      input_tokens: 500,
      output_tokens: 0,
      cache_read_tokens: 0,
      cache_write_tokens: 0,
      cost_usd_micros: 10,
    };
    // the project's id and name (this release's fields; the previous one knew only `model`)
    await recordBilledUsage(svc, team.id, 'inference', {
      ...usage,
      model_id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
      model_name: name,
    });
  }
  await svc.usage.flush();
  const spool = join(stack.dataDir, 'usage-spool.jsonl');
  const spooled = existsSync(spool) ? readFileSync(spool, 'utf8').split('\n').filter(Boolean).length : 0;
  expect(spooled).toBe(0); // no write failed (before: the day and month items passed 400 KB and every batch was spooled)
  const usage = await getUsage(svc, team.id);
  expect(usage.today).toMatchObject({ cost_usd: (n * 10) / 1e6, input_tokens: n * 500 });
  expect(usage.remaining_daily_allowance_usd).toBe(0);
  expect(await checkSpendAllowance(svc, team.id).catch((e: unknown) => e)).toBeInstanceOf(RateLimitError);
  expect(usage.this_month.by_model).toHaveLength(USAGE_READ_LIMITS.periodRows + 1);
  expect(usage.this_month.by_model.reduce((s, r) => s + r.requests, 0)).toBe(n);
  const ids = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await listUsageRequests(svc, team.id, { limit: 500, cursor });
    for (const r of page.data) ids.add(r.inference_id);
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
  expect(ids.size).toBe(n);
}, 120_000);

it('pruning writer attributes works within DynamoDB’s expression rules', async () => {
  const team = (await stack.call('POST', '/teams', { body: { name: 'writers', credit_balance_usd: 1 } })).body.team;
  const now = Date.now();
  const dayStamp = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');
  // 100 writers over the last 20 days, each spending once (the team item alone), applied as if on its own day
  for (let w = 0; w < 100; w++) {
    const at = now - (20 - Math.floor(w / 5)) * 86_400_000;
    const batch = {
      writer: `w${dayStamp(at)}-${String(w).padStart(32, '0')}`,
      seq: 1,
      team_id: team.id,
      items: [{ sk: 'TEAM', add: { credit_balance_micros: -7 }, prepaidOnly: true }],
      requests: [],
      expires_at: 0,
    };
    expect(await applyBatch(stack.svc.records, batch, { now: new Date(at) })).toEqual({ stale: [] });
  }
  const item = (await stack.svc.records.get<Record<string, unknown>>(`TEAM#${team.id}`, 'TEAM'))!;
  expect(Object.keys(item).filter((k) => k.startsWith('seq|')).length).toBeLessThanOrEqual(64);
  expect(item.seq_floor).toEqual(expect.any(Number));
  expect(item.credit_balance_micros).toBe(1_000_000 - 100 * 7);
}, 60_000);

/**
 * Usage is money: none may be lost or counted twice. 200 concurrent billed requests over HTTP while
 * the record store fails under the usage writes (an injected fault: the store stops answering for a
 * while, and some writes land but their reply is lost), then the same with the process stopped
 * while usage is still only in the spool and started again.
 */
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { RecordStore } from '../../src/core/ports';
import { teamPartition } from '../../src/core/recordKeys';
import { expectedCostMicros, FAKE_MODEL, startFakeVllm, useFakeVllm, type FakeVllm } from '../helpers/fakeVllm';
import { TestStack } from '../helpers/localStack';

let vllm: FakeVllm;
beforeAll(async () => {
  vllm = await startFakeVllm({ promptTokens: 1000, completionTokens: 100 });
});
afterAll(async () => {
  await vllm?.close();
});

const isUsageWrite = (sk: string, change?: { add?: Record<string, number> }) =>
  sk.startsWith('USAGE') || (sk === 'TEAM' && change?.add?.credit_balance_micros !== undefined);

/**
 * Makes the store fail under one team's usage writes: `down(n)` refuses the next n of them
 * (`down()`: all, until `heal`; nothing written);
 * `loseReplies(n)` lets the next n land and then throws as if the reply was lost. Other writes pass.
 * Only the team's own partition fails: the ledger writes one batch per team at a time, so n counts
 * that team's attempts (8 writes each: the day and month totals, the model's and the endpoint's
 * day and month items, the team item, and the request rows). Shared with another team's batch in
 * flight (the default team's unbilled requests), the refusals left each batch one attempt short of
 * being spooled.
 */
function injectStoreFaults(records: RecordStore, teamId: string) {
  const pk = teamPartition(teamId);
  const update = records.update.bind(records);
  const put = records.put.bind(records);
  const putAll = records.putAll.bind(records);
  let refuseLeft = 0;
  let loseReplies = 0;
  const stats = { refused: 0, lostReplies: 0 };
  const unavailable = () => Object.assign(new Error('injected: store unavailable'), { name: 'ServiceUnavailable' });
  records.update = (async (p: string, sk: string, change: Parameters<RecordStore['update']>[2]) => {
    if (p === pk && isUsageWrite(sk, change) && refuseLeft > 0) {
      refuseLeft--;
      stats.refused++;
      throw unavailable();
    }
    const out = await update(p, sk, change);
    if (p === pk && isUsageWrite(sk, change) && loseReplies > 0) {
      loseReplies--;
      stats.lostReplies++;
      throw unavailable();
    }
    return out;
  }) as RecordStore['update'];
  records.put = (async (
    keys: Parameters<RecordStore['put']>[0],
    record: object,
    opts?: Parameters<RecordStore['put']>[2],
  ) => {
    if (keys.pk === pk && isUsageWrite(keys.sk) && refuseLeft > 0) {
      refuseLeft--;
      stats.refused++;
      throw unavailable();
    }
    return put(keys, record, opts);
  }) as RecordStore['put'];
  // the per-request usage rows go in batch writes
  records.putAll = async (items) => {
    if (items.some((it) => it.keys.pk === pk && isUsageWrite(it.keys.sk)) && refuseLeft > 0) {
      refuseLeft--;
      stats.refused++;
      throw unavailable();
    }
    return putAll(items);
  };
  return {
    stats,
    down: (n = Infinity) => (refuseLeft = n),
    loseReplies: (n: number) => (loseReplies = n),
    heal: () => {
      refuseLeft = 0;
      loseReplies = 0;
    },
  };
}

const chat = (stack: TestStack, key: string) =>
  stack.call('POST', '/v1/chat/completions', {
    key,
    body: { model: FAKE_MODEL, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 100 },
  });

async function allRows(stack: TestStack, key: string): Promise<any[]> {
  const rows: any[] = [];
  let cursor: string | null = null;
  do {
    const page: any = await stack.call(
      'GET',
      `/billing/usage/requests/list?limit=500${cursor ? `&cursor=${cursor}` : ''}`,
      { key },
    );
    expect(page.status).toBe(200);
    rows.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return rows;
}

async function checkBilledExactlyOnce(stack: TestStack, key: string, ids: string[], startMicros: number) {
  const price = expectedCostMicros(vllm);
  const usage = (await stack.call('GET', '/billing/usage/requests', { key })).body;
  const model = usage.today.by_model.find((m: any) => m.model === FAKE_MODEL);
  expect(model.requests).toBe(ids.length);
  expect(Math.round(model.cost_usd * 1e6)).toBe(ids.length * price);
  expect(usage.today.input_tokens).toBe(ids.length * vllm.promptTokens);
  expect(usage.today.output_tokens).toBe(ids.length * vllm.completionTokens);
  expect(Math.round(usage.this_month.cost_usd * 1e6)).toBe(ids.length * price);
  expect(Math.round(usage.credit_balance_usd * 1e6)).toBe(startMicros - ids.length * price);
  const rows = await allRows(stack, key);
  expect(rows).toHaveLength(ids.length);
  expect(new Set(rows.map((r) => r.inference_id))).toEqual(new Set(ids));
  expect(rows.reduce((sum, r) => sum + Math.round(r.cost_usd * 1e6), 0)).toBe(ids.length * price);
}

it('200 concurrent billed requests with the store failing mid-run: each billed exactly once', async () => {
  const stack = await TestStack.start();
  try {
    useFakeVllm(stack, vllm);
    const team = (await stack.call('POST', '/teams', { body: { name: 'busy', credit_balance_usd: 1 } })).body;
    const faults = injectStoreFaults(stack.svc.records, team.team.id);
    vllm.pieceDelayMs = 2;
    // the faults start when 40 (and 120) answers are back, with the rest still in flight
    let answered = 0;
    const requests = Array.from({ length: 200 }, async () => {
      const res = await chat(stack, team.api_key.key);
      answered++;
      // 32 refusals outlast one batch's 4 attempts of its 8 writes: it is spooled
      if (answered === 40) faults.down(32);
      if (answered === 120) faults.loseReplies(6); // written, but the writer is told it failed
      return res;
    });
    const responses = await Promise.all(requests);
    vllm.pieceDelayMs = 0;
    expect(responses.map((r) => r.status)).toEqual(Array(200).fill(200));
    expect(faults.stats.refused).toBeGreaterThan(0);
    expect(faults.stats.lostReplies).toBeGreaterThan(0);
    faults.heal();
    // what was kept while the store failed is replayed by the next flush (every second)
    const spool = join(stack.dataDir, 'usage-spool.jsonl');
    expect(existsSync(spool)).toBe(true);
    await stack.svc.usage.flush();
    expect(readFileSync(spool, 'utf8')).toBe('');
    const emf = readFileSync(join(stack.dataDir, 'logs', 'metrics.emf.jsonl'), 'utf8');
    expect(emf).toContain('"UsageBatchesSpooled"');
    await checkBilledExactlyOnce(
      stack,
      team.api_key.key,
      responses.map((r) => r.body.inference_id),
      1_000_000,
    );
  } finally {
    await stack.stop();
  }
}, 120_000);

it('usage still in the spool when the process stops is written on the next start', async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'sift-spool-'));
  try {
    let stack = await TestStack.start({ dataDir });
    useFakeVllm(stack, vllm);
    const team = (await stack.call('POST', '/teams', { body: { name: 'restart', credit_balance_usd: 1 } })).body;
    const faults = injectStoreFaults(stack.svc.records, team.team.id);
    faults.down();
    const responses = await Promise.all(Array.from({ length: 5 }, () => chat(stack, team.api_key.key)));
    expect(responses.map((r) => r.status)).toEqual(Array(5).fill(200));
    await stack.stop(); // the final flush cannot write either: the batches stay in the spool
    const kept = readFileSync(join(dataDir, 'usage-spool.jsonl'), 'utf8').split('\n').filter(Boolean);
    expect(kept.length).toBeGreaterThan(0);

    stack = await TestStack.start({ dataDir });
    try {
      expect(readFileSync(join(dataDir, 'usage-spool.jsonl'), 'utf8')).toBe('');
      await checkBilledExactlyOnce(
        stack,
        team.api_key.key,
        responses.map((r) => r.body.inference_id),
        1_000_000,
      );
    } finally {
      await stack.stop();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}, 120_000);

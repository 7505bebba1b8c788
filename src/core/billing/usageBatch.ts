/**
 * A usage batch: one team's usage events turned into the exact writes that record them, as plain
 * JSON (so it can be kept in a spool file or a queue message and applied later by any process).
 *
 * Layout (recordKeys.ts): per team and UTC day and month, one totals item (`USAGE#DAY#<d>`,
 * `USAGE#MONTH#<m>`) whose attributes are a fixed set — requests, requests per limit class,
 * billed requests, tokens, cost — and one breakdown item per model and per endpoint
 * (`USAGEBY#DAY#<d>#MODEL#<id>`, …), keyed by the canonical model id (a project id, not its name).
 * No caller-chosen string ever becomes an attribute name, so no item grows with what callers send.
 *
 * Applying a batch is idempotent without transactions (dynalite has none): every counter update
 * also sets `seq|<writer>` to the batch's sequence number, on the condition that the item holds a
 * lower one for that writer. A writer applies its batches to a team's items in order (one batch
 * per team in flight) and retires its id once it keeps a batch for later, so a replay after a
 * partial success re-applies only the items that missed it. Per-request rows are plain puts of the
 * same item, idempotent by nature, written independently of the counters.
 *
 * Writer attributes are bounded: a writer id names its UTC day (`w<yyyymmdd>-<hex>`; the ledger
 * takes a new one at midnight). When an item holds more than SEQ_ATTRS_MAX of them, the applier
 * removes the oldest writer-days (never today's or yesterday's) and raises the item's `seq_floor`
 * past them in the same conditional update; every counter update requires `seq_floor` ≤ its
 * writer's day. A replay whose writer's attributes were pruned is therefore refused atomically —
 * never applied blindly, never double-counted — and reported as stale (the ledger keeps it for
 * reconciliation).
 */
import { sha256Hex } from '../ids';
import {
  daySk,
  monthSk,
  requestSk,
  TEAM_SK,
  teamPartition,
  usageBreakdownSk,
  type UsageBreakdown,
  type UsagePeriod,
} from '../recordKeys';
import {
  WriteConflict,
  type Clause,
  type RecordStore,
  type UsageBatch,
  type UsageBatchItem,
  type UsageEvent,
  type UsageRequestRow,
} from '../ports';

export type { BilledUsage, UsageBatch, UsageBatchItem, UsageEvent, UsageRequestRow } from '../ports';

export const TOKEN_COUNTERS = [
  'input_tokens',
  'output_tokens',
  'cache_read_tokens',
  'cache_write_tokens',
  'cost_usd_micros',
] as const;
export type TokenCounter = (typeof TOKEN_COUNTERS)[number];
/** The counters of a breakdown item: billed requests, then tokens and cost. */
export const BREAKDOWN_COUNTERS = ['requests', ...TOKEN_COUNTERS] as const;
/** On the totals item: billed requests (its `requests` counts every authenticated request). */
export const BILLED_REQUESTS = 'billed_requests';

export const dayOf = (iso: string) => iso.slice(0, 10);
export const monthOf = (iso: string) => iso.slice(0, 7);

const SEQ_PREFIX = 'seq|';
/** The lowest writer day (yyyymmdd) an item still accepts; days below it were pruned. */
export const SEQ_FLOOR = 'seq_floor';
/** An item holding more writer attributes than this is pruned ... */
export const SEQ_ATTRS_MAX = 64;
/** ... down to this many (whole writer-days, oldest first, never today's or yesterday's). */
export const SEQ_ATTRS_KEEP = 32;
/** Attributes one pruning update removes at most (DynamoDB: an expression is at most 4 KB). */
const PRUNE_PER_UPDATE = 300;
/** Counter updates of one batch in flight at once (a batch of many models is many items). */
const ITEM_WRITES_AT_ONCE = 32;
/** Longest breakdown key kept as it is; a longer one is hashed (DynamoDB: a sort key is at most 1 KB). */
const MAX_KEY_BYTES = 200;

/** Whether an attribute of a counter item is bookkeeping (writer sequence numbers), not usage. */
export const isSeqAttr = (name: string) => name.startsWith(SEQ_PREFIX);

/** `yyyymmdd` of a UTC day, as a number (writer days and `seq_floor` compare as numbers). */
export const dayNumber = (at: Date) => Number(at.toISOString().slice(0, 10).replaceAll('-', ''));
/** A fresh writer id of the day `at` falls in. */
export const newWriterId = (at: Date, unique: string) => `w${dayNumber(at)}-${unique}`;
/** The UTC day a writer id names; 0 for ids written before they named one (the oldest there can be). */
export function writerDay(writer: string): number {
  const m = /^w(\d{8})-/.exec(writer);
  return m ? Number(m[1]) : 0;
}

/** A breakdown item's key part: the id itself, or its hash when it would make a long sort key. */
export const breakdownKey = (id: string) => (Buffer.byteLength(id) <= MAX_KEY_BYTES ? id : `sha256:${sha256Hex(id)}`);

function bump(add: Record<string, number>, name: string, v: number): void {
  if (v) add[name] = (add[name] ?? 0) + v;
}

export function buildBatch(
  writer: string,
  seq: number,
  teamId: string,
  events: UsageEvent[],
  expiresAt: number,
): UsageBatch {
  const items = new Map<string, UsageBatchItem>();
  const item = (sk: string, set: Record<string, string>) => {
    let it = items.get(sk);
    if (!it) {
      it = { sk, add: {}, set: {} };
      items.set(sk, it);
    }
    Object.assign(it.set!, set);
    return it.add;
  };
  let spent = 0;
  const requests: UsageRequestRow[] = [];
  for (const e of events) {
    const periods: Array<[UsagePeriod, string, Record<string, string>]> = [
      ['DAY', dayOf(e.at), { day: dayOf(e.at) }],
      ['MONTH', monthOf(e.at), { month: monthOf(e.at) }],
    ];
    for (const [period, when, named] of periods) {
      // the totals item names its period, so a range query of day items needs no key parsing
      const totals = item(period === 'DAY' ? daySk(when) : monthSk(when), named);
      bump(totals, 'requests', e.requests);
      bump(totals, `requests_${e.limit_class}`, e.requests);
      const b = e.billed;
      if (!b) continue;
      bump(totals, BILLED_REQUESTS, 1);
      for (const c of TOKEN_COUNTERS) bump(totals, c, b[c]);
      const model = b.model_id ?? b.model;
      const breakdowns: Array<[UsageBreakdown, Record<string, string>]> = [
        ['MODEL', { model, ...(b.model_name && b.model_name !== model ? { name: b.model_name } : {}) }],
        ['ENDPOINT', { endpoint: b.endpoint }],
      ];
      for (const [kind, set] of breakdowns) {
        const add = item(usageBreakdownSk(period, when, kind, breakdownKey(kind === 'MODEL' ? model : b.endpoint)), {
          ...named,
          ...set,
        });
        bump(add, 'requests', 1);
        for (const c of TOKEN_COUNTERS) bump(add, c, b[c]);
      }
    }
    if (e.billed) {
      spent += e.billed.cost_usd_micros;
      requests.push({ ...e.billed, at: e.at });
    }
  }
  const out = [...items.values()].filter((it) => Object.keys(it.add).length);
  if (spent > 0) out.push({ sk: TEAM_SK, add: { credit_balance_micros: -spent }, prepaidOnly: true });
  return { writer, seq, team_id: teamId, items: out, requests, expires_at: expiresAt };
}

export interface ApplyResult {
  /** Items refused because their writer's sequence numbers were pruned (a replay too old to apply safely). */
  stale: UsageBatchItem[];
}

type Stored = Record<string, unknown>;

/**
 * Applies a batch: counters and per-request rows independently (one failing does not stop the
 * other), then throws the first failure. Every write is idempotent, so calling it again after
 * any failure is safe. `now` decides which writer days are recent (tests pass their clock).
 */
export async function applyBatch(
  records: RecordStore,
  batch: UsageBatch,
  opts: { now?: Date } = {},
): Promise<ApplyResult> {
  const now = opts.now ?? new Date();
  const pk = teamPartition(batch.team_id);
  const [counters, rows] = await Promise.allSettled([
    applyCounters(records, pk, batch, now),
    // one store call per 25 rows, not one per request: on a busy server this was a write per response
    batch.requests.length
      ? records.putAll(
          batch.requests.map((row) => ({ keys: { pk, sk: requestSk(row), expiresAt: batch.expires_at }, record: row })),
        )
      : undefined,
  ]);
  if (counters.status === 'rejected') throw counters.reason;
  if (rows.status === 'rejected') throw rows.reason;
  return counters.value;
}

async function applyCounters(records: RecordStore, pk: string, batch: UsageBatch, now: Date): Promise<ApplyResult> {
  const stale: UsageBatchItem[] = [];
  const applyAll = async (items: UsageBatchItem[]) => {
    let failure: { reason: unknown } | undefined;
    // every item is tried even when one fails (each is idempotent); a burst stays bounded
    for (let i = 0; i < items.length; i += ITEM_WRITES_AT_ONCE) {
      const chunk = items.slice(i, i + ITEM_WRITES_AT_ONCE);
      const results = await Promise.allSettled(chunk.map((it) => applyItem(records, pk, batch, it, now)));
      for (const [j, r] of results.entries()) {
        if (r.status === 'rejected') failure ??= { reason: r.reason };
        else if (r.value === 'stale') stale.push(chunk[j]!);
      }
    }
    if (failure) throw failure.reason;
  };
  // a batch written before breakdown items existed: each of its period items as upgradeLegacyItem decides
  for (const it of batch.items.filter(hasLegacyBreakdown)) {
    const upgraded = await upgradeLegacyItem(records, pk, batch, it);
    if (upgraded.stale) {
      stale.push(it);
      continue;
    }
    await applyAll(upgraded.breakdown);
    await applyAll([upgraded.totals]);
  }
  await applyAll(batch.items.filter((it) => !hasLegacyBreakdown(it)));
  return { stale };
}

/** One conditional update; `stale` when the item's floor refused the writer and the batch is not on it. */
async function applyItem(
  records: RecordStore,
  pk: string,
  batch: UsageBatch,
  it: UsageBatchItem,
  now: Date,
): Promise<'applied' | 'stale'> {
  const seqAttr = `${SEQ_PREFIX}${batch.writer}`;
  const day = writerDay(batch.writer);
  const condition: Clause[] = [
    {
      anyOf: [
        { attr: seqAttr, present: false },
        { attr: seqAttr, lessThan: batch.seq },
      ],
    },
    {
      anyOf: [
        { attr: SEQ_FLOOR, present: false },
        { attr: SEQ_FLOOR, lessThan: day + 1 },
      ],
    },
    // only a credit balance that exists is spent: a team billed in arrears has none
    ...(it.prepaidOnly ? [{ attr: 'credit_balance_micros', present: true }] : []),
  ];
  let after: Stored;
  try {
    after = await records.update<Stored>(pk, it.sk, {
      add: it.add,
      set: { ...(it.set ?? {}), [seqAttr]: batch.seq },
      condition,
    });
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
    // A floor never passes yesterday (a day of margin for clocks): today's writer's conflict is a
    // replay of what is already there, or a team without prepaid credit. An older one's needs a look.
    if (day >= dayNumber(now)) return 'applied';
    return (await refusedAsStale(records, pk, batch, it)) ? 'stale' : 'applied';
  }
  await pruneSeqAttrs(records, pk, it.sk, after, now);
  return 'applied';
}

async function refusedAsStale(
  records: RecordStore,
  pk: string,
  batch: UsageBatch,
  it: UsageBatchItem,
): Promise<boolean> {
  const item = await records.get<Stored>(pk, it.sk, true);
  const seen = item?.[`${SEQ_PREFIX}${batch.writer}`];
  if (typeof seen === 'number' && seen >= batch.seq) return false; // applied before
  if (it.prepaidOnly && item?.credit_balance_micros === undefined) return false; // nothing to spend from
  const floor = item?.[SEQ_FLOOR];
  if (typeof floor === 'number' && floor > writerDay(batch.writer)) return true;
  // none of the reasons holds any more (the item changed in between): try the batch again later
  throw new Error(`usage item ${it.sk} refused batch ${batch.writer}#${batch.seq} for no reason it still shows`);
}

const yesterday = (now: Date) => new Date(now.getTime() - 86_400_000);

/**
 * Keeps an item's writer attributes bounded: over SEQ_ATTRS_MAX, whole writer-days are removed,
 * oldest first, until SEQ_ATTRS_KEEP remain or only yesterday's and today's are left, and
 * `seq_floor` moves past them in the same update (any later batch of those writers is refused).
 */
export async function pruneSeqAttrs(
  records: RecordStore,
  pk: string,
  sk: string,
  item: Stored,
  now: Date,
): Promise<void> {
  const seqs = Object.keys(item)
    .filter(isSeqAttr)
    .map((name) => ({ name, day: writerDay(name.slice(SEQ_PREFIX.length)) }));
  if (seqs.length <= SEQ_ATTRS_MAX) return;
  const current = typeof item[SEQ_FLOOR] === 'number' ? (item[SEQ_FLOOR] as number) : 0;
  const protectedFrom = dayNumber(yesterday(now));
  const days = [...new Set(seqs.map((s) => s.day))].sort((a, b) => a - b);
  let floor = current;
  let left = seqs.filter((s) => s.day >= floor).length;
  for (const d of days) {
    if (d < floor) continue;
    if (left <= SEQ_ATTRS_KEEP || d >= protectedFrom) break;
    floor = d + 1;
    left -= seqs.filter((s) => s.day === d).length;
  }
  const remove = seqs
    .filter((s) => s.day < floor)
    .slice(0, PRUNE_PER_UPDATE)
    .map((s) => s.name);
  if (!remove.length) return;
  try {
    await records.update(pk, sk, {
      set: { [SEQ_FLOOR]: floor },
      remove,
      // the floor only rises: a concurrent pruner that went further wins
      condition: [
        {
          anyOf: [
            { attr: SEQ_FLOOR, present: false },
            { attr: SEQ_FLOOR, lessThan: floor + 1 },
          ],
        },
      ],
    });
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
  }
}

// ---------------------------------------------------------------------------------------------
// Batches written before breakdown items (a spool line or a queued `usage.apply` of that release)

const LEGACY_KINDS: Record<string, UsageBreakdown> = { model: 'MODEL', endpoint: 'ENDPOINT' };

/** `model|<model>|<counter>` / `endpoint|<path>|<counter>` on a day or month item: the old layout. */
export function parseLegacyBreakdownAttr(
  name: string,
): { kind: UsageBreakdown; key: string; counter: string } | undefined {
  const first = name.indexOf('|');
  const last = name.lastIndexOf('|');
  if (first < 0 || first === last) return undefined;
  const kind = LEGACY_KINDS[name.slice(0, first)];
  return kind ? { kind, key: name.slice(first + 1, last), counter: name.slice(last + 1) } : undefined;
}

const hasLegacyBreakdown = (it: UsageBatchItem) =>
  Object.keys(it.add).some((k) => parseLegacyBreakdownAttr(k) !== undefined);

/**
 * An old-layout period item becomes the new layout: its fixed counters, plus breakdown items. The
 * old code applied the breakdown with the counters in one update, so when the totals item already
 * holds this batch (the old code, or an earlier replay of this one, applied it) its breakdown is
 * already counted (as old attributes there, or in the breakdown items): only the breakdown items
 * of a period whose totals item does not hold it are written, and they go before the totals item
 * (both idempotent: a replay after a partial success completes it without counting twice).
 */
async function upgradeLegacyItem(
  records: RecordStore,
  pk: string,
  batch: UsageBatch,
  it: UsageBatchItem,
): Promise<{ breakdown: UsageBatchItem[]; totals: UsageBatchItem; stale: boolean }> {
  const dayMatch = /^USAGE#(DAY|MONTH)#(.+)$/.exec(it.sk);
  const totals: UsageBatchItem = { ...it, add: {} };
  const breakdown = new Map<string, UsageBatchItem>();
  for (const [name, v] of Object.entries(it.add)) {
    const parsed = parseLegacyBreakdownAttr(name);
    if (!parsed || !dayMatch) {
      totals.add[name] = v;
      continue;
    }
    const period = dayMatch[1] as UsagePeriod;
    const when = dayMatch[2]!;
    const sk = usageBreakdownSk(period, when, parsed.kind, breakdownKey(parsed.key));
    const b = breakdown.get(sk) ?? {
      sk,
      add: {},
      set: { [period === 'DAY' ? 'day' : 'month']: when, [parsed.kind === 'MODEL' ? 'model' : 'endpoint']: parsed.key },
    };
    b.add[parsed.counter] = v;
    breakdown.set(sk, b);
    if (parsed.kind === 'MODEL' && parsed.counter === 'requests') bump(totals.add, BILLED_REQUESTS, v);
  }
  const current = await records.get<Stored>(pk, it.sk, true);
  const held = current?.[`${SEQ_PREFIX}${batch.writer}`];
  if (typeof held === 'number' && held >= batch.seq) return { breakdown: [], totals, stale: false };
  // pruned past this writer: neither part can be applied safely (the totals item would refuse it)
  const floor = current?.[SEQ_FLOOR];
  const stale = typeof floor === 'number' && floor > writerDay(batch.writer);
  return { breakdown: [...breakdown.values()], totals, stale };
}

/**
 * A usage batch: one team's usage events turned into the exact writes that record them, as plain
 * JSON (so it can be kept in a spool file or a queue message and applied later by any process).
 *
 * Applying a batch is idempotent without transactions (dynalite has none): every counter update
 * also sets `seq|<writer>` to the batch's sequence number, on the condition that the item holds a
 * lower one for that writer. A writer applies its batches to a team's items in order (one batch
 * per team in flight) and retires its id once it keeps a batch for later, so a replay after a
 * partial success re-applies only the items that missed it. Per-request rows are plain puts of the
 * same item, idempotent by nature.
 */
import { daySk, monthSk, requestSk, TEAM_SK, teamPartition, USAGE_DAYS_PREFIX } from '../recordKeys';
import { WriteConflict, type RecordStore, type UsageBatch, type UsageEvent, type UsageRequestRow } from '../ports';

export type { BilledUsage, UsageBatch, UsageEvent, UsageRequestRow } from '../ports';

export const TOKEN_COUNTERS = ['input_tokens', 'output_tokens', 'cache_read_tokens', 'cache_write_tokens', 'cost_usd_micros'] as const;
export type TokenCounter = (typeof TOKEN_COUNTERS)[number];

export const dayOf = (iso: string) => iso.slice(0, 10);
export const monthOf = (iso: string) => iso.slice(0, 7);
/** Breakdown attributes on the day and month items: `model|<id>|<counter>`, `endpoint|<path>|<counter>`. */
export const breakdownAttr = (kind: 'model' | 'endpoint', key: string, counter: TokenCounter | 'requests') => `${kind}|${key}|${counter}`;
const SEQ_PREFIX = 'seq|';

function bump(add: Record<string, number>, name: string, v: number): void {
  if (v) add[name] = (add[name] ?? 0) + v;
}

export function buildBatch(writer: string, seq: number, teamId: string, events: UsageEvent[], expiresAt: number): UsageBatch {
  const items = new Map<string, Record<string, number>>();
  const item = (sk: string) => items.get(sk) ?? (items.set(sk, {}), items.get(sk)!);
  let spent = 0;
  const requests: UsageRequestRow[] = [];
  for (const e of events) {
    for (const add of [item(daySk(dayOf(e.at))), item(monthSk(monthOf(e.at)))]) {
      bump(add, 'requests', e.requests);
      bump(add, `requests_${e.limit_class}`, e.requests);
      const b = e.billed;
      if (!b) continue;
      for (const c of TOKEN_COUNTERS) {
        bump(add, c, b[c]);
        bump(add, breakdownAttr('model', b.model, c), b[c]);
        bump(add, breakdownAttr('endpoint', b.endpoint, c), b[c]);
      }
      bump(add, breakdownAttr('model', b.model, 'requests'), 1);
      bump(add, breakdownAttr('endpoint', b.endpoint, 'requests'), 1);
    }
    if (e.billed) {
      spent += e.billed.cost_usd_micros;
      requests.push({ ...e.billed, at: e.at });
    }
  }
  // the day item names its day, so a range query of day items needs no key parsing
  const out: UsageBatch['items'] = [...items]
    .filter(([, add]) => Object.keys(add).length)
    .map(([sk, add]) => ({ sk, add, ...(sk.startsWith(USAGE_DAYS_PREFIX) ? { set: { day: sk.slice(USAGE_DAYS_PREFIX.length) } } : {}) }));
  if (spent > 0) out.push({ sk: TEAM_SK, add: { credit_balance_micros: -spent }, prepaidOnly: true });
  return { writer, seq, team_id: teamId, items: out, requests, expires_at: expiresAt };
}

/** Applies a batch; every write is idempotent, so calling it again after any failure is safe. */
export async function applyBatch(records: RecordStore, batch: UsageBatch): Promise<void> {
  const pk = teamPartition(batch.team_id);
  const seqAttr = `${SEQ_PREFIX}${batch.writer}`;
  await Promise.all(
    batch.items.map(async (it) => {
      try {
        await records.update(pk, it.sk, {
          add: it.add,
          set: { ...(it.set ?? {}), [seqAttr]: batch.seq },
          condition: [
            { anyOf: [{ attr: seqAttr, present: false }, { attr: seqAttr, lessThan: batch.seq }] },
            // only a credit balance that exists is spent: a team billed in arrears has none
            ...(it.prepaidOnly ? [{ attr: 'credit_balance_micros', present: true }] : []),
          ],
        });
      } catch (err) {
        // already applied (a replay), or a team without prepaid credit: nothing to do
        if (!(err instanceof WriteConflict)) throw err;
      }
    }),
  );
  // one store call per 25 rows, not one per request: on a busy server this was a write per response
  if (batch.requests.length) await records.putAll(batch.requests.map((row) => ({ keys: { pk, sk: requestSk(row), expiresAt: batch.expires_at }, record: row })));
}

/** Whether an attribute of a counter item is bookkeeping (writer sequence numbers), not usage. */
export const isSeqAttr = (name: string) => name.startsWith(SEQ_PREFIX);

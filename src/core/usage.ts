import type { Services } from './context';
import { PaymentRequiredError, RateLimitError, ValidationError } from './errors';
import { microsToUsd, usdOrNull } from './billing/money';
import { dayOf, isSeqAttr, monthOf, TOKEN_COUNTERS, type BilledUsage, type UsageRequestRow } from './billing/usageBatch';
import { daySk, monthSk, teamPartition, USAGE_DAYS_PREFIX, USAGE_REQUESTS_PREFIX } from './recordKeys';
import { LIMIT_CLASSES, type LimitClass } from './rateLimits';
import { getTeam, getTeamRecord } from './teams';

export type { UsageSink } from './billing/ledger';
export type { BilledUsage } from './billing/usageBatch';

/** Counts one authenticated request against today's and this month's counters. */
export function recordRequest(svc: Services, teamId: string, limitClass: LimitClass): Promise<void> {
  return svc.usage.add({ team_id: teamId, at: svc.now().toISOString(), limit_class: limitClass, requests: 1 });
}

/**
 * Bills one request: tokens and cost on the day/month counters (by model and endpoint), a row in
 * the per-request listing, the cost taken from a prepaid balance, and finance's EMF metrics.
 */
export function recordBilledUsage(svc: Services, teamId: string, limitClass: LimitClass, usage: BilledUsage): Promise<void> {
  return svc.usage.add({ team_id: teamId, at: svc.now().toISOString(), limit_class: limitClass, requests: 0, billed: usage });
}

const nextUtcMidnight = (now: Date) => new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));

const outOfCredits = () => {
  const err = new PaymentRequiredError('Account out of credits: add credits or change plan');
  // no retry can help until someone adds credit (both vendor SDKs obey this header)
  err.headers['x-should-retry'] = 'false';
  return err;
};

/**
 * Before billable work: 402 when the prepaid balance is used up (≤ 0), 429 with the spend-cap
 * reason when today's spend reached the daily cap (clears at 00:00 UTC). This process's own
 * billed usage is written first, so its previous request's cost is always seen; requests in other
 * processes are seen once written (the overdraft bound in README "Billing").
 */
export async function checkSpendAllowance(svc: Services, teamId: string): Promise<void> {
  if (svc.hotPath) {
    // a long-lived process knows from its cached team whether there is anything to check at all
    const team = await getTeam(svc, teamId);
    if (team.credit_balance_usd === null && team.daily_spend_cap_usd === null) return;
  }
  await svc.usage.settled(teamId);
  // one fresh read: the balance changes with every billed request (Lambda has no team cache anyway)
  const team = await getTeamRecord(svc, teamId);
  if (team.credit_balance_micros !== undefined && team.credit_balance_micros <= 0) throw outOfCredits();
  const cap = team.daily_spend_cap_micros;
  if (typeof cap === 'number') {
    const now = svc.now();
    const day = await svc.records.get<Record<string, number>>(teamPartition(teamId), daySk(dayOf(now.toISOString())));
    if ((day?.['cost_usd_micros'] ?? 0) >= cap) {
      throw new RateLimitError(
        `Daily spending cap of ${microsToUsd(cap)} USD reached; it clears at 00:00 UTC`,
        Math.ceil((nextUtcMidnight(now).getTime() - now.getTime()) / 1000),
        'daily_spend_cap_exceeded',
      );
    }
  }
}

type Stored = Record<string, number | string | undefined>;

interface Totals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  cost_usd: number;
}

const emptyTotals = (): Totals => ({ requests: 0, input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd: 0 });

function totalsFrom(get: (counter: string) => number): Totals {
  return {
    requests: get('requests'),
    input_tokens: get('input_tokens'),
    output_tokens: get('output_tokens'),
    cache_read_tokens: get('cache_read_tokens'),
    cache_write_tokens: get('cache_write_tokens'),
    cost_usd: microsToUsd(get('cost_usd_micros')),
  };
}

/** One day or month item → totals, requests per limit class, billed usage by model and endpoint. */
function readCounters(stored: Stored | undefined) {
  const s = stored ?? {};
  const num = (k: string) => (typeof s[k] === 'number' ? (s[k] as number) : 0);
  const byEndpointClass: Record<string, number> = {};
  const groups = { model: new Map<string, Record<string, number>>(), endpoint: new Map<string, Record<string, number>>() };
  for (const [k, v] of Object.entries(s)) {
    if (typeof v !== 'number' || isSeqAttr(k)) continue;
    if (k.startsWith('requests_')) byEndpointClass[k.slice('requests_'.length)] = v;
    const parts = k.split('|');
    if (parts.length === 3 && (parts[0] === 'model' || parts[0] === 'endpoint')) {
      const g = groups[parts[0]];
      const entry = g.get(parts[1]!) ?? {};
      entry[parts[2]!] = v;
      g.set(parts[1]!, entry);
    }
  }
  const list = (kind: 'model' | 'endpoint') =>
    [...groups[kind]].map(([key, c]) => ({ [kind]: key, ...totalsFrom((n) => c[n] ?? 0) })).sort((a, b) => b.cost_usd - a.cost_usd);
  return {
    ...totalsFrom(num),
    requests_by_endpoint: byEndpointClass,
    by_model: list('model'),
    by_endpoint: list('endpoint'),
  };
}

/**
 * GET /billing/usage/requests: today's and this month's usage (requests, tokens, cost) with the
 * breakdown by model and endpoint, the last `days` UTC days, and the remaining allowance.
 */
export async function getUsage(svc: Services, teamId: string, days = 31) {
  await svc.usage.settled(teamId);
  const now = svc.now();
  const iso = now.toISOString();
  const pk = teamPartition(teamId);
  const [team, month, dayItems] = await Promise.all([
    getTeamRecord(svc, teamId),
    svc.records.get<Stored>(pk, monthSk(monthOf(iso))),
    svc.records.query<Stored & { day?: string }>(pk, { beginsWith: USAGE_DAYS_PREFIX, newestFirst: true, limit: days }),
  ]);
  const byDay = dayItems.items
    .filter((item) => typeof item.day === 'string')
    .map((item) => {
      const c = readCounters(item);
      return { day: item.day as string, ...totalsOf(c), by_model: c.by_model };
    });
  const today = readCounters(await svc.records.get<Stored>(pk, daySk(dayOf(iso))));
  const cap = team.daily_spend_cap_micros;
  return {
    team_id: team.id,
    plan: team.plan,
    day: dayOf(iso),
    month: monthOf(iso),
    today,
    this_month: readCounters(month),
    by_day: byDay,
    daily_spend_cap_usd: usdOrNull(cap),
    remaining_daily_allowance_usd: cap === null ? null : microsToUsd(Math.max(0, cap - Math.round(today.cost_usd * 1e6))),
    credit_balance_usd: team.credit_balance_micros === undefined ? null : microsToUsd(team.credit_balance_micros),
    resets_at: nextUtcMidnight(now).toISOString(),
    rate_limits: Object.fromEntries(
      Object.entries(LIMIT_CLASSES).map(([cls, rules]) => [cls, rules.map((r) => ({ limit: r.limit, window_seconds: r.windowSeconds }))]),
    ),
  };
}

function totalsOf(c: Totals): Totals {
  const t = emptyTotals();
  for (const k of Object.keys(t) as (keyof Totals)[]) t[k] = c[k];
  return t;
}

/** The per-request listing, newest first, paged by an opaque cursor. */
export async function listUsageRequests(svc: Services, teamId: string, opts: { limit: number; cursor?: string | undefined }) {
  let startKey: Record<string, unknown> | undefined;
  try {
    startKey = opts.cursor ? (JSON.parse(Buffer.from(opts.cursor, 'base64url').toString('utf8')) as Record<string, unknown>) : undefined;
  } catch {
    throw ValidationError.field(['query', 'cursor'], 'is not a next_cursor from a previous page');
  }
  if (startKey && startKey['pk'] !== teamPartition(teamId)) throw ValidationError.field(['query', 'cursor'], 'is not a next_cursor from a previous page');
  await svc.usage.settled(teamId);
  const page = await svc.records.query<UsageRequestRow>(teamPartition(teamId), {
    beginsWith: USAGE_REQUESTS_PREFIX,
    newestFirst: true,
    limit: opts.limit,
    ...(startKey ? { startKey } : {}),
  });
  return {
    data: page.items.map((r) => ({
      at: r.at,
      inference_id: r.inference_id,
      model: r.model,
      endpoint: r.endpoint,
      ...Object.fromEntries(TOKEN_COUNTERS.filter((c) => c !== 'cost_usd_micros').map((c) => [c, r[c]])),
      cost_usd: microsToUsd(r.cost_usd_micros),
    })),
    next_cursor: page.nextKey ? Buffer.from(JSON.stringify(page.nextKey)).toString('base64url') : null,
  };
}

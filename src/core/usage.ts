import type { Services } from './context';
import { PaymentRequiredError, RateLimitError, ValidationError } from './errors';
import { microsToUsd, usdOrNull } from './billing/money';
import {
  BILLED_REQUESTS,
  BREAKDOWN_COUNTERS,
  dayOf,
  monthOf,
  parseLegacyBreakdownAttr,
  TOKEN_COUNTERS,
  type BilledUsage,
  type UsageRequestRow,
} from './billing/usageBatch';
import type { QueryPage } from './ports';
import {
  daySk,
  monthSk,
  teamPartition,
  USAGE_DAYS_PREFIX,
  USAGE_REQUESTS_PREFIX,
  usageBreakdownPrefix,
  type UsageBreakdown,
  type UsagePeriod,
} from './recordKeys';
import { LIMIT_CLASSES, type LimitClass } from './rateLimits';
import { getTeam, getTeamRecord } from './teams';

export type { UsageSink } from './billing/ledger';
export type { BilledUsage } from './billing/usageBatch';

/** Counts one authenticated request against today's and this month's counters. */
export function recordRequest(svc: Services, teamId: string, limitClass: LimitClass): Promise<void> {
  return svc.usage.add({ team_id: teamId, at: svc.now().toISOString(), limit_class: limitClass, requests: 1 });
}

/**
 * The model fields of a billed request: the caller's string for its row, the canonical id its
 * breakdown is keyed by (project id, else training job id, else catalog id: a project's usage
 * stays one row whether it was called by name or id, and no caller-chosen string keys it), and
 * the project's name when the caller used it.
 */
export function billedModel(m: {
  requested: string;
  baseModel: string;
  projectId: string | null;
  trainingJobId: string | null;
}): Pick<BilledUsage, 'model' | 'model_id' | 'model_name'> {
  const id = m.projectId ?? m.trainingJobId ?? m.baseModel;
  return {
    model: m.requested,
    model_id: id,
    ...(m.projectId !== null && m.requested !== m.projectId ? { model_name: m.requested } : {}),
  };
}

/**
 * Bills one request: tokens and cost on the day/month counters (by model and endpoint), a row in
 * the per-request listing, the cost taken from a prepaid balance, and finance's EMF metrics.
 */
export function recordBilledUsage(
  svc: Services,
  teamId: string,
  limitClass: LimitClass,
  usage: BilledUsage,
): Promise<void> {
  return svc.usage.add({
    team_id: teamId,
    at: svc.now().toISOString(),
    limit_class: limitClass,
    requests: 0,
    billed: usage,
  });
}

const nextUtcMidnight = (now: Date) =>
  new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));

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
    if ((day?.cost_usd_micros ?? 0) >= cap) {
      throw new RateLimitError(
        `Daily spending cap of ${microsToUsd(cap)} USD reached; it clears at 00:00 UTC`,
        Math.ceil((nextUtcMidnight(now).getTime() - now.getTime()) / 1000),
        'daily_spend_cap_exceeded',
      );
    }
  }
}

type Stored = Record<string, number | string | undefined>;

/**
 * Bounds of one usage read (so no team can make one huge): breakdown items read per period and
 * kind (one query page), and rows shown; what is not shown is one `other` row — the period's
 * totals less the rows shown, so the rows always add up to the totals.
 */
export const USAGE_READ_LIMITS = {
  periodItems: 500,
  periodRows: 50,
  /** Per day of `by_day` (up to 366 days: one query each). */
  dayItems: 50,
  dayRows: 10,
  /** Day queries in flight at once. */
  dayQueriesAtOnce: 8,
} as const;
/** `model` / `endpoint` of the row that sums what is not listed. */
export const OTHER_ROW_KEY = '(other)';

interface Totals {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  cost_usd: number;
}

const emptyTotals = (): Totals => ({
  requests: 0,
  input_tokens: 0,
  output_tokens: 0,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  cost_usd: 0,
});

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

const numberIn = (s: Stored | undefined) => (k: string) => (typeof s?.[k] === 'number' ? (s[k] as number) : 0);

/** A day or month totals item → totals and requests per limit class. */
function readTotals(stored: Stored | undefined) {
  const byEndpointClass: Record<string, number> = {};
  for (const [k, v] of Object.entries(stored ?? {})) {
    if (typeof v === 'number' && k.startsWith('requests_')) byEndpointClass[k.slice('requests_'.length)] = v;
  }
  return { ...totalsFrom(numberIn(stored)), requests_by_endpoint: byEndpointClass };
}

type BreakdownRow<F extends string> = Totals & { [K in F]: string } & { name?: string; other?: true };

/**
 * Billed usage by model or endpoint in one period: the breakdown items read (`page`), plus the
 * attributes an item written before breakdown items existed still holds (`model|<m>|<counter>`
 * on the totals item: read as they are). Largest cost first; past `shown` rows, or when the read
 * stopped at its bound, one `other` row holds the rest of the period's totals.
 */
function breakdownRows<F extends 'model' | 'endpoint'>(
  field: F,
  totals: Stored | undefined,
  page: QueryPage<Stored>,
  shown: number,
): BreakdownRow<F>[] {
  const kind = field === 'model' ? 'MODEL' : 'ENDPOINT';
  const rows = new Map<string, { name?: string; c: Record<string, number> }>();
  const row = (key: string) => {
    let r = rows.get(key);
    if (!r) {
      r = { c: {} };
      rows.set(key, r);
    }
    return r;
  };
  let oldLayoutRequests = 0;
  for (const [name, v] of Object.entries(totals ?? {})) {
    const old = typeof v === 'number' ? parseLegacyBreakdownAttr(name) : undefined;
    if (old?.kind !== kind) continue;
    const c = row(old.key).c;
    c[old.counter] = (c[old.counter] ?? 0) + (v as number);
    if (old.counter === 'requests') oldLayoutRequests += v as number;
  }
  for (const item of page.items) {
    const key = item[field];
    if (typeof key !== 'string') continue;
    const r = row(key);
    for (const counter of BREAKDOWN_COUNTERS) r.c[counter] = (r.c[counter] ?? 0) + numberIn(item)(counter);
    if (typeof item.name === 'string') r.name = item.name;
  }
  const sorted = [...rows].sort(
    ([ka, a], [kb, b]) =>
      (b.c.cost_usd_micros ?? 0) - (a.c.cost_usd_micros ?? 0) ||
      (b.c.requests ?? 0) - (a.c.requests ?? 0) ||
      (ka < kb ? -1 : ka > kb ? 1 : 0),
  );
  const listed = sorted.slice(0, shown);
  const out = listed.map(
    ([key, r]) =>
      ({ [field]: key, ...(r.name ? { name: r.name } : {}), ...totalsFrom((n) => r.c[n] ?? 0) }) as BreakdownRow<F>,
  );
  if (sorted.length > shown || page.nextKey) {
    const total = numberIn(totals);
    const rest = (counter: string) => {
      const whole = counter === 'requests' ? total(BILLED_REQUESTS) + oldLayoutRequests : total(counter);
      return Math.max(0, whole - listed.reduce((sum, [, r]) => sum + (r.c[counter] ?? 0), 0));
    };
    if (BREAKDOWN_COUNTERS.some((c) => rest(c) > 0))
      out.push({ [field]: OTHER_ROW_KEY, other: true, ...totalsFrom(rest) } as BreakdownRow<F>);
  }
  return out;
}

const breakdownPage = (
  svc: Services,
  teamId: string,
  period: UsagePeriod,
  when: string,
  kind: UsageBreakdown,
  limit: number,
) => svc.records.query<Stored>(teamPartition(teamId), { beginsWith: usageBreakdownPrefix(period, when, kind), limit });

async function inChunks<T, R>(items: T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

/**
 * GET /billing/usage/requests: today's and this month's usage (requests, tokens, cost) with the
 * breakdown by model and endpoint, the last `days` UTC days, and the remaining allowance.
 */
export async function getUsage(svc: Services, teamId: string, days = 31) {
  await svc.usage.settled(teamId);
  const now = svc.now();
  const iso = now.toISOString();
  const [day, month] = [dayOf(iso), monthOf(iso)];
  const pk = teamPartition(teamId);
  const L = USAGE_READ_LIMITS;
  const [team, todayItem, monthItem, dayItems, todayModels, todayEndpoints, monthModels, monthEndpoints] =
    await Promise.all([
      getTeamRecord(svc, teamId),
      svc.records.get<Stored>(pk, daySk(day)),
      svc.records.get<Stored>(pk, monthSk(month)),
      svc.records.query<Stored & { day?: string }>(pk, {
        beginsWith: USAGE_DAYS_PREFIX,
        newestFirst: true,
        limit: days,
      }),
      breakdownPage(svc, teamId, 'DAY', day, 'MODEL', L.periodItems),
      breakdownPage(svc, teamId, 'DAY', day, 'ENDPOINT', L.periodItems),
      breakdownPage(svc, teamId, 'MONTH', month, 'MODEL', L.periodItems),
      breakdownPage(svc, teamId, 'MONTH', month, 'ENDPOINT', L.periodItems),
    ]);
  const period = (totals: Stored | undefined, models: QueryPage<Stored>, endpoints: QueryPage<Stored>) => ({
    ...readTotals(totals),
    by_model: breakdownRows('model', totals, models, L.periodRows),
    by_endpoint: breakdownRows('endpoint', totals, endpoints, L.periodRows),
  });
  const today = period(todayItem, todayModels, todayEndpoints);
  const byDay = await inChunks(
    dayItems.items.filter((item) => typeof item.day === 'string'),
    L.dayQueriesAtOnce,
    async (item) => {
      const models = await breakdownPage(svc, teamId, 'DAY', item.day as string, 'MODEL', L.dayItems);
      return {
        day: item.day as string,
        ...totalsOf(readTotals(item)),
        by_model: breakdownRows('model', item, models, L.dayRows),
      };
    },
  );
  const cap = team.daily_spend_cap_micros;
  return {
    team_id: team.id,
    plan: team.plan,
    day,
    month,
    today,
    this_month: period(monthItem, monthModels, monthEndpoints),
    by_day: byDay,
    daily_spend_cap_usd: usdOrNull(cap),
    remaining_daily_allowance_usd:
      cap === null ? null : microsToUsd(Math.max(0, cap - Math.round(today.cost_usd * 1e6))),
    credit_balance_usd: team.credit_balance_micros === undefined ? null : microsToUsd(team.credit_balance_micros),
    resets_at: nextUtcMidnight(now).toISOString(),
    rate_limits: Object.fromEntries(
      Object.entries(LIMIT_CLASSES).map(([cls, rules]) => [
        cls,
        rules.map((r) => ({ limit: r.limit, window_seconds: r.windowSeconds })),
      ]),
    ),
  };
}

function totalsOf(c: Totals): Totals {
  const t = emptyTotals();
  for (const k of Object.keys(t) as (keyof Totals)[]) t[k] = c[k];
  return t;
}

/** The per-request listing, newest first, paged by an opaque cursor. */
export async function listUsageRequests(
  svc: Services,
  teamId: string,
  opts: { limit: number; cursor?: string | undefined },
) {
  let startKey: Record<string, unknown> | undefined;
  try {
    startKey = opts.cursor
      ? (JSON.parse(Buffer.from(opts.cursor, 'base64url').toString('utf8')) as Record<string, unknown>)
      : undefined;
  } catch {
    throw ValidationError.field(['query', 'cursor'], 'is not a next_cursor from a previous page');
  }
  if (startKey && startKey.pk !== teamPartition(teamId))
    throw ValidationError.field(['query', 'cursor'], 'is not a next_cursor from a previous page');
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

import type { RecordStore } from '../adapters/RecordStore';
import type { Services } from './context';
import { PaymentRequiredError, RateLimitError } from './errors';
import { LIMIT_CLASSES, type LimitClass } from './rateLimits';
import { getTeam, type Team } from './teams';

/** The counters kept per team per UTC day and month (atomic ADDs on one item each). */
export interface UsageCounters {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
  /** Spend in millionths of a USD, so counters stay integers. */
  cost_usd_micros: number;
}

export type UsageDelta = Partial<UsageCounters>;

const ZERO: UsageCounters = {
  requests: 0,
  input_tokens: 0,
  output_tokens: 0,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  cost_usd_micros: 0,
};
const COUNTER_NAMES = Object.keys(ZERO) as (keyof UsageCounters)[];

const dayOf = (d: Date) => d.toISOString().slice(0, 10);
const monthOf = (d: Date) => d.toISOString().slice(0, 7);

function countersOf(endpoint: LimitClass, delta: UsageDelta): Record<string, number> {
  const add: Record<string, number> = {};
  for (const name of COUNTER_NAMES) {
    const v = delta[name];
    if (v) add[name] = v;
  }
  if (delta.requests) add[`requests_${endpoint}`] = delta.requests;
  return add;
}

async function writeCounters(records: RecordStore, teamId: string, at: Date, add: Record<string, number>): Promise<void> {
  if (Object.keys(add).length === 0) return;
  await Promise.all([
    records.update(`TEAM#${teamId}`, `USAGE#DAY#${dayOf(at)}`, { add }),
    records.update(`TEAM#${teamId}`, `USAGE#MONTH#${monthOf(at)}`, { add }),
  ]);
}

/** Where usage goes. Counters are atomic ADDs on one item per team per day and per month. */
export interface UsageSink {
  add(teamId: string, endpoint: LimitClass, delta: UsageDelta): Promise<void>;
  /** Writes whatever is pending; reads of the counters call it first, so they never lag. */
  flush(): Promise<void>;
}

/** Writes each request's usage at once: for Lambda, where the process may freeze after a response. */
export class DirectUsageSink implements UsageSink {
  constructor(private readonly records: RecordStore, private readonly now: () => Date) {}

  add(teamId: string, endpoint: LimitClass, delta: UsageDelta): Promise<void> {
    return writeCounters(this.records, teamId, this.now(), countersOf(endpoint, delta));
  }

  async flush(): Promise<void> {}
}

/**
 * Sums usage in memory and writes it every `intervalMs` (long-lived processes: local, ECS), so a
 * request costs no counter writes of its own. Summing by UTC day keeps day boundaries exact.
 */
export class BufferedUsageSink implements UsageSink {
  private pending = new Map<string, { teamId: string; at: Date; add: Record<string, number> }>();
  private readonly timer: NodeJS.Timeout;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly records: RecordStore,
    private readonly now: () => Date,
    intervalMs = 1000,
    private readonly onError: (err: unknown) => void = () => {},
  ) {
    this.timer = setInterval(() => void this.flush().catch(this.onError), intervalMs);
    this.timer.unref();
  }

  async add(teamId: string, endpoint: LimitClass, delta: UsageDelta): Promise<void> {
    const at = this.now();
    const key = `${teamId}|${dayOf(at)}`;
    const entry = this.pending.get(key) ?? { teamId, at, add: {} };
    for (const [k, v] of Object.entries(countersOf(endpoint, delta))) entry.add[k] = (entry.add[k] ?? 0) + v;
    this.pending.set(key, entry);
  }

  flush(): Promise<void> {
    const batch = [...this.pending.values()];
    this.pending = new Map();
    // Serialized, so a read that flushes also waits for a flush already under way.
    this.flushing = this.flushing.then(async () => {
      for (const e of batch) await writeCounters(this.records, e.teamId, e.at, e.add);
    });
    return this.flushing;
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}

/** Adds to today's and this month's counters; `endpoint` also gets its own request counter. */
export function recordUsage(svc: Services, teamId: string, endpoint: LimitClass, delta: UsageDelta): Promise<void> {
  return svc.usage.add(teamId, endpoint, delta);
}

type StoredCounters = Partial<UsageCounters> & Record<string, number | undefined>;

function normalize(stored: StoredCounters | undefined) {
  const totals: UsageCounters = { ...ZERO };
  const byEndpoint: Record<string, number> = {};
  for (const [k, v] of Object.entries(stored ?? {})) {
    if (typeof v !== 'number') continue;
    if (k.startsWith('requests_')) byEndpoint[k.slice('requests_'.length)] = v;
    else if ((COUNTER_NAMES as string[]).includes(k)) totals[k as keyof UsageCounters] = v;
  }
  return {
    ...totals,
    cost_usd: totals.cost_usd_micros / 1e6,
    requests_by_endpoint: byEndpoint,
  };
}

export async function getUsage(svc: Services, teamId: string) {
  await svc.usage.flush();
  const now = svc.now();
  const team = await getTeam(svc, teamId);
  const [day, month] = await Promise.all([
    svc.records.get<StoredCounters>(`TEAM#${teamId}`, `USAGE#DAY#${dayOf(now)}`),
    svc.records.get<StoredCounters>(`TEAM#${teamId}`, `USAGE#MONTH#${monthOf(now)}`),
  ]);
  const today = normalize(day);
  const nextMidnight = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
  return {
    team_id: team.id,
    plan: team.plan,
    day: dayOf(now),
    month: monthOf(now),
    today,
    this_month: normalize(month),
    daily_spend_cap_usd: team.daily_spend_cap_usd,
    remaining_daily_allowance_usd:
      team.daily_spend_cap_usd === null ? null : Math.max(0, team.daily_spend_cap_usd - today.cost_usd),
    credit_balance_usd: team.credit_balance_usd,
    resets_at: nextMidnight.toISOString(),
    rate_limits: Object.fromEntries(
      Object.entries(LIMIT_CLASSES).map(([cls, rules]) => [cls, rules.map((r) => ({ limit: r.limit, window_seconds: r.windowSeconds }))]),
    ),
  };
}

/**
 * Before billable work: 402 when prepaid credit is used up, 429 with the spend-cap reason when
 * today's spend reached the team's daily cap (clears at 00:00 UTC).
 */
export async function checkSpendAllowance(svc: Services, teamId: string): Promise<Team> {
  const team = await getTeam(svc, teamId);
  if (team.credit_balance_usd !== null && team.credit_balance_usd <= 0) {
    throw new PaymentRequiredError('Account out of credits: add credits or change plan');
  }
  if (team.daily_spend_cap_usd !== null) {
    await svc.usage.flush();
    const now = svc.now();
    const day = await svc.records.get<StoredCounters>(`TEAM#${teamId}`, `USAGE#DAY#${dayOf(now)}`);
    const spent = (day?.cost_usd_micros ?? 0) / 1e6;
    if (spent >= team.daily_spend_cap_usd) {
      const nextMidnight = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1);
      throw new RateLimitError(
        `Daily spending cap of ${team.daily_spend_cap_usd} USD reached; it clears at 00:00 UTC`,
        (nextMidnight - now.getTime()) / 1000,
        'daily_spend_cap_exceeded',
      );
    }
  }
  return team;
}

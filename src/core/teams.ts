import { byCreation, teamKey, TEAMS_INDEX } from './recordKeys';
import { microsToUsd, usdOrNull, usdToMicros } from './billing/money';
import { WriteConflict } from './ports';
import type { Services } from './context';
import { ConflictError, NotFoundError } from './errors';
import { newUuid } from './ids';
import type { Plan, Team } from './identity';

export type { Plan, Team } from './identity';

/**
 * The team item as stored: money in integer micro-USD. `credit_balance_micros` is absent (not null)
 * for a team billed in arrears, so the spending update's `attribute_exists` condition skips it.
 */
export interface TeamRecord {
  id: string;
  name: string;
  plan: Plan;
  daily_spend_cap_micros: number | null;
  credit_balance_micros?: number;
  /** Absent: unset (the operator's SIFT_DEFAULT_ENCODER). */
  default_encoder?: string;
  created_at: string;
}

export function teamView(r: TeamRecord & LegacyMoney): Team {
  return {
    id: r.id,
    name: r.name,
    plan: r.plan,
    daily_spend_cap_usd:
      r.daily_spend_cap_micros === undefined ? (r.daily_spend_cap_usd ?? null) : usdOrNull(r.daily_spend_cap_micros),
    credit_balance_usd:
      r.credit_balance_micros === undefined ? (r.credit_balance_usd ?? null) : microsToUsd(r.credit_balance_micros),
    default_encoder: r.default_encoder ?? null,
    created_at: r.created_at,
  };
}

export async function createTeam(
  svc: Services,
  input: {
    name: string;
    plan?: Plan | undefined;
    daily_spend_cap_usd?: number | null | undefined;
    credit_balance_usd?: number | null | undefined;
    id?: string;
  },
): Promise<Team> {
  const record: TeamRecord = {
    id: input.id ?? newUuid(),
    name: input.name,
    plan: input.plan ?? 'pro',
    daily_spend_cap_micros:
      input.daily_spend_cap_usd === null || input.daily_spend_cap_usd === undefined
        ? null
        : usdToMicros(input.daily_spend_cap_usd),
    ...(input.credit_balance_usd === null || input.credit_balance_usd === undefined
      ? {}
      : { credit_balance_micros: usdToMicros(input.credit_balance_usd) }),
    created_at: svc.now().toISOString(),
  };
  try {
    await svc.records.put(
      { ...teamKey(record.id), gsi1pk: TEAMS_INDEX, gsi1sk: byCreation(record.created_at, record.id) },
      record,
      { ifAbsent: true },
    );
  } catch (err) {
    // only a duplicate id is a conflict; anything else (a store failure) must not pass for one
    if (!(err instanceof WriteConflict)) throw err;
    throw new ConflictError(`team '${record.id}' already exists`);
  }
  return teamView(record);
}

/** Teams written before money was kept in micro-USD carry these USD fields instead. */
interface LegacyMoney {
  daily_spend_cap_usd?: number | null;
  credit_balance_usd?: number | null;
}

/**
 * Moves a team written before micro-USD onto it, once (conditional: a concurrent reader doing the
 * same, or spending that already began, wins and is kept).
 */
async function migrateLegacyMoney(svc: Services, team: TeamRecord & LegacyMoney): Promise<TeamRecord> {
  if (!('credit_balance_usd' in team) && !('daily_spend_cap_usd' in team)) return team;
  const { pk, sk } = teamKey(team.id);
  const set: Record<string, unknown> = {};
  if (team.daily_spend_cap_micros === undefined)
    set.daily_spend_cap_micros =
      typeof team.daily_spend_cap_usd === 'number' ? usdToMicros(team.daily_spend_cap_usd) : null;
  if (typeof team.credit_balance_usd === 'number' && team.credit_balance_micros === undefined)
    set.credit_balance_micros = usdToMicros(team.credit_balance_usd);
  try {
    return await svc.records.update<TeamRecord>(pk, sk, {
      set,
      remove: ['credit_balance_usd', 'daily_spend_cap_usd'],
      condition: [{ attr: 'credit_balance_micros', present: false }, { itemExists: true }],
    });
  } catch (err) {
    // migrated meanwhile (or deleted): read what is there now; a store failure propagates
    if (!(err instanceof WriteConflict)) throw err;
    return (await svc.records.get<TeamRecord>(pk, sk)) ?? team;
  }
}

/** The stored item, read now (balances change with every billed request: never cached). */
export async function getTeamRecord(svc: Services, teamId: string): Promise<TeamRecord> {
  const { pk, sk } = teamKey(teamId);
  const team = await svc.records.get<TeamRecord & LegacyMoney>(pk, sk);
  if (!team) throw new NotFoundError(`team '${teamId}' not found`);
  return migrateLegacyMoney(svc, team);
}

/**
 * Name, plan and cap change rarely (PATCH /teams/{id}), so a long-lived process may keep them a few
 * seconds (hotPath.ts); the credit balance shown here may be that old — spend checks read it fresh.
 */
export async function getTeam(svc: Services, teamId: string): Promise<Team> {
  const cached = svc.hotPath?.teams.get(teamId);
  if (cached) return cached;
  const team = teamView(await getTeamRecord(svc, teamId));
  svc.hotPath?.teams.set(teamId, team);
  return team;
}

export async function listTeams(svc: Services): Promise<Team[]> {
  return (await svc.records.queryAll<TeamRecord & LegacyMoney>(TEAMS_INDEX, { index: 'gsi1' })).map(teamView);
}

import { ConditionFailed } from '../adapters/RecordStore';
import type { Services } from './context';
import { ConflictError, NotFoundError } from './errors';
import { newUuid } from './ids';

export type Plan = 'free' | 'pro' | 'research' | 'custom';

export interface Team {
  id: string;
  name: string;
  plan: Plan;
  /** USD per UTC day; null means no cap. */
  daily_spend_cap_usd: number | null;
  /** Remaining prepaid credit in USD; null means billed in arrears (no credit limit). */
  credit_balance_usd: number | null;
  created_at: string;
}

export const teamKey = (teamId: string) => ({ pk: `TEAM#${teamId}`, sk: 'TEAM' });

export async function createTeam(
  svc: Services,
  input: { name: string; plan?: Plan; daily_spend_cap_usd?: number | null; credit_balance_usd?: number | null; id?: string },
): Promise<Team> {
  const team: Team = {
    id: input.id ?? newUuid(),
    name: input.name,
    plan: input.plan ?? 'pro',
    daily_spend_cap_usd: input.daily_spend_cap_usd ?? null,
    credit_balance_usd: input.credit_balance_usd ?? null,
    created_at: svc.now().toISOString(),
  };
  try {
    await svc.records.put({ ...teamKey(team.id), gsi1pk: 'TEAMS', gsi1sk: `${team.created_at}#${team.id}` }, team, { ifAbsent: true });
  } catch (err) {
    // only a duplicate id is a conflict; anything else (a store failure) must not pass for one
    if (!(err instanceof ConditionFailed)) throw err;
    throw new ConflictError(`team '${team.id}' already exists`);
  }
  return team;
}

/** Teams are not changed after creation, so a long-lived process may keep them a few seconds (hotPath.ts). */
export async function getTeam(svc: Services, teamId: string): Promise<Team> {
  const cached = svc.hotPath?.teams.get(teamId);
  if (cached) return cached;
  const { pk, sk } = teamKey(teamId);
  const team = await svc.records.get<Team>(pk, sk);
  if (!team) throw new NotFoundError(`team '${teamId}' not found`);
  svc.hotPath?.teams.set(teamId, team);
  return team;
}

export async function listTeams(svc: Services): Promise<Team[]> {
  return svc.records.queryAll<Team>('TEAMS', { index: 'gsi1' });
}

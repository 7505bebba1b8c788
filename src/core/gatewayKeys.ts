/**
 * API Gateway usage plans per team (AWS only). A team's plan (free, pro, research, custom) is one
 * usage plan on the REST API; each team gets one API Gateway key in its plan's usage plan, and the
 * authorizer names it (`usageIdentifierKey`) on every request, so API Gateway throttles a team by its
 * plan before any Lambda or GPU runs. Callers never see these keys: Sift's own keys authenticate, and
 * with the key source AUTHORIZER a client cannot present a gateway key itself.
 *
 * Keys are made on a team's first authorized request (so teams from before this existed are covered),
 * remembered on a record of their own (never on the team record that GET /teams returns).
 */
import { gatewayKeyItem } from './recordKeys';
import { WriteConflict } from './ports';
import type { Services } from './context';
import type { Plan, Team } from './teams';

/** The tag on each team key that scopes the authorizer's key deletion to its own stage (lib/constructs/usage-plans.ts). */
export const STAGE_TAG = 'sift:stage';

export interface TeamGatewayKey {
  id: string;
  value: string;
  plan: Plan;
  created_at: string;
}

/**
 * The value the authorizer returns as `usageIdentifierKey` for this team, creating the key on first
 * use (or when the team's plan changed). Concurrent first requests may each create one: the first to
 * record it wins, the others delete theirs.
 */
export async function usageIdentifierFor(svc: Services, team: Pick<Team, 'id' | 'plan'>): Promise<string | undefined> {
  if (!svc.gatewayKeys) return undefined;
  const item = gatewayKeyItem(team.id);
  const existing = await svc.records.get<TeamGatewayKey>(item.pk, item.sk);
  if (existing && existing.plan === team.plan) return existing.value;
  const created = await svc.gatewayKeys.create(team);
  const record: TeamGatewayKey = { ...created, plan: team.plan, created_at: svc.now().toISOString() };
  try {
    await svc.records.put(
      item,
      record,
      existing ? { condition: [{ attr: 'id', equals: existing.id }] } : { ifAbsent: true },
    );
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
    await svc.gatewayKeys.delete(created.id);
    const winner = await svc.records.get<TeamGatewayKey>(item.pk, item.sk);
    return winner?.value;
  }
  if (existing) await svc.gatewayKeys.delete(existing.id); // the key of the team's previous plan
  return record.value;
}

import { ITEM_EXISTS, WriteConflict } from '../ports';
import type { Services } from '../context';
import { ConflictError, NotFoundError } from '../errors';
import { teamKey } from '../recordKeys';
import { teamView, type Plan, type Team, type TeamRecord } from '../teams';
import { usdToMicros } from './money';
import { checkEncoderChoice } from '../models';

/**
 * Adds prepaid credit with one atomic ADD (concurrent spending is never lost). A team billed in
 * arrears (no balance) is refused with 409: the request is well formed, the team's state forbids it,
 * and giving it a balance is a plan change, `PATCH /teams/{id}`.
 */
export async function addCredits(svc: Services, teamId: string, amountUsd: number): Promise<Team> {
  const { pk, sk } = teamKey(teamId);
  try {
    const after = await svc.records.update<TeamRecord>(pk, sk, {
      add: { credit_balance_micros: usdToMicros(amountUsd) },
      condition: [{ itemExists: true }, { attr: 'credit_balance_micros', present: true }],
    });
    svc.hotPath?.teams.deleteWhere((t) => t.id === teamId);
    return teamView(after);
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
    if (!(await svc.records.get(pk, sk))) throw new NotFoundError(`team '${teamId}' not found`);
    throw new ConflictError(
      `team '${teamId}' is billed in arrears (credit_balance_usd is null), so it has no balance to add to: give it one with PATCH /teams/${teamId} {"credit_balance_usd": <amount>} to move it to prepaid credit`,
    );
  }
}

export interface TeamChange {
  name?: string | undefined;
  plan?: Plan | undefined;
  daily_spend_cap_usd?: number | null | undefined;
  /** Sets the balance outright (null: billed in arrears). To add, use addCredits. */
  credit_balance_usd?: number | null | undefined;
  /** A model the team can run as an encoder (checkEncoderChoice); null: back to the operator's default. */
  default_encoder?: string | null | undefined;
}

export async function updateTeam(svc: Services, teamId: string, change: TeamChange): Promise<Team> {
  const { pk, sk } = teamKey(teamId);
  const set: Record<string, unknown> = {};
  const remove: string[] = [];
  if (change.name !== undefined) set.name = change.name;
  if (change.plan !== undefined) set.plan = change.plan;
  if (change.daily_spend_cap_usd !== undefined)
    set.daily_spend_cap_micros = change.daily_spend_cap_usd === null ? null : usdToMicros(change.daily_spend_cap_usd);
  if (change.credit_balance_usd === null) remove.push('credit_balance_micros');
  else if (change.credit_balance_usd !== undefined) set.credit_balance_micros = usdToMicros(change.credit_balance_usd);
  if (change.default_encoder === null) remove.push('default_encoder');
  else if (change.default_encoder !== undefined) {
    await checkEncoderChoice(svc, teamId, change.default_encoder, ['body', 'default_encoder']);
    set.default_encoder = change.default_encoder;
  }
  try {
    const after = await svc.records.update<TeamRecord>(pk, sk, { set, remove, condition: ITEM_EXISTS });
    svc.hotPath?.teams.deleteWhere((t) => t.id === teamId);
    return teamView(after);
  } catch (err) {
    if (err instanceof WriteConflict) throw new NotFoundError(`team '${teamId}' not found`);
    throw err;
  }
}

import { z } from 'zod';
import { addCredits, updateTeam } from '../../core/billing/credits';
import { json, route } from '../types';
import { positiveUsdAmount, usdAmount, uuid } from '../validation';
import { TeamSchema } from './apiKeys';

const teamParams = z.object({ id: uuid });

/** Operator changes to a team's billing: top-ups, plan, daily cap (the operator key only). */
export const teamBillingRoutes = [
  route({
    method: 'POST',
    path: '/teams/:id/credits',
    tag: 'teams',
    summary:
      "Add prepaid credit to a team's balance (operator only); a team at or below 0 can call billed endpoints again",
    params: teamParams,
    body: z.strictObject({
      amount_usd: positiveUsdAmount,
    }),
    responses: {
      200: { description: 'The team with its new balance', schema: TeamSchema },
      409: {
        description: 'The team is billed in arrears: it has no balance to add to (give it one with PATCH /teams/{id})',
      },
      404: { description: 'No such team' },
    },
    handler: async ({ svc, params, body }) => json(200, await addCredits(svc, params.id, body.amount_usd)),
  }),
  route({
    method: 'PATCH',
    path: '/teams/:id',
    tag: 'teams',
    summary:
      "Change a team's name, plan, daily spending cap or balance (operator only); null cap: no cap, null balance: billed in arrears",
    params: teamParams,
    body: z
      .strictObject({
        name: z.string().regex(/\S/, 'must not be blank').trim().min(1).max(100).optional(),
        plan: z.enum(['free', 'pro', 'research', 'custom']).optional(),
        daily_spend_cap_usd: usdAmount.nullable().optional(),
        credit_balance_usd: usdAmount.nullable().optional(),
      })
      .refine(
        (b) => Object.keys(b).length > 0,
        'give at least one of name, plan, daily_spend_cap_usd, credit_balance_usd',
      )
      .meta({ minProperties: 1 }),
    responses: {
      200: { description: 'The team as changed', schema: TeamSchema },
      404: { description: 'No such team' },
    },
    handler: async ({ svc, params, body }) => json(200, await updateTeam(svc, params.id, body)),
  }),
];

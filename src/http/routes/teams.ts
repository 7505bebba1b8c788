import { z } from 'zod';
import { addCredits, updateTeam } from '../../core/billing/credits';
import { ForbiddenError } from '../../core/errors';
import { getTeam } from '../../core/teams';
import { json, route } from '../types';
import { positiveUsdAmount, usdAmount, uuid } from '../validation';
import { TeamSchema } from './apiKeys';

const teamParams = z.object({ id: uuid });
const defaultEncoder = z
  .string()
  .min(1)
  .nullable()
  .optional()
  .describe(
    "The encoder POST /gliner-2 runs when a request names none: a catalog or imported encoder, or a project or training job of the team with a deployment; null: the operator's default (SIFT_DEFAULT_ENCODER)",
  );

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
        default_encoder: defaultEncoder,
      })
      .refine(
        (b) => Object.keys(b).length > 0,
        'give at least one of name, plan, daily_spend_cap_usd, credit_balance_usd, default_encoder',
      )
      .meta({ minProperties: 1 }),
    responses: {
      200: { description: 'The team as changed', schema: TeamSchema },
      404: { description: 'No such team' },
    },
    handler: async ({ svc, params, body }) => json(200, await updateTeam(svc, params.id, body)),
  }),
];

/** The caller's own team: anyone on it reads it, an admin key (or the operator) changes its settings. */
export const teamSettingsRoutes = [
  route({
    method: 'GET',
    path: '/team',
    tag: 'teams',
    summary: "The caller's team: plan, caps, balance and settings (default_encoder)",
    responses: { 200: { description: 'The team', schema: TeamSchema } },
    handler: async ({ svc, principal }) => json(200, await getTeam(svc, principal.team_id)),
  }),
  route({
    method: 'PATCH',
    path: '/team',
    tag: 'teams',
    summary: "Change the caller's team settings (admin key): `default_encoder`, the model POST /gliner-2 runs",
    body: z.strictObject({ default_encoder: defaultEncoder.unwrap() }),
    responses: {
      200: { description: 'The team as changed', schema: TeamSchema },
      403: { description: 'A member key: only an admin key changes team settings' },
      422: { description: 'Not a model the team can run as an encoder' },
    },
    handler: async ({ svc, principal, body }) => {
      if (principal.role === 'member') throw new ForbiddenError('Only an admin key can change team settings');
      return json(200, await updateTeam(svc, principal.team_id, body));
    },
  }),
];

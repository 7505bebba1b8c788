import { z } from 'zod';
import { createApiKey, createSession, listApiKeys, MAX_ACTIVE_KEYS_PER_TEAM, revokeApiKey } from '../../core/apiKeys';
import { ForbiddenError } from '../../core/errors';
import { createTeam, listTeams } from '../../core/teams';
import { json, route } from '../types';
import { usdAmount, uuid } from '../validation';
import { ApiKeySchema, Deleted, list } from './schemas';

const keyName = z.string().regex(/\S/, 'must not be blank').trim().min(1).max(100);
export const TeamSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    plan: z.enum(['free', 'pro', 'research', 'custom']),
    daily_spend_cap_usd: z.number().nullable(),
    credit_balance_usd: z.number().nullable(),
    default_encoder: z
      .string()
      .nullable()
      .describe("The encoder POST /gliner-2 runs when a request names none; null: the operator's default"),
    created_at: z.string(),
  })
  .meta({ id: 'Team' });

export const apiKeyRoutes = [
  route({
    method: 'POST',
    path: '/api-keys',
    tag: 'api-keys',
    summary: "Create an API key in the caller's team (the secret is shown only in this response)",
    body: z.strictObject({ name: keyName, role: z.enum(['admin', 'member']).optional() }),
    responses: {
      201: { description: 'Created', schema: ApiKeySchema.extend({ key: z.string() }) },
      403: { description: 'A member key asked for an admin key' },
      409: {
        description: `The team already holds the most active keys a team may (${MAX_ACTIVE_KEYS_PER_TEAM}): revoke one first`,
      },
    },
    handler: async ({ svc, principal, body }) => {
      // Only admins (and the operator) mint admin keys.
      if (body.role === 'admin' && principal.role === 'member')
        throw new ForbiddenError('Only an admin key can create admin keys');
      return json(201, await createApiKey(svc, principal.team_id, { name: body.name, role: body.role ?? 'member' }));
    },
  }),
  route({
    method: 'GET',
    path: '/api-keys',
    tag: 'api-keys',
    summary: "List the team's active keys (no secrets)",
    responses: { 200: { description: 'Keys', schema: list(ApiKeySchema) } },
    handler: async ({ svc, principal }) => json(200, { data: await listApiKeys(svc, principal.team_id) }),
  }),
  route({
    method: 'DELETE',
    path: '/api-keys/:id',
    tag: 'api-keys',
    summary:
      'Revoke a key; it is rejected from the next request on. Admin keys are revoked only by an admin (or the operator), the operator key only by the operator',
    params: z.object({ id: uuid }),
    responses: {
      200: { description: 'Revoked', schema: Deleted },
      403: {
        description:
          "The caller's role may not revoke this key (a member revoking an admin key, or anyone but the operator revoking the operator key)",
      },
      404: { description: 'No such key in this team' },
    },
    handler: async ({ svc, principal, params }) => {
      await revokeApiKey(svc, principal, params.id);
      return json(200, { id: params.id, deleted: true });
    },
  }),
  route({
    method: 'POST',
    path: '/auth/sessions',
    tag: 'api-keys',
    summary: 'Exchange an API key for a session token (accepted as a Bearer value on /v1/*)',
    responses: { 201: { description: 'Session', schema: z.object({ token: z.string(), expires_at: z.string() }) } },
    handler: async ({ svc, principal }) => json(201, await createSession(svc, principal)),
  }),
  route({
    method: 'POST',
    path: '/teams',
    tag: 'teams',
    summary: 'Create a team with its first admin key (operator only)',
    body: z.strictObject({
      name: z.string().regex(/\S/, 'must not be blank').trim().min(1).max(100),
      plan: z.enum(['free', 'pro', 'research', 'custom']).optional(),
      daily_spend_cap_usd: usdAmount.nullable().optional(),
      credit_balance_usd: usdAmount.nullable().optional(),
    }),
    responses: {
      201: {
        description: 'Team and its first key',
        schema: z.object({ team: TeamSchema, api_key: ApiKeySchema.extend({ key: z.string() }) }),
      },
      409: { description: 'A team with this id already exists' },
    },
    handler: async ({ svc, body }) => {
      const team = await createTeam(svc, body);
      const apiKey = await createApiKey(svc, team.id, { name: `${team.name} admin`, role: 'admin' });
      return json(201, { team, api_key: apiKey });
    },
  }),
  route({
    method: 'GET',
    path: '/teams',
    tag: 'teams',
    summary: 'List teams (operator only)',
    responses: { 200: { description: 'Teams', schema: list(TeamSchema) } },
    handler: async ({ svc }) => json(200, { data: await listTeams(svc) }),
  }),
];

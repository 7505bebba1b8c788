/** /billing/usage/*: a team's request counts, limits and spend. */
import { z } from 'zod';
import { getUsage, listUsageRequests, OTHER_ROW_KEY, USAGE_READ_LIMITS } from '../../core/usage';
import { json, route } from '../types';
import { queryInt } from '../validation';

const UsageTotals = {
  requests: z.number(),
  input_tokens: z.number(),
  output_tokens: z.number(),
  cache_read_tokens: z.number(),
  cache_write_tokens: z.number(),
  cost_usd: z.number(),
};
const other = z
  .boolean()
  .optional()
  .describe(
    `true on the one row (its key is \`${OTHER_ROW_KEY}\`) that sums what the rows above leave out of the period's totals`,
  );
const ModelUsage = z.object({
  model: z
    .string()
    .describe('the project id, training job id or catalog id (usage recorded before ids: the string the request sent)'),
  name: z.string().optional().describe("a project's name, as requests named it"),
  other,
  ...UsageTotals,
});
const UsagePeriod = z.object({
  ...UsageTotals,
  requests_by_endpoint: z.record(z.string(), z.number()).describe('every authenticated request, by rate-limit class'),
  by_model: z
    .array(ModelUsage)
    .describe(
      `billed requests by model, largest cost first: at most ${USAGE_READ_LIMITS.periodRows} rows, then one \`other\` row`,
    ),
  by_endpoint: z.array(z.object({ endpoint: z.string(), other, ...UsageTotals })).describe('billed requests by route'),
});
const UsageSchema = z
  .object({
    team_id: z.string(),
    plan: z.string(),
    day: z.string(),
    month: z.string(),
    today: UsagePeriod,
    this_month: UsagePeriod,
    by_day: z
      .array(
        z.object({
          day: z.string(),
          ...UsageTotals,
          by_model: z.array(ModelUsage).describe(`at most ${USAGE_READ_LIMITS.dayRows} rows, then one \`other\` row`),
        }),
      )
      .describe('newest first; days with usage'),
    daily_spend_cap_usd: z.number().nullable(),
    remaining_daily_allowance_usd: z.number().nullable(),
    credit_balance_usd: z.number().nullable(),
    resets_at: z.string(),
    rate_limits: z.record(z.string(), z.array(z.object({ limit: z.number(), window_seconds: z.number() }))),
  })
  .meta({ id: 'Usage' });
const UsageRequestSchema = z
  .object({
    at: z.string(),
    inference_id: z.string(),
    model: z.string(),
    endpoint: z.string(),
    input_tokens: z.number(),
    output_tokens: z.number(),
    cache_read_tokens: z.number(),
    cache_write_tokens: z.number(),
    cost_usd: z.number(),
  })
  .meta({ id: 'UsageRequest' });

export const billingRoutes = [
  route({
    method: 'GET',
    path: '/billing/usage/requests',
    tag: 'billing',
    summary:
      "Current usage and remaining allowance: today's and this month's requests, tokens and spend by model and endpoint, and by day",
    query: z.strictObject({ days: queryInt(1, 366, 31) }),
    responses: { 200: { description: 'Usage', schema: UsageSchema } },
    handler: async ({ svc, principal, query }) => json(200, await getUsage(svc, principal.team_id, query.days)),
  }),
  route({
    method: 'GET',
    path: '/billing/usage/requests/list',
    tag: 'billing',
    summary:
      'Billed requests one by one, newest first (time, model, endpoint, tokens, cost, inference id); page with `cursor`',
    query: z.strictObject({
      limit: queryInt(1, 500, 100),
      cursor: z
        .string()
        .max(1024)
        .regex(/^[A-Za-z0-9_-]+$/, 'is not a next_cursor from a previous page')
        .optional(),
    }),
    responses: {
      200: {
        description: 'Billed requests',
        schema: z.object({ data: z.array(UsageRequestSchema), next_cursor: z.string().nullable() }),
      },
    },
    handler: async ({ svc, principal, query }) => json(200, await listUsageRequests(svc, principal.team_id, query)),
  }),
];

/** Usage counters, credits and spend caps on the in-memory store (no emulators): src/core/usage.ts, billing/. */
import { addCredits, updateTeam } from '../../../src/core/billing/credits';
import { applyBatch, buildBatch } from '../../../src/core/billing/usageBatch';
import { ConflictError, PaymentRequiredError, RateLimitError } from '../../../src/core/errors';
import {
  checkSpendAllowance,
  getUsage,
  listUsageRequests,
  recordBilledUsage,
  recordRequest,
  type BilledUsage,
} from '../../../src/core/usage';
import { createMemoryServices } from '../../../src/adapters/memory/services';
import { createTeam, getTeam } from '../../../src/core/teams';

const billed = (inference_id: string, cost_usd_micros: number, over: Partial<BilledUsage> = {}): BilledUsage => ({
  inference_id,
  endpoint: '/v1/chat/completions',
  model: 'HuggingFaceTB/SmolLM2-135M-Instruct',
  base_model: 'HuggingFaceTB/SmolLM2-135M-Instruct',
  input_tokens: 100,
  output_tokens: 20,
  cache_read_tokens: 0,
  cache_write_tokens: 0,
  cost_usd_micros,
  ...over,
});

function setup(team: { credit_balance_usd?: number; daily_spend_cap_usd?: number } = {}) {
  let t = Date.parse('2026-03-10T12:00:00Z');
  const svc = createMemoryServices({ now: () => new Date(t) });
  return { svc, team: createTeam(svc, { name: 'acme', ...team }), advance: (ms: number) => (t += ms) };
}

describe('usage and credits on the in-memory store', () => {
  it('counts requests and billed tokens per day and month, by model and endpoint', async () => {
    const { svc, team: made } = setup();
    const team = await made;
    await recordRequest(svc, team.id, 'compat');
    await recordRequest(svc, team.id, 'compat');
    await recordBilledUsage(svc, team.id, 'compat', billed('inf_1', 1500));
    await recordBilledUsage(
      svc,
      team.id,
      'compat',
      billed('inf_2', 500, { endpoint: '/v1/messages', output_tokens: 5 }),
    );
    const usage = await getUsage(svc, team.id);
    expect(usage.today).toMatchObject({
      requests: 2,
      input_tokens: 200,
      output_tokens: 25,
      cost_usd: 0.002,
      requests_by_endpoint: { compat: 2 },
    });
    expect(usage.this_month).toMatchObject({ requests: 2, input_tokens: 200, cost_usd: 0.002 });
    expect(usage.today.by_endpoint).toEqual([
      expect.objectContaining({ endpoint: '/v1/chat/completions', cost_usd: 0.0015 }),
      expect.objectContaining({ endpoint: '/v1/messages', cost_usd: 0.0005 }),
    ]);
    expect(usage.by_day).toEqual([expect.objectContaining({ day: '2026-03-10', requests: 2 })]);
    // the per-request listing, newest first, paged by cursor
    const first = await listUsageRequests(svc, team.id, { limit: 1 });
    expect(first.data.map((r) => r.inference_id)).toEqual(['inf_2']);
    const rest = await listUsageRequests(svc, team.id, { limit: 10, cursor: first.next_cursor! });
    expect(rest.data.map((r) => r.inference_id)).toEqual(['inf_1']);
    expect(rest.next_cursor).toBeNull();
  });

  it('applying the same usage batch twice counts it once (idempotent replay)', async () => {
    const { svc, team: made } = setup({ credit_balance_usd: 1 });
    const team = await made;
    await recordBilledUsage(svc, team.id, 'compat', billed('inf_1', 250_000));
    // the batch a spool or queue would hold, replayed by a worker after a partial failure
    const usageBatch = buildBatch(
      'w-replay',
      1,
      team.id,
      [
        {
          team_id: team.id,
          at: svc.now().toISOString(),
          limit_class: 'compat',
          requests: 0,
          billed: billed('inf_2', 100_000),
        },
      ],
      0,
    );
    await applyBatch(svc.records, usageBatch);
    await applyBatch(svc.records, usageBatch);
    expect((await getUsage(svc, team.id)).today.cost_usd).toBeCloseTo(0.35);
    expect((await getTeam(svc, team.id)).credit_balance_usd).toBeCloseTo(0.65);
  });

  it('spends a prepaid balance; at zero the next billed request is refused with 402', async () => {
    const { svc, team: made } = setup({ credit_balance_usd: 0.001 });
    const team = await made;
    await checkSpendAllowance(svc, team.id);
    await recordBilledUsage(svc, team.id, 'compat', billed('inf_1', 1000));
    expect((await getTeam(svc, team.id)).credit_balance_usd).toBe(0);
    const refused = await checkSpendAllowance(svc, team.id).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PaymentRequiredError);
    expect((refused as PaymentRequiredError).headers['x-should-retry']).toBe('false');
    expect((await addCredits(svc, team.id, 5)).credit_balance_usd).toBe(5);
    await checkSpendAllowance(svc, team.id);
  });

  it('a team billed in arrears is never refused for credit, and cannot be topped up without a balance', async () => {
    const { svc, team: made } = setup();
    const team = await made;
    await recordBilledUsage(svc, team.id, 'compat', billed('inf_1', 5_000_000));
    await checkSpendAllowance(svc, team.id);
    expect((await getTeam(svc, team.id)).credit_balance_usd).toBeNull();
    await expect(addCredits(svc, team.id, 5)).rejects.toBeInstanceOf(ConflictError);
    expect((await updateTeam(svc, team.id, { credit_balance_usd: 2 })).credit_balance_usd).toBe(2);
    expect((await addCredits(svc, team.id, 1)).credit_balance_usd).toBe(3);
  });

  it('the daily spend cap answers 429 until 00:00 UTC, then clears', async () => {
    const { svc, team: made, advance } = setup({ daily_spend_cap_usd: 0.01 });
    const team = await made;
    await recordBilledUsage(svc, team.id, 'compat', billed('inf_1', 10_000));
    const capped = (await checkSpendAllowance(svc, team.id).catch((e: unknown) => e)) as RateLimitError;
    expect(capped).toBeInstanceOf(RateLimitError);
    expect(capped.message).toMatch(/Daily spending cap of 0.01 USD reached/);
    expect((await getUsage(svc, team.id)).remaining_daily_allowance_usd).toBe(0);
    advance(12 * 3600 * 1000);
    await checkSpendAllowance(svc, team.id);
    expect((await getUsage(svc, team.id)).remaining_daily_allowance_usd).toBe(0.01);
  });
});

/** GET /billing/usage/requests over HTTP against the local stack (src/http/routes/billing.ts; credit and spend caps: billing.test.ts). */
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack.stop());

describe('GET /billing/usage/requests', () => {
  it('counts real requests per team and endpoint class', async () => {
    const team = await stack.newTeam('billing');
    const before = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    await stack.call('GET', '/projects', { key: team.key });
    await stack.call('POST', '/core/training-jobs', {
      key: team.key,
      body: { model_name: 'm', base_model: 'nope', datasets: [{ name: 'x' }] },
    });
    const after = (await stack.call('GET', '/billing/usage/requests', { key: team.key })).body;
    // The first usage read itself counts too.
    expect(after.today.requests - before.today.requests).toBe(3);
    expect(after.today.requests_by_endpoint.training_create).toBe(1);
    expect(after.this_month.requests).toBeGreaterThanOrEqual(after.today.requests);
    expect(after).toMatchObject({ plan: 'pro', daily_spend_cap_usd: null, remaining_daily_allowance_usd: null });
    expect(after.rate_limits.inference).toEqual([{ limit: 5000, window_seconds: 60 }]);
  });
  // Credit, 402 and the spend cap's 429 are tested over HTTP with billed requests: test/http/billing.test.ts
});

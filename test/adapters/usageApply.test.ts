/**
 * The AWS side of the usage spool: a batch a gateway could not write travels as a `usage.apply`
 * work message; the worker applies it against the real store (dynalite), and a redelivery (SQS is
 * at-least-once) or a replay after a partial success changes nothing.
 */
import type { WorkMessage, WorkQueue } from '../../src/core/ports';
import { QueueUsageSpool } from '../../src/core/billing/spool';
import { buildBatch, type UsageEvent } from '../../src/core/billing/usageBatch';
import { daySk } from '../../src/core/recordKeys';
import { handleWorkMessage } from '../../src/core/worker';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack?.stop());

it('a spooled batch is applied by the worker once, however often it is delivered', async () => {
  const team = (await stack.call('POST', '/teams', { body: { name: 'queued', credit_balance_usd: 1 } })).body.team;
  const at = new Date().toISOString();
  const events: UsageEvent[] = [1, 2, 3].map((i) => ({
    team_id: team.id,
    at,
    limit_class: 'inference',
    requests: 0,
    billed: { inference_id: `inf_test${i}`, endpoint: '/inference', model: 'm', base_model: 'm', input_tokens: 10, output_tokens: 5, cache_read_tokens: 0, cache_write_tokens: 0, cost_usd_micros: 7 },
  }));
  const sent: WorkMessage[] = [];
  const queue: WorkQueue = { send: async (m) => void sent.push(m) };
  await new QueueUsageSpool(queue).append(buildBatch('wtest', 1, team.id, events, Math.floor(Date.now() / 1000) + 3600));
  expect(sent).toHaveLength(1);
  const message = JSON.parse(JSON.stringify(sent[0])) as WorkMessage; // as it crosses SQS
  for (let i = 0; i < 3; i++) await handleWorkMessage(stack.svc, message);

  const day = await stack.svc.records.get<Record<string, number>>(`TEAM#${team.id}`, daySk(at.slice(0, 10)));
  expect(day).toMatchObject({ cost_usd_micros: 21, input_tokens: 30, 'model|m|requests': 3, 'endpoint|/inference|cost_usd_micros': 21 });
  const teamItem = (await stack.svc.records.get<{ credit_balance_micros: number }>(`TEAM#${team.id}`, 'TEAM'))!;
  expect(teamItem.credit_balance_micros).toBe(1_000_000 - 21);
  const listed = await stack.svc.records.query(`TEAM#${team.id}`, { beginsWith: 'USAGEREQ#' });
  expect(listed.items).toHaveLength(3);
});

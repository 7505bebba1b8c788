/**
 * Usage plans per team: the authorizer's key lookup (src/core/gatewayKeys.ts) with the API Gateway
 * adapter's real SDK calls, against the HTTP stand-in and the record store emulator.
 */
import { APIGatewayClient } from '@aws-sdk/client-api-gateway';
import { ApiGatewayKeys } from '../../src/aws/gatewayKeys';
import { usageIdentifierFor } from '../../src/core/gatewayKeys';
import { gatewayKeyItem } from '../../src/core/recordKeys';
import { FakeApiGateway } from '../helpers/fakeApiGateway';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
let fake: FakeApiGateway;
let keys: ApiGatewayKeys;

beforeAll(async () => {
  fake = await FakeApiGateway.start([
    'sift-test-free',
    'sift-test-pro',
    'sift-test-research',
    'sift-test-custom',
    'sift-other-pro',
  ]);
  const client = new APIGatewayClient({
    endpoint: fake.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
    maxAttempts: 1,
  });
  keys = new ApiGatewayKeys('test', client);
  // the stack's graph is read-only: the stand-in goes in through its composition
  stack = await TestStack.start({ ports: { gatewayKeys: keys } });
});
afterAll(async () => {
  await stack?.stop();
  await fake?.stop();
});

it("gives a team one key, in its plan's usage plan of this stage, and the same value afterwards", async () => {
  const team = { id: 'team-a', plan: 'pro' as const };
  const value = await usageIdentifierFor(stack.svc, team);
  expect(value).toMatch(/^[A-Za-z0-9_-]{40}$/);
  const [key] = [...fake.keys.values()].filter((k) => k.tags['sift:team'] === 'team-a');
  // tagged with its stage: the authorizer's IAM deletes only keys with its own stage's tag
  expect(key).toMatchObject({
    name: 'sift-test-team-team-a-pro',
    value,
    tags: { 'sift:plan': 'pro', 'sift:stage': 'test' },
  });
  expect(fake.planOfKey(key!.id)).toBe('sift-test-pro');
  const before = fake.calls.length;
  expect(await usageIdentifierFor(stack.svc, team)).toBe(value);
  expect(fake.calls.length).toBe(before); // remembered: no API Gateway call
});

it("moves a team to its new plan's usage plan and deletes the old key", async () => {
  const first = await usageIdentifierFor(stack.svc, { id: 'team-b', plan: 'free' });
  const oldId = [...fake.keys.values()].find((k) => k.value === first)!.id;
  const second = await usageIdentifierFor(stack.svc, { id: 'team-b', plan: 'research' });
  expect(second).not.toBe(first);
  expect(fake.keys.has(oldId)).toBe(false);
  const now = [...fake.keys.values()].find((k) => k.value === second)!;
  expect(fake.planOfKey(now.id)).toBe('sift-test-research');
});

it('two first requests at once keep one key (the loser deletes its own)', async () => {
  const [a, b] = await Promise.all([
    usageIdentifierFor(stack.svc, { id: 'team-c', plan: 'custom' }),
    usageIdentifierFor(stack.svc, { id: 'team-c', plan: 'custom' }),
  ]);
  expect(a).toBe(b);
  expect([...fake.keys.values()].filter((k) => k.tags['sift:team'] === 'team-c')).toHaveLength(1);
  const stored = await stack.svc.records.get<{ value: string }>(
    gatewayKeyItem('team-c').pk,
    gatewayKeyItem('team-c').sk,
  );
  expect(stored?.value).toBe(a);
});

it('leaves no key outside every plan when attaching it fails, and records nothing', async () => {
  fake.failNext = 'POST /usageplans/';
  await expect(usageIdentifierFor(stack.svc, { id: 'team-d', plan: 'pro' })).rejects.toThrow(/injected failure/);
  expect([...fake.keys.values()].filter((k) => k.tags['sift:team'] === 'team-d')).toHaveLength(0);
  expect(await stack.svc.records.get(gatewayKeyItem('team-d').pk, gatewayKeyItem('team-d').sk)).toBeUndefined();
  expect(await usageIdentifierFor(stack.svc, { id: 'team-d', plan: 'pro' })).toEqual(expect.any(String)); // the next request succeeds
});

it('names the missing usage plan when the stack has none for the plan', async () => {
  const other = new ApiGatewayKeys(
    'nostage',
    new APIGatewayClient({
      endpoint: fake.endpoint,
      region: 'us-east-1',
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
    }),
  );
  await expect(other.create({ id: 'team-e', plan: 'pro' })).rejects.toThrow(
    'no API Gateway usage plan named sift-nostage-pro',
  );
});

it('keeps the key off the team record: GET /teams never shows it', async () => {
  const team = await stack.newTeam('with-gateway-key');
  const value = await usageIdentifierFor(stack.svc, { id: team.teamId, plan: 'pro' });
  const teams = (await stack.call('GET', '/teams')).text;
  expect(teams).toContain(team.teamId);
  expect(teams).not.toContain(value!);
});

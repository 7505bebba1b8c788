/**
 * Key roles (security review F10): a member key revokes member keys only; an admin key is revoked by
 * an admin or the operator, the operator key by the operator alone. A team holds at most
 * MAX_ACTIVE_KEYS_PER_TEAM active keys (409 naming the bound). Over HTTP, against the local stack.
 */
import { MAX_ACTIVE_KEYS_PER_TEAM } from '../../src/core/apiKeys';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack.stop());

async function newKey(by: string, role: 'admin' | 'member', name: string = role): Promise<{ id: string; key: string }> {
  const res = await stack.call('POST', '/api-keys', { key: by, body: { name, role } });
  expect(res.status).toBe(201);
  return { id: res.body.id, key: res.body.key };
}

const revoke = (by: string, id: string) => stack.call('DELETE', `/api-keys/${id}`, { key: by });
const stillWorks = async (key: string) => (await stack.call('GET', '/api-keys', { key })).status === 200;

describe('revoking keys by role', () => {
  it('a member key revokes member keys but not an admin key (403 naming why)', async () => {
    const team = await stack.newTeam('roles-member');
    const member = await newKey(team.key, 'member');
    const otherMember = await newKey(team.key, 'member', 'other');
    const admins = (await stack.call('GET', '/api-keys', { key: team.key })).body.data.filter(
      (k: { role: string }) => k.role === 'admin',
    );
    expect(admins).toHaveLength(1);

    const refused = await revoke(member.key, admins[0].id);
    expect(refused.status).toBe(403);
    expect(refused.body.detail).toBe(
      `API key '${admins[0].id}' is an admin key: only an admin key (or the operator's) can revoke it; this key's role is member`,
    );
    expect(await stillWorks(team.key)).toBe(true);

    expect((await revoke(member.key, otherMember.id)).status).toBe(200);
    expect(await stillWorks(otherMember.key)).toBe(false);
  });

  it('an admin key revokes another admin key', async () => {
    const team = await stack.newTeam('roles-admin');
    const second = await newKey(team.key, 'admin');
    expect(
      (
        await revoke(
          second.key,
          (
            await stack.call('GET', '/api-keys', { key: team.key })
          ).body.data.find((k: { name: string }) => k.name === 'roles-admin admin').id,
        )
      ).status,
    ).toBe(200);
    expect(await stillWorks(team.key)).toBe(false);
    expect(await stillWorks(second.key)).toBe(true);
  });

  it("in the operator's team, neither a member nor an admin key can revoke the operator key", async () => {
    const operatorKey = (await stack.call('GET', '/api-keys')).body.data.find(
      (k: { role: string }) => k.role === 'operator',
    );
    const admin = await newKey(OPERATOR_KEY, 'admin', 'operator-team admin');
    const member = await newKey(OPERATOR_KEY, 'member', 'operator-team member');
    for (const by of [admin.key, member.key]) {
      const refused = await revoke(by, operatorKey.id);
      expect(refused.status).toBe(403);
      expect(refused.body.detail).toBe(
        `API key '${operatorKey.id}' is the installation's operator key: only an operator key can revoke it`,
      );
    }
    expect(await stillWorks(OPERATOR_KEY)).toBe(true);
    // the operator still revokes the team's admin keys
    expect((await revoke(OPERATOR_KEY, admin.id)).status).toBe(200);
  });

  it('declares the 403 in the OpenAPI document', async () => {
    const doc = (await stack.call('GET', '/openapi.json')).body;
    expect(Object.keys(doc.paths['/api-keys/{id}'].delete.responses)).toEqual(
      expect.arrayContaining(['200', '403', '404']),
    );
    expect(Object.keys(doc.paths['/api-keys'].post.responses)).toEqual(expect.arrayContaining(['201', '403', '409']));
  });
});

describe('the per-team bound on active keys', () => {
  it(`refuses key ${MAX_ACTIVE_KEYS_PER_TEAM + 1} with 409 naming the bound; a revoked key frees its place`, async () => {
    const team = await stack.newTeam('many-keys'); // its admin key is the first
    const made: { id: string; key: string }[] = [];
    for (let i = 1; i < MAX_ACTIVE_KEYS_PER_TEAM; i++) made.push(await newKey(team.key, 'member', `k${i}`));
    expect((await stack.call('GET', '/api-keys', { key: team.key })).body.data).toHaveLength(MAX_ACTIVE_KEYS_PER_TEAM);

    const refused = await stack.call('POST', '/api-keys', { key: team.key, body: { name: 'one too many' } });
    expect(refused.status).toBe(409);
    expect(refused.body.detail).toBe(
      `This team already has ${MAX_ACTIVE_KEYS_PER_TEAM} active API keys, the most a team may hold (${MAX_ACTIVE_KEYS_PER_TEAM}): revoke one it no longer uses (GET /api-keys, DELETE /api-keys/{id}) before creating another`,
    );
    // other teams are not affected
    expect((await stack.call('POST', '/api-keys', { body: { name: 'operator team key' } })).status).toBe(201);

    expect((await revoke(team.key, made[0]!.id)).status).toBe(200);
    expect((await stack.call('POST', '/api-keys', { key: team.key, body: { name: 'in its place' } })).status).toBe(201);
  });
});

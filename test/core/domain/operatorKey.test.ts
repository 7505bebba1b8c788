/**
 * The installation's operator key (SIFT_ADMIN_KEY) and the bounds on minting credentials, on the
 * in-memory service graph (security review F10, F15b):
 * - a SIFT_ADMIN_KEY must be as long and as varied as a generated key (`svc_sk_x` was accepted);
 * - a revoked SIFT_ADMIN_KEY is never seeded again: the start is refused with what to do (it used
 *   to start with the configured operator key dead, since the lookup counted revoked keys);
 * - sessions are minted at most SESSION_MINTS_PER_TEAM per window, per team.
 */
import { createMemoryServices } from '../../../src/adapters/memory/services';
import {
  authenticate,
  createSession,
  listApiKeys,
  MIN_GIVEN_KEY_CHARS,
  revokeApiKey,
  SESSION_MINTS_PER_TEAM,
} from '../../../src/core/apiKeys';
import { ensureInstallation } from '../../../src/core/bootstrap';
import { RateLimitError } from '../../../src/core/errors';
import { newApiKey } from '../../../src/core/ids';

const GOOD = 'svc_sk_test-operator-key-0123456789abcdefghijklmnop';
const asOperator = (svc: ReturnType<typeof createMemoryServices>, key: string) =>
  authenticate(svc, { path: '/api-keys', headers: { 'x-api-key': key } });

describe('SIFT_ADMIN_KEY', () => {
  it.each([
    ['svc_sk_x', /at least 32 characters after svc_sk_ \(it has 1\)/],
    [`svc_sk_${'a1'.repeat(15)}`, /at least 32 characters after svc_sk_ \(it has 30\)/],
    [`svc_sk_${'ab'.repeat(20)}`, /must not be a few repeated ones/],
    [`svc_sk_${'0123456789abcdef'.repeat(2).slice(0, 31)} x`, /visible ASCII/],
    ['hunter2-0123456789abcdefghijklmnopqrstuvwxyz', /must start with svc_sk_/],
  ])('is refused when it is not as strong as a generated key: %j', async (key, why) => {
    const svc = createMemoryServices();
    await expect(ensureInstallation(svc, key)).rejects.toThrow(why);
    await expect(ensureInstallation(svc, key)).rejects.toThrow(/^SIFT_ADMIN_KEY is not usable as the operator key: /);
  });

  it("accepts a generated key, a hex key of 32 characters, and the test suites' keys", async () => {
    for (const key of [newApiKey(), `svc_sk_${'0123456789abcdef'.repeat(2)}`, GOOD]) {
      const svc = createMemoryServices();
      await ensureInstallation(svc, key);
      await expect(asOperator(svc, key)).resolves.toMatchObject({ role: 'operator' });
    }
    expect(MIN_GIVEN_KEY_CHARS).toBe(32);
  });

  it('stays revoked: a later start with it configured is refused, naming what to do', async () => {
    const svc = createMemoryServices();
    const { teamId } = await ensureInstallation(svc, GOOD);
    const rotated = 'svc_sk_rotated-operator-key-abcdefghijklmnopqrstuv';
    await ensureInstallation(svc, rotated);
    const operator = await asOperator(svc, rotated);
    const old = (await listApiKeys(svc, teamId)).find((k) => k.name === 'operator');
    await revokeApiKey(svc, operator, old!.id);

    await expect(ensureInstallation(svc, GOOD)).rejects.toThrow(
      new RegExp(
        `^SIFT_ADMIN_KEY was revoked at .+ \\(key id ${old!.id}\\) and a revoked key stays revoked: set SIFT_ADMIN_KEY to a new key \\(e\\.g\\. svc_sk_\\$\\(openssl rand -hex 24\\)\\) and start again, or unset it`,
      ),
    );
    await expect(asOperator(svc, GOOD)).rejects.toMatchObject({ status: 401 });
    // the other operator key and a start without SIFT_ADMIN_KEY are unaffected
    await expect(ensureInstallation(svc, rotated)).resolves.toEqual({ teamId });
    await expect(ensureInstallation(svc)).resolves.toEqual({ teamId });
    await expect(asOperator(svc, rotated)).resolves.toMatchObject({ role: 'operator' });
  });
});

describe('session tokens', () => {
  it(`are minted at most ${SESSION_MINTS_PER_TEAM.limit} per ${SESSION_MINTS_PER_TEAM.windowSeconds} s per team (429 naming the bound)`, async () => {
    let now = new Date('2026-11-26T10:00:00.000Z');
    const svc = createMemoryServices({ now: () => now });
    const { teamId } = await ensureInstallation(svc, GOOD);
    const principal = await asOperator(svc, GOOD);
    for (let i = 0; i < SESSION_MINTS_PER_TEAM.limit; i++) await createSession(svc, principal);
    const refused = await createSession(svc, principal).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RateLimitError);
    expect((refused as RateLimitError).message).toBe(
      `This team opened ${SESSION_MINTS_PER_TEAM.limit} session tokens in the last 1 h, the most it may; reuse an open session (they last 12 h) or retry after 3600 s`,
    );
    expect((refused as RateLimitError).headers).toEqual({
      'retry-after': '3600',
      'x-ratelimit-reason': 'session_limit',
    });
    // another team's bound is its own
    await expect(createSession(svc, { ...principal, team_id: `${teamId}-other` })).resolves.toMatchObject({
      token: expect.stringMatching(/^sess_/),
    });
    // the next window opens again
    now = new Date('2026-11-26T11:00:00.000Z');
    await expect(createSession(svc, principal)).resolves.toMatchObject({ token: expect.stringMatching(/^sess_/) });
  });
});

import { apiKeyItem, byCreation, sessionItem, teamKeysIndex } from './recordKeys';
import { ITEM_EXISTS, WriteConflict } from './ports';
import type { Principal, Services } from './context';
import { ConflictError, ForbiddenError, NotFoundError, RateLimitError, UnauthorizedError } from './errors';
import type { LimitRule } from './limits';
import { API_KEY_PREFIX, newApiKey, newSessionToken, newUuid, sha256Hex } from './ids';

/** What is stored for a key: never the key itself, only its sha256. */
interface StoredKey {
  id: string;
  team_id: string;
  name: string;
  role: Principal['role'];
  /** First characters of the key, to tell keys apart in listings. */
  prefix: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  key_hash: string;
}

export type ApiKeyView = Omit<StoredKey, 'key_hash' | 'revoked_at' | 'team_id'>;
export type CreatedApiKey = ApiKeyView & { key: string };

interface StoredSession {
  team_id: string;
  key_id: string;
  role: Principal['role'];
  expires_at: string;
}

/**
 * The most active keys a team may hold. Keys are minted by any member; without a bound one member
 * could fill the team's key index (and every session check reads it: principalForSession).
 */
export const MAX_ACTIVE_KEYS_PER_TEAM = 100;

/**
 * Session tokens a team may open per window. Sessions live `sessionTtlSeconds` (12 h) and have no
 * team index to count them by, so the bound is on minting: at most 13 windows' worth are alive at once.
 */
export const SESSION_MINTS_PER_TEAM: LimitRule = { limit: 1000, windowSeconds: 3600 };

/**
 * Who may revoke a key of each role: any key revokes a member key; an admin key is revoked only by
 * an admin or the operator, and the operator key only by the operator (a member key must not be able
 * to lock the team's admins, or the installation's operator, out).
 */
const MAY_REVOKE: Record<Principal['role'], readonly Principal['role'][]> = {
  member: ['member', 'admin', 'operator'],
  admin: ['admin', 'operator'],
  operator: ['operator'],
};

const view = (k: StoredKey): ApiKeyView => ({
  id: k.id,
  name: k.name,
  role: k.role,
  prefix: k.prefix,
  created_at: k.created_at,
  last_used_at: k.last_used_at,
});

/**
 * Stores a key (given, e.g. SIFT_ADMIN_KEY, or freshly generated) and returns it once. A generated key
 * is refused with 409 while the team holds MAX_ACTIVE_KEYS_PER_TEAM active keys; a given key is the
 * operator's own seed and is never refused, so the operator can always get back in. (Two concurrent
 * requests at 99 may both pass: the bound is exceeded by at most the requests in flight.)
 */
export async function createApiKey(
  svc: Services,
  teamId: string,
  input: { name: string; role?: Principal['role']; key?: string },
): Promise<CreatedApiKey> {
  if (input.key === undefined) {
    const active = (await activeKeys(svc, teamId)).length;
    if (active >= MAX_ACTIVE_KEYS_PER_TEAM) {
      throw new ConflictError(
        `This team already has ${active} active API keys, the most a team may hold (${MAX_ACTIVE_KEYS_PER_TEAM}): revoke one it no longer uses (GET /api-keys, DELETE /api-keys/{id}) before creating another`,
      );
    }
  }
  const key = input.key ?? newApiKey();
  const hash = sha256Hex(key);
  const stored: StoredKey = {
    id: newUuid(),
    team_id: teamId,
    name: input.name,
    role: input.role ?? 'member',
    prefix: key.slice(0, API_KEY_PREFIX.length + 4),
    created_at: svc.now().toISOString(),
    last_used_at: null,
    revoked_at: null,
    key_hash: hash,
  };
  await svc.records.put(
    { ...apiKeyItem(hash), gsi1pk: teamKeysIndex(teamId), gsi1sk: byCreation(stored.created_at, stored.id) },
    stored,
    {
      ifAbsent: true,
    },
  );
  return { ...view(stored), key };
}

/** What is stored for this exact key value, revoked or not (used to seed SIFT_ADMIN_KEY idempotently). */
export async function findStoredKey(
  svc: Services,
  key: string,
): Promise<Pick<StoredKey, 'id' | 'team_id' | 'role' | 'revoked_at'> | undefined> {
  const { pk, sk } = apiKeyItem(sha256Hex(key));
  const stored = await svc.records.get<StoredKey>(pk, sk);
  return stored && { id: stored.id, team_id: stored.team_id, role: stored.role, revoked_at: stored.revoked_at };
}

/**
 * Characters a key chosen by the operator (SIFT_ADMIN_KEY) needs after the prefix. A generated key
 * has 43 (32 random bytes, base64url); 32 is the floor, which 16 random bytes in hex just reach.
 */
export const MIN_GIVEN_KEY_CHARS = 32;
/** How to make a key as good as a generated one (shown in errors about SIFT_ADMIN_KEY). */
export const GIVEN_KEY_EXAMPLE = `${API_KEY_PREFIX}$(openssl rand -hex 24)`;

/** Why a key chosen by the operator is not acceptable, or undefined when it is. */
export function givenKeyProblem(key: string): string | undefined {
  if (!key.startsWith(API_KEY_PREFIX)) return `it must start with ${API_KEY_PREFIX}`;
  const secret = key.slice(API_KEY_PREFIX.length);
  // header-safe: visible ASCII, no spaces (the key travels in X-API-Key and Bearer values)
  if (!/^[\x21-\x7e]*$/.test(secret)) return 'it may hold only visible ASCII characters (no spaces)';
  if (secret.length < MIN_GIVEN_KEY_CHARS) {
    return `it must have at least ${MIN_GIVEN_KEY_CHARS} characters after ${API_KEY_PREFIX} (it has ${secret.length}), as random as a generated key's: e.g. ${GIVEN_KEY_EXAMPLE}`;
  }
  // a long key of a few repeated characters is as guessable as a short one
  if (new Set(secret).size < 8)
    return `its characters after ${API_KEY_PREFIX} must not be a few repeated ones (use random ones: e.g. ${GIVEN_KEY_EXAMPLE})`;
  return undefined;
}

/** The team's keys that are not revoked (revocation also takes a key out of the index). */
async function activeKeys(svc: Services, teamId: string): Promise<StoredKey[]> {
  const keys = await svc.records.queryAll<StoredKey>(teamKeysIndex(teamId), { index: 'gsi1' });
  return keys.filter((k) => !k.revoked_at);
}

export async function listApiKeys(svc: Services, teamId: string): Promise<ApiKeyView[]> {
  return (await activeKeys(svc, teamId)).map(view);
}

async function findTeamKey(svc: Services, teamId: string, keyId: string): Promise<StoredKey> {
  const found = (await activeKeys(svc, teamId)).find((k) => k.id === keyId);
  if (!found) throw new NotFoundError(`API key '${keyId}' not found`);
  return found;
}

/**
 * Revocation is a conditional write on the key's own item, so the very next request sees it. Only
 * keys of the caller's team are found, and only a role in MAY_REVOKE may revoke them (403 otherwise).
 */
export async function revokeApiKey(svc: Services, revoker: Principal, keyId: string): Promise<void> {
  const found = await findTeamKey(svc, revoker.team_id, keyId);
  if (!MAY_REVOKE[found.role].includes(revoker.role)) {
    throw new ForbiddenError(
      found.role === 'operator'
        ? `API key '${keyId}' is the installation's operator key: only an operator key can revoke it`
        : `API key '${keyId}' is an admin key: only an admin key (or the operator's) can revoke it; this key's role is ${revoker.role}`,
    );
  }
  const { pk, sk } = apiKeyItem(found.key_hash);
  try {
    await svc.records.update(pk, sk, {
      set: { revoked_at: svc.now().toISOString() },
      // The key's GSI entry goes too: revoked keys leave the listing.
      remove: ['gsi1pk', 'gsi1sk'],
      condition: [{ itemExists: true }, { attr: 'revoked_at', equals: null }],
    });
  } catch (err) {
    if (err instanceof WriteConflict) throw new NotFoundError(`API key '${keyId}' not found`);
    throw err;
  }
  svc.hotPath?.principals.deleteWhere((p) => p.key_id === keyId);
}

/** last_used_at is written at most once a minute per key, to keep auth off the write path. */
const LAST_USED_GRANULARITY_MS = 60_000;
const lastUsedWrites = new Map<string, number>();

async function principalForKey(svc: Services, key: string): Promise<Principal> {
  const hash = sha256Hex(key);
  const cached = svc.hotPath?.principals.get(hash);
  if (cached) return cached;
  const { pk, sk } = apiKeyItem(hash);
  const stored = await svc.records.get<StoredKey>(pk, sk);
  if (!stored || stored.revoked_at) throw new UnauthorizedError('Invalid or revoked API key');
  const now = svc.now();
  const last = lastUsedWrites.get(hash) ?? 0;
  if (now.getTime() - last >= LAST_USED_GRANULARITY_MS) {
    lastUsedWrites.set(hash, now.getTime());
    await svc.records.update(pk, sk, {
      set: { last_used_at: now.toISOString() },
      condition: ITEM_EXISTS,
    });
  }
  const principal: Principal = { team_id: stored.team_id, key_id: stored.id, role: stored.role, via: 'api_key' };
  svc.hotPath?.principals.set(hash, principal);
  return principal;
}

async function principalForSession(svc: Services, token: string): Promise<Principal> {
  const { pk, sk } = sessionItem(sha256Hex(token));
  const session = await svc.records.get<StoredSession>(pk, sk);
  if (!session || Date.parse(session.expires_at) <= svc.now().getTime()) {
    throw new UnauthorizedError('Invalid or expired session token');
  }
  // A session dies with the key that opened it.
  const keys = await svc.records.queryAll<StoredKey>(teamKeysIndex(session.team_id), { index: 'gsi1' });
  if (!keys.some((k) => k.id === session.key_id && !k.revoked_at))
    throw new UnauthorizedError('Invalid or expired session token');
  return { team_id: session.team_id, key_id: session.key_id, role: session.role, via: 'session' };
}

export async function createSession(
  svc: Services,
  principal: Principal,
): Promise<{ token: string; expires_at: string }> {
  const minted = await svc.rateLimiter.hit(`sessions:${principal.team_id}`, SESSION_MINTS_PER_TEAM, svc.now());
  if (minted.count > SESSION_MINTS_PER_TEAM.limit) {
    throw new RateLimitError(
      `This team opened ${SESSION_MINTS_PER_TEAM.limit} session tokens in the last ${SESSION_MINTS_PER_TEAM.windowSeconds / 3600} h, the most it may; reuse an open session (they last ${svc.config.sessionTtlSeconds / 3600} h) or retry after ${minted.resetSeconds} s`,
      minted.resetSeconds,
      'session_limit',
    );
  }
  const token = newSessionToken();
  const expires = new Date(svc.now().getTime() + svc.config.sessionTtlSeconds * 1000);
  const session: StoredSession = {
    team_id: principal.team_id,
    key_id: principal.key_id,
    role: principal.role,
    expires_at: expires.toISOString(),
  };
  await svc.records.put({ ...sessionItem(sha256Hex(token)), expiresAt: Math.floor(expires.getTime() / 1000) }, session);
  return { token, expires_at: session.expires_at };
}

/**
 * docs/reference/decisions.md#authentication: `X-API-Key` everywhere; on the compatible `/v1/*` routes also
 * `Authorization: Bearer`, where an `svc_sk_` value is an API key and anything else a session token.
 */
export async function authenticate(
  svc: Services,
  req: { path: string; headers: Record<string, string | undefined> },
): Promise<Principal> {
  const apiKey = req.headers['x-api-key']?.trim();
  if (apiKey) {
    if (!apiKey.startsWith(API_KEY_PREFIX)) throw new UnauthorizedError('Invalid API key format');
    return principalForKey(svc, apiKey);
  }
  const authorization = req.headers.authorization?.trim();
  if (authorization && req.path.startsWith('/v1/')) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw new UnauthorizedError('Authorization header must be "Bearer <API key or session token>"');
    const token = match[1] as string;
    return token.startsWith(API_KEY_PREFIX) ? principalForKey(svc, token) : principalForSession(svc, token);
  }
  throw new UnauthorizedError('Missing API key: send it in the X-API-Key header');
}

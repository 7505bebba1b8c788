import { apiKeyItem, byCreation, sessionItem, teamKeysIndex } from './recordKeys';
import { ITEM_EXISTS, WriteConflict } from './ports';
import type { Principal, Services } from './context';
import { NotFoundError, UnauthorizedError } from './errors';
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


const view = (k: StoredKey): ApiKeyView => ({
  id: k.id,
  name: k.name,
  role: k.role,
  prefix: k.prefix,
  created_at: k.created_at,
  last_used_at: k.last_used_at,
});

/** Stores a key (given, e.g. SIFT_ADMIN_KEY, or freshly generated) and returns it once. */
export async function createApiKey(
  svc: Services,
  teamId: string,
  input: { name: string; role?: Principal['role']; key?: string },
): Promise<CreatedApiKey> {
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
  await svc.records.put({ ...apiKeyItem(hash), gsi1pk: teamKeysIndex(teamId), gsi1sk: byCreation(stored.created_at, stored.id) }, stored, {
    ifAbsent: true,
  });
  return { ...view(stored), key };
}

/** True when this exact key value is already stored (used to seed SIFT_ADMIN_KEY idempotently). */
export async function apiKeyExists(svc: Services, key: string): Promise<boolean> {
  const { pk, sk } = apiKeyItem(sha256Hex(key));
  return (await svc.records.get<StoredKey>(pk, sk)) !== undefined;
}

export async function listApiKeys(svc: Services, teamId: string): Promise<ApiKeyView[]> {
  const keys = await svc.records.queryAll<StoredKey>(teamKeysIndex(teamId), { index: 'gsi1' });
  return keys.filter((k) => !k.revoked_at).map(view);
}

async function findTeamKey(svc: Services, teamId: string, keyId: string): Promise<StoredKey> {
  const keys = await svc.records.queryAll<StoredKey>(teamKeysIndex(teamId), { index: 'gsi1' });
  const found = keys.find((k) => k.id === keyId && !k.revoked_at);
  if (!found) throw new NotFoundError(`API key '${keyId}' not found`);
  return found;
}

/** Revocation is a conditional write on the key's own item, so the very next request sees it. */
export async function revokeApiKey(svc: Services, teamId: string, keyId: string): Promise<void> {
  const found = await findTeamKey(svc, teamId, keyId);
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
  if (!keys.some((k) => k.id === session.key_id && !k.revoked_at)) throw new UnauthorizedError('Invalid or expired session token');
  return { team_id: session.team_id, key_id: session.key_id, role: session.role, via: 'session' };
}

export async function createSession(svc: Services, principal: Principal): Promise<{ token: string; expires_at: string }> {
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
 * SPEC "Authentication": `X-API-Key` everywhere; on the compatible `/v1/*` routes also
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
  const authorization = req.headers['authorization']?.trim();
  if (authorization && req.path.startsWith('/v1/')) {
    const match = /^Bearer\s+(\S+)$/i.exec(authorization);
    if (!match) throw new UnauthorizedError('Authorization header must be "Bearer <API key or session token>"');
    const token = match[1] as string;
    return token.startsWith(API_KEY_PREFIX) ? principalForKey(svc, token) : principalForSession(svc, token);
  }
  throw new UnauthorizedError('Missing API key: send it in the X-API-Key header');
}

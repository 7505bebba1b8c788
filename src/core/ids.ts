import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { monotonicFactory } from 'ulid';

/** API keys are `svc_sk_` + 32 random bytes (base64url); only their sha256 is stored. */
export const API_KEY_PREFIX = 'svc_sk_';
/** Session tokens deliberately do not share the API-key prefix (docs/reference/decisions.md#authentication rule 3). */
export const SESSION_TOKEN_PREFIX = 'sess_';

const nextUlid = monotonicFactory();

export const newUuid = (): string => randomUUID();
/** Time-ordered ids for sort keys (inference history is read newest first). */
export const newUlid = (): string => nextUlid();
export const newApiKey = (): string => API_KEY_PREFIX + randomBytes(32).toString('base64url');
export const newSessionToken = (): string => SESSION_TOKEN_PREFIX + randomBytes(32).toString('base64url');
export const sha256Hex = (value: string | Buffer): string => createHash('sha256').update(value).digest('hex');

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID_RE.test(value);

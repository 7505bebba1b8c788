import createClient, { type Middleware } from 'openapi-fetch';
import type { paths } from './schema';

/** The API key the user signed in with; kept for this browser tab only (sessionStorage). */
const KEY_STORAGE = 'sift.apiKey';
export const storedKey = () => sessionStorage.getItem(KEY_STORAGE);
export const storeKey = (key: string | null) =>
  key ? sessionStorage.setItem(KEY_STORAGE, key) : sessionStorage.removeItem(KEY_STORAGE);

/**
 * Where the API lives: the same origin locally (the server serves /console), or the `apiUrl` of the
 * config.json that the CDK deployment writes next to the assets on AWS.
 */
export let apiBase = location.origin;
export async function loadConfig(): Promise<void> {
  try {
    const res = await fetch('./config.json', { cache: 'no-store' });
    if (res.ok) apiBase = String(((await res.json()) as { apiUrl?: string }).apiUrl ?? apiBase).replace(/\/$/, '');
  } catch {
    /* no config: same origin */
  }
  api = createClient<paths>({ baseUrl: apiBase });
  api.use(auth);
}

/** An API error with the server's `detail` (the field it names included). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    detail: string,
  ) {
    super(detail);
  }
}

export function errorDetail(body: unknown, status: number): string {
  const detail = (body as { detail?: unknown } | undefined)?.detail;
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail))
    return detail
      .map((d: { loc?: unknown[]; msg?: string }) => `${(d.loc ?? []).join('.')}: ${d.msg ?? ''}`)
      .join('; ');
  return `HTTP ${status}`;
}

const auth: Middleware = {
  onRequest({ request }) {
    const key = storedKey();
    if (key) request.headers.set('x-api-key', key); // docs/reference/decisions.md#authentication: X-API-Key on every route
    return request;
  },
  onResponse({ request, response }) {
    // only when the key still stored is the one refused (not an older request's)
    if (response.status === 401 && storedKey() && request.headers.get('x-api-key') === storedKey()) {
      storeKey(null);
      dispatchEvent(new Event('sift:signed-out'));
    }
    return response;
  },
};

/** The typed client (types generated from GET /openapi.json into schema.d.ts); set by loadConfig. */
export let api = createClient<paths>({ baseUrl: apiBase });
api.use(auth);

/** Unwraps an openapi-fetch result: the data, or an ApiError carrying the server's detail. */
export async function must<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok || data === undefined) throw new ApiError(response.status, errorDetail(error, response.status));
  return data;
}

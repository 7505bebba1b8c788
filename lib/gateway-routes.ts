/**
 * The API Gateway methods the REST API needs, derived from the service's route table
 * (src/http/routeTable.ts, data only) so the gateway can never disagree with the app about a
 * route's credentials, limit or serving process.
 *
 * API Gateway sends a request to the most specific resource and never falls back to a parent's
 * `{proxy+}`, so a route gets a method of its own only where the `ANY {proxy+}` fallback it would
 * otherwise reach (control-plane Lambda, API-key authorizer, stage default throttle) would treat it
 * differently: public routes, data-plane routes and routes with their own limit class. Then every
 * other app method on such a path gets one too, and lib/constructs/api-routes.ts adds the
 * fallbacks. test/cdk/routeTable.test.ts resolves every registered route against the template.
 */
import { perMinuteLimit, type LimitClass } from '../src/core/limits';
import { ROUTE_TABLE, type RouteEntry } from '../src/http/routeTable';

export interface GatewayMethod {
  /** API Gateway path syntax: `{name}` parameters, `{proxy+}` for the rest of the path. */
  readonly path: string;
  readonly method: string;
  /** `key-or-bearer`: the compatible /v1/ routes, which also take `Authorization: Bearer` (src/core/apiKeys.ts `authenticate`). */
  readonly access: 'public' | 'key' | 'key-or-bearer';
  readonly plane: 'control' | 'data';
  /** The route's own per-minute limit (docs/reference/decisions.md#limits); unset = the stage default. */
  readonly perMinute?: number;
}

/** The methods every route of `table` needs (internal routes are never exposed). */
export function gatewayMethods(table: Record<string, RouteEntry> = ROUTE_TABLE): GatewayMethod[] {
  const all = Object.entries(table)
    .filter(([, e]) => e.auth !== 'internal')
    .map(([key, e]) => toGateway(key, e));
  const own = all.filter((m) => m.access === 'public' || m.plane === 'data' || m.perMinute !== undefined);
  const methods = collapseSiblings(own, all);
  for (const m of methods) {
    if (/\{(?!proxy\+)/.test(m.path))
      throw new Error(`${m.method} ${m.path}: a route with its own gateway method cannot have path parameters`);
  }
  // a resource with a method of its own answers only its own methods: give the app's others one
  const paths = new Set(methods.map((m) => m.path));
  const extra = all.filter(
    (m) => paths.has(m.path) && !methods.some((x) => x.path === m.path && x.method === m.method),
  );
  return [...methods, ...extra];
}

/** Whether the app serves anything below `path` (gateway syntax): such a resource needs a `{proxy+}` fallback. */
export function hasRoutesBelow(path: string, table: Record<string, RouteEntry> = ROUTE_TABLE): boolean {
  return Object.entries(table).some(
    ([key, e]) => e.auth !== 'internal' && toGateway(key, e).path.startsWith(`${path}/`),
  );
}

function toGateway(key: string, e: RouteEntry): GatewayMethod {
  const [method, appPath] = key.split(' ') as [string, string];
  const path = appPath.replace(/:(\w+)/g, '{$1}').replace(/\/\*$/, '/{proxy+}');
  const access = e.auth === 'public' ? 'public' : path.startsWith('/v1/') ? 'key-or-bearer' : 'key';
  const limit: LimitClass | undefined = e.limit && e.limit !== 'default' ? e.limit : undefined;
  return { path, method, access, plane: e.plane ?? 'control', ...(limit ? { perMinute: perMinuteLimit(limit) } : {}) };
}

/**
 * Several methods under one parent that all routes below it share exactly (method, access, plane,
 * limit) become one `{proxy+}` method: `/gliner-2/*` is one method, not five resources.
 */
function collapseSiblings(own: GatewayMethod[], all: GatewayMethod[]): GatewayMethod[] {
  const parentOf = (path: string): string => path.slice(0, path.lastIndexOf('/'));
  const same = (a: GatewayMethod, b: GatewayMethod): boolean =>
    a.method === b.method && a.access === b.access && a.plane === b.plane && a.perMinute === b.perMinute;
  const out: GatewayMethod[] = [];
  const done = new Set<GatewayMethod>();
  for (const m of own) {
    if (done.has(m)) continue;
    const parent = parentOf(m.path);
    const below = all.filter((x) => x.path.startsWith(`${parent}/`));
    if (parent !== '' && below.length > 1 && below.every((x) => same(x, m) && own.includes(x))) {
      for (const x of below) done.add(x);
      out.push({ ...m, path: `${parent}/{proxy+}` });
    } else {
      done.add(m);
      out.push(m);
    }
  }
  return out;
}

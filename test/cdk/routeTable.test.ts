/**
 * The route table, the routes the app serves and the API the stack deploys agree, each side taken
 * from the real code: the app's side from `allRoutes()` + `internalRoutes()` (the registered
 * `route()` specs), the stack's from the synthesized template. Every registered route is resolved
 * the way API Gateway resolves a request (most specific resource, no fallback to a parent's
 * `{proxy+}`) and must find a method with the route's credentials, serving process and throttle;
 * every method the stack deploys must serve some route.
 */
import { throttleFor } from '../../lib/api-stack';
import { SPEC_DEFAULT_PER_MINUTE } from '../../lib/config';
import { perMinuteLimit } from '../../src/core/limits';
import { ROUTE_TABLE, type RouteEntry } from '../../src/http/routeTable';
import { allRoutes } from '../../src/http/routes';
import { internalRoutes } from '../../src/http/routes/internal';
import { json, route, type RouteSpec } from '../../src/http/types';
import { buildApp, resourcesOfType } from './helpers';

const built = buildApp();
const t = built.template(built.stacks.api);
const registered: RouteSpec[] = [...allRoutes(), ...internalRoutes()];
const exposed = registered.filter((r) => r.auth !== 'internal');

type Props = Record<string, unknown>;
const resources = resourcesOfType(t, 'AWS::ApiGateway::Resource');
const methods = Object.entries(resourcesOfType(t, 'AWS::ApiGateway::Method')).map(([id, m]) => ({
  id,
  props: m.Properties as Props,
}));
const authorizerNames = Object.fromEntries(
  Object.entries(resourcesOfType(t, 'AWS::ApiGateway::Authorizer')).map(([id, a]) => [id, String(a.Properties?.Name)]),
);
const stage = Object.values(resourcesOfType(t, 'AWS::ApiGateway::Stage'))[0]!.Properties as {
  MethodSettings: Array<Record<string, unknown>>;
};

/** Resource id → its path part and parent (undefined parent: the root). */
const parentOf = (id: string): string | undefined => (resources[id]!.Properties!.ParentId as { Ref?: string }).Ref;
const childrenOf = (parent: string | undefined) => Object.keys(resources).filter((id) => parentOf(id) === parent);
const partOf = (id: string): string => String(resources[id]!.Properties!.PathPart);
const pathOf = (id: string | undefined): string => (id === undefined ? '' : `${pathOf(parentOf(id))}/${partOf(id)}`);

/** API Gateway's match for a concrete path: a static part first, then `{param}`, then a greedy `{proxy+}`. */
function resolve(path: string): string | undefined {
  let at: string | undefined;
  const parts = path.split('/').slice(1);
  for (let i = 0; i < parts.length; i++) {
    const kids = childrenOf(at);
    const next = kids.find((k) => partOf(k) === parts[i]) ?? kids.find((k) => /^\{\w+\}$/.test(partOf(k)));
    if (next) {
      at = next;
      continue;
    }
    return kids.find((k) => partOf(k) === '{proxy+}');
  }
  return at;
}

function methodFor(resourceId: string, httpMethod: string) {
  const on = methods.filter((m) => (m.props.ResourceId as { Ref?: string }).Ref === resourceId);
  return on.find((m) => m.props.HttpMethod === httpMethod) ?? on.find((m) => m.props.HttpMethod === 'ANY');
}

function throttleOf(resourcePath: string, httpMethod: string): unknown {
  const key = `/${resourcePath.replace(/\//g, '~1')}`;
  const s =
    stage.MethodSettings.find((x) => x.ResourcePath === key && x.HttpMethod === httpMethod) ??
    stage.MethodSettings.find((x) => x.ResourcePath === '/*');
  return { rateLimit: s?.ThrottlingRateLimit, burstLimit: s?.ThrottlingBurstLimit };
}

/** A concrete request path for a route: `:param` → a value, `*` → two segments. */
const concrete = (path: string): string => path.replace(/:\w+/g, 'x1').replace(/\*$/, 'a/b');

describe('route table', () => {
  it('has exactly one entry per registered route, and each route takes its auth and limit from it', () => {
    const keys = registered.map((r) => `${r.method} ${r.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(keys.sort()).toEqual(Object.keys(ROUTE_TABLE).sort());
    for (const r of registered) {
      const entry = (ROUTE_TABLE as Record<string, RouteEntry>)[`${r.method} ${r.path}`]!;
      expect({ route: `${r.method} ${r.path}`, auth: r.auth, limit: r.limit }).toEqual({
        route: `${r.method} ${r.path}`,
        auth: entry.auth,
        limit: entry.limit,
      });
    }
  });

  it('refuses a route that has no entry', () => {
    expect(() =>
      route({
        method: 'GET',
        path: '/not-in-the-table',
        tag: 't',
        summary: 's',
        responses: {},
        handler: async () => json(200, {}),
      }),
    ).toThrow('Route GET /not-in-the-table has no entry in src/http/routeTable.ts');
  });
});

describe('every route the app serves is deployed as the app declares it', () => {
  const scale = built.config.throttleScale;
  it.each(exposed.map((r) => [`${r.method} ${r.path}`, r] as const))('%s', (_name, r) => {
    const entry = (ROUTE_TABLE as Record<string, RouteEntry>)[`${r.method} ${r.path}`]!;
    const resourceId = resolve(concrete(r.path));
    expect({ resolved: resourceId !== undefined }).toEqual({ resolved: true });
    const m = methodFor(resourceId!, r.method);
    expect({ method: m !== undefined }).toEqual({ method: true });
    const integration = m!.props.Integration as { Type: string; Uri?: unknown };
    const authorizer = authorizerNames[(m!.props.AuthorizerId as { Ref?: string } | undefined)?.Ref ?? ''];
    const limit = r.limit && r.limit !== 'default' ? perMinuteLimit(r.limit) : SPEC_DEFAULT_PER_MINUTE;
    expect({
      authorization: m!.props.AuthorizationType,
      authorizer,
      integration: integration.Type,
      throttle: throttleOf(pathOf(resourceId), String(m!.props.HttpMethod)),
    }).toEqual({
      authorization: r.auth === 'public' ? 'NONE' : 'CUSTOM',
      // the compatible /v1/ routes also take `Authorization: Bearer` (src/core/apiKeys.ts authenticate)
      authorizer: r.auth === 'public' ? undefined : r.path.startsWith('/v1/') ? 'api-key-or-bearer' : 'api-key',
      integration: entry.plane === 'data' ? 'HTTP_PROXY' : 'AWS_PROXY',
      throttle: throttleFor(limit, scale),
    });
  });
});

describe('every method the stack deploys serves a route', () => {
  const fallback = (path: string, method: string) => method === 'ANY' && path.endsWith('/{proxy+}');
  it('has no method for a route the app does not have (fallbacks and CORS preflights aside)', () => {
    const dead = methods
      .map((m) => ({ path: pathOf((m.props.ResourceId as { Ref?: string }).Ref), method: String(m.props.HttpMethod) }))
      .filter((m) => m.method !== 'OPTIONS' && !fallback(m.path, m.method))
      .filter(
        (m) =>
          !exposed.some(
            (r) => r.method === m.method && resolve(concrete(r.path)) === resolve(m.path.replace('{proxy+}', 'x1')),
          ),
      );
    expect(dead).toEqual([]);
  });
});

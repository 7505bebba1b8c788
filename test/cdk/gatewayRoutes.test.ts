/**
 * The rules that turn route table entries into API Gateway methods (lib/gateway-routes.ts), on
 * small tables; test/cdk/routeTable.test.ts checks the real table against the synthesized stack.
 */
import { gatewayMethods, hasRoutesBelow } from '../../lib/gateway-routes';
import type { RouteEntry } from '../../src/http/routeTable';

const keys = (table: Record<string, RouteEntry>) =>
  gatewayMethods(table).map((m) => `${m.method} ${m.path} ${m.access} ${m.plane} ${m.perMinute ?? '-'}`);

describe('gatewayMethods', () => {
  it('leaves plain keyed control-plane routes to the {proxy+} fallback', () => {
    expect(
      keys({
        'GET /things': { auth: 'key' },
        'DELETE /things/:id': { auth: 'key' },
        'POST /teams': { auth: 'operator' },
      }),
    ).toEqual([]);
  });

  it('gives public, data-plane and limited routes a method of their own, with their credentials and limit', () => {
    expect(
      keys({
        'GET /health': { auth: 'public' },
        'POST /inference': { auth: 'key', limit: 'inference', plane: 'data' },
        'POST /v1/messages': { auth: 'key', limit: 'compat', plane: 'data' },
        'POST /jobs': { auth: 'key', limit: 'training_create' },
      }),
    ).toEqual([
      'GET /health public control -',
      'POST /inference key data 5000',
      'POST /v1/messages key-or-bearer data 5000',
      'POST /jobs key control 20',
    ]);
  });

  it('gives the other methods of such a path a method too (API Gateway never falls back to a parent {proxy+})', () => {
    expect(
      keys({
        'POST /jobs': { auth: 'key', limit: 'training_create' },
        'GET /jobs': { auth: 'key' },
        'GET /jobs/:id': { auth: 'key' },
      }),
    ).toEqual(['POST /jobs key control 20', 'GET /jobs key control -']);
  });

  it('makes several identical routes under one parent a single {proxy+} method, but not when the parent serves anything else', () => {
    const same = { auth: 'key', limit: 'gliner', plane: 'data' } as const;
    expect(keys({ 'POST /g/a': same, 'POST /g/b': same })).toEqual(['POST /g/{proxy+} key data 15000']);
    expect(keys({ 'POST /g/a': same, 'POST /g/b': same, 'GET /g/list': { auth: 'key' } })).toEqual([
      'POST /g/a key data 15000',
      'POST /g/b key data 15000',
    ]);
    expect(keys({ 'POST /g/a': same })).toEqual(['POST /g/a key data 15000']);
  });

  it('maps a trailing * to {proxy+} and never exposes internal routes', () => {
    expect(
      keys({ 'GET /v1/models/*': { auth: 'public' }, 'POST /internal/tasks/x': { auth: 'internal', plane: 'data' } }),
    ).toEqual(['GET /v1/models/{proxy+} public control -']);
  });

  it('refuses a method of its own with path parameters (it would need its own resource tree)', () => {
    expect(() => gatewayMethods({ 'POST /jobs/:id/run': { auth: 'key', limit: 'generate' } })).toThrow(
      /POST \/jobs\/\{id\}\/run/,
    );
  });

  it('knows which resources have routes below them (they need a {proxy+} fallback)', () => {
    const table = { 'GET /jobs/:id': { auth: 'key' }, 'POST /internal/tasks/x': { auth: 'internal' } } as const;
    expect([
      hasRoutesBelow('/jobs', table),
      hasRoutesBelow('/jobs/{id}', table),
      hasRoutesBelow('/internal', table),
    ]).toEqual([true, false, false]);
  });
});

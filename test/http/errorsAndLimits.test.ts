import type { RouteSpec } from '../../src/http/types';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start({ config: { maxBodyBytes: 64 * 1024 } });
});
afterAll(async () => stack.stop());

describe('errors (docs/reference/decisions.md#errors)', () => {
  it('answers malformed JSON with 422 naming the body', async () => {
    const res = await stack.call('POST', '/projects', {
      rawBody: '{"name": ',
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/Malformed JSON/);
    expect(res.body.errors).toEqual([expect.objectContaining({ loc: ['body'], type: 'json_invalid' })]);
  });

  it('answers wrong types with 422 naming each field', async () => {
    const res = await stack.call('POST', '/core/training-jobs', {
      body: { model_name: 5, base_model: 'fastino/gliner2-base-v1', datasets: 'x' },
    });
    expect(res.status).toBe(422);
    const locs = res.body.errors.map((e: any) => e.loc.join('.'));
    expect(locs).toEqual(expect.arrayContaining(['body.model_name', 'body.datasets']));
  });

  it('rejects unknown fields instead of dropping them', async () => {
    const res = await stack.call('POST', '/projects', { body: { name: 'p1', colour: 'red' } });
    expect(res.status).toBe(422);
    expect(res.body.errors[0]).toMatchObject({ loc: ['body', 'colour'], type: 'extra_forbidden' });
  });

  it('rejects a body on a route that takes none', async () => {
    const res = await stack.call('POST', '/auth/sessions', { body: { unexpected: true } });
    expect(res.status).toBe(422);
  });

  it('rejects a missing body, a non-JSON content type and an oversized body', async () => {
    expect((await stack.call('POST', '/projects', {})).status).toBe(422);
    const form = await stack.call('POST', '/projects', {
      rawBody: 'name=x',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(form.status).toBe(415);
    const big = await stack.call('POST', '/projects', { body: { name: 'p', description: 'x'.repeat(70 * 1024) } });
    expect(big.status).toBe(413);
    expect(big.body.detail).toMatch(/limit/);
  });

  it('answers unknown paths with 404, and compat paths without /v1 with 404 and a hint', async () => {
    const res = await stack.call('GET', '/nope');
    expect(res.status).toBe(404);
    expect(res.body.detail).toBeDefined();
    const models = await stack.call('GET', '/models', { key: null });
    expect(models.status).toBe(404);
  });

  it('answers a wrong method with 405 and Allow', async () => {
    const res = await stack.call('PUT', '/projects');
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toContain('GET');
  });

  it('puts x-request-id and rate-limit headers on every response, errors included', async () => {
    for (const res of [
      await stack.call('GET', '/projects'),
      await stack.call('GET', '/nope'),
      await stack.call('GET', '/projects', { key: null }),
    ]) {
      expect(res.headers.get('x-request-id')).toMatch(/.{8,}/);
      expect(res.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/);
      expect(res.headers.get('x-ratelimit-reset')).toMatch(/^\d+$/);
    }
    const ok = await stack.call('GET', '/projects');
    expect(Number(ok.headers.get('x-ratelimit-limit'))).toBe(20_000);
    expect(Number(ok.headers.get('x-ratelimit-remaining'))).toBeLessThan(20_000);
    expect(Number(ok.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0);
    const echoed = await stack.call('GET', '/projects', { headers: { 'x-request-id': 'client-supplied-id-123' } });
    expect(echoed.headers.get('x-request-id')).toBe('client-supplied-id-123');
  });

  it('never leaks internals on a 500', async () => {
    const { SiftApp } = await import('../../src/http/app');
    const { silentLogger } = await import('../../src/http/logger');
    // a spec written out, not route(): /boom is no route of the service, so it has no route table entry
    const boom: RouteSpec = {
      method: 'GET',
      path: '/boom',
      tag: 't',
      summary: 's',
      auth: 'public',
      responses: {},
      handler: async () => {
        throw new Error('secret stack detail');
      },
    };
    const app = new SiftApp(stack.svc, [boom], silentLogger);
    const res = await app.handle({ method: 'GET', path: '/boom', query: {}, headers: {}, sourceIp: '127.0.0.1' });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).not.toContain('secret');
  });
});

describe('per-endpoint limits (docs/reference/decisions.md#limits)', () => {
  it('limits POST /core/training-jobs to 20 per minute per team, then 429 with Retry-After', async () => {
    const team = await stack.newTeam('limited');
    const statuses: number[] = [];
    let last: any;
    for (let i = 0; i < 21; i += 1) {
      last = await stack.call('POST', '/core/training-jobs', {
        key: team.key,
        body: { model_name: 'm', base_model: 'nope', datasets: [{ name: 'd' }] },
      });
      statuses.push(last.status);
    }
    expect(statuses.slice(0, 20).every((s) => s === 422)).toBe(true);
    expect(last.status).toBe(429);
    expect(Number(last.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(last.headers.get('x-ratelimit-remaining')).toBe('0');
    expect(last.body.detail).toMatch(/Rate limit/);
    // Another team has its own budget.
    const other = await stack.newTeam('unlimited');
    expect(
      (
        await stack.call('POST', '/core/training-jobs', {
          key: other.key,
          body: { model_name: 'm', base_model: 'nope', datasets: [{ name: 'd' }] },
        })
      ).status,
    ).toBe(422);
    // Other endpoints of the same team are unaffected.
    expect((await stack.call('GET', '/projects', { key: team.key })).status).toBe(200);
  });
});

/**
 * CORS for a console on another origin, in every runtime that answers a browser: the api Lambda's
 * API Gateway adapter and the ECS gateway's node:http server (its real entry, serveGateway, with the
 * environment its task gets). The AWS rule: with proxy integrations the backend sends the CORS
 * headers ("CORS for REST APIs in API Gateway",
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/how-to-cors.html; src/http/cors.ts).
 * The bundled api Lambda is checked by test/aws/lambdas.rehearsal.test.ts, a real browser by
 * test/console/crossOrigin.test.ts.
 */
import { SiftApp } from '../../src/http/app';
import { CORS_ALLOW_HEADERS, CORS_EXPOSE_HEADERS, parseOrigins } from '../../src/http/cors';
import { silentLogger } from '../../src/http/logger';
import { allRoutes } from '../../src/http/routes';
import { fromApiGatewayEvent, toApiGatewayResult } from '../../src/runtimes/lambda/apiGateway';
import { type Gateway, serveGateway } from '../../src/runtimes/gateway/server';
import { apiGatewayEvent, emulatorEnv } from '../helpers/lambdaEvents';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';

const CONSOLE = 'https://console.example.com';
const OTHER = 'https://evil.example.net';

let stack: TestStack;
let app: SiftApp;
let gateway: Gateway;
let gatewayUrl: string;
const savedEnv = { ...process.env };

beforeAll(async () => {
  stack = await TestStack.start({ config: { consoleOrigins: [CONSOLE] } });
  app = new SiftApp(stack.svc, allRoutes(), silentLogger);
  // the gateway task's environment (lib/inference-stack.ts) pointed at this stack's emulators
  Object.assign(process.env, await emulatorEnv(stack.svc), {
    SIFT_CONSOLE_ORIGINS: CONSOLE,
    POWERTOOLS_LOG_LEVEL: 'SILENT',
  });
  gateway = serveGateway(0);
  if (!gateway.server.listening) await new Promise((ok) => gateway.server.once('listening', ok));
  const address = gateway.server.address() as { port: number };
  gatewayUrl = `http://127.0.0.1:${address.port}`;
}, 60_000);

afterAll(async () => {
  gateway?.server.closeAllConnections();
  await gateway?.shutdown();
  process.env = savedEnv;
  await stack?.stop();
});

/** One request through the api Lambda's adapter (API Gateway proxy event in, proxy result out). */
async function viaLambda(method: string, path: string, headers: Record<string, string>, key: string | null = null) {
  const result = await toApiGatewayResult(
    await app.handle(fromApiGatewayEvent(apiGatewayEvent(method, path, { key, headers }))),
  );
  return { status: result.statusCode, headers: result.headers as Record<string, string> };
}

/** One request to the gateway's node:http server, headers lower-cased as node sends them. */
async function viaGateway(method: string, path: string, headers: Record<string, string>, body?: string) {
  const res = await fetch(gatewayUrl + path, { method, headers, ...(body !== undefined ? { body } : {}) });
  await res.arrayBuffer();
  return { status: res.status, headers: Object.fromEntries(res.headers) };
}

const allowedHeaders = (origin: string) => ({
  'access-control-allow-origin': origin,
  vary: expect.stringMatching(/\bOrigin\b/),
  'access-control-expose-headers': CORS_EXPOSE_HEADERS.join(', '),
});

describe.each([
  ['the api Lambda adapter', viaLambda],
  ['the ECS gateway (serveGateway)', viaGateway],
] as const)('%s', (_name, call) => {
  const keyed = (origin: string) => ({ Origin: origin, 'X-API-Key': OPERATOR_KEY });

  it('echoes an allowed Origin, varies on Origin and exposes the headers clients read', async () => {
    const res = await call('GET', '/api-keys', keyed(CONSOLE));
    expect(res.status).toBe(200);
    expect(res.headers).toMatchObject(allowedHeaders(CONSOLE));
    expect(res.headers['access-control-allow-credentials']).toBeUndefined();
  });

  it('gives an origin not on the list no Access-Control-Allow-Origin (still Vary: Origin)', async () => {
    const res = await call('GET', '/api-keys', keyed(OTHER));
    expect(res.status).toBe(200);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
    expect(res.headers.vary).toMatch(/\bOrigin\b/);
  });

  it.each([
    ['401 (a wrong key)', 'GET', '/api-keys', { 'X-API-Key': 'svc_sk_not-a-real-key' }, 401],
    ['404 (no route)', 'GET', '/no-such-route', {}, 404],
    ['405 (a method the route has not)', 'DELETE', '/api-keys', { 'X-API-Key': OPERATOR_KEY }, 405],
  ] as const)('carries the headers on an error: %s', async (_what, method, path, headers, status) => {
    const res = await call(method, path, { Origin: CONSOLE, ...headers });
    expect(res.status).toBe(status);
    expect(res.headers).toMatchObject(allowedHeaders(CONSOLE));
  });

  it('answers a preflight from an allowed origin with the methods and headers the API takes', async () => {
    const res = await call('OPTIONS', '/core/training-jobs', {
      Origin: CONSOLE,
      'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': 'content-type, x-api-key',
    });
    expect(res.status).toBe(204);
    expect(res.headers).toMatchObject({
      'access-control-allow-origin': CONSOLE,
      'access-control-allow-methods': 'GET, POST, PUT, PATCH, DELETE',
      'access-control-allow-headers': CORS_ALLOW_HEADERS.join(', '),
    });
    const refused = await call('OPTIONS', '/core/training-jobs', {
      Origin: OTHER,
      'Access-Control-Request-Method': 'POST',
    });
    expect(refused.headers['access-control-allow-origin']).toBeUndefined();
  });
});

describe('the node:http adapter’s own answers', () => {
  it('a body over the limit (413, answered before the app) carries the headers too', async () => {
    const res = await viaGateway(
      'POST',
      '/gliner-2/entities',
      { Origin: CONSOLE, 'X-API-Key': OPERATOR_KEY, 'content-type': 'application/json' },
      'x'.repeat(stack.svc.config.maxBodyBytes + 1),
    );
    expect(res.status).toBe(413);
    expect(res.headers).toMatchObject(allowedHeaders(CONSOLE));
  });
});

describe('the origin list (SIFT_CONSOLE_ORIGINS, cdk.json consoleOrigins)', () => {
  it('takes exact origins, comma-separated, once each', () => {
    expect(parseOrigins(' https://console.example.com ,http://localhost:5173,,https://console.example.com')).toEqual([
      'https://console.example.com',
      'http://localhost:5173',
    ]);
    expect(parseOrigins('')).toEqual([]);
  });

  it.each([
    '*',
    'null',
    'https://console.example.com/',
    'https://console.example.com/app',
    'console.example.com',
    'ftp://x.example.com',
    'https://Console.example.com',
    'https://console.example.com:443',
  ])('refuses %s, which no browser sends as an Origin', (entry) =>
    expect(() => parseOrigins(entry)).toThrow(/not an exact origin/),
  );
});

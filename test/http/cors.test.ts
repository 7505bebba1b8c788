/**
 * CORS for a console on another origin, in every runtime that answers a browser: the api Lambda's
 * API Gateway adapter and the ECS gateway's node:http server (its real entry, serveGateway, with the
 * environment its task gets). The AWS rule: with proxy integrations the backend sends the CORS
 * headers ("CORS for REST APIs in API Gateway",
 * https://docs.aws.amazon.com/apigateway/latest/developerguide/how-to-cors.html; src/http/cors.ts).
 * Then the console as it runs on AWS, in a real browser (Debian's Chromium through playwright-core):
 * loaded from one origin (CloudFront there; here a second server on another port serving the same
 * build and a config.json naming the API, as lib/constructs/console-hosting.ts writes it) and calling
 * the API on another. The browser enforces CORS, so that part fails unless the API's responses,
 * errors included, carry the console's origin. The bundled api Lambda is checked by
 * test/aws/lambdas.rehearsal.test.ts; test/console/console.test.ts drives the pages same-origin.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Anthropic from 'anthropic1';
import OpenAI from 'openai7';
import { type Browser, chromium } from 'playwright-core';
import { SiftApp } from '../../src/http/app';
import { CORS_ALLOW_HEADERS, CORS_EXPOSE_HEADERS, parseOrigins } from '../../src/http/cors';
import { silentLogger } from '../../src/http/logger';
import { allRoutes } from '../../src/http/routes';
import { CONSOLE_DIST, serveConsole } from '../../src/local/consoleAssets';
import { fromApiGatewayEvent, toApiGatewayResult } from '../../src/runtimes/lambda/apiGateway';
import { parseRequestTarget } from '../../src/runtimes/node/httpAdapter';
import { type Gateway, serveGateway } from '../../src/runtimes/gateway/server';
import { apiGatewayEvent, emulatorEnv } from '../helpers/lambdaEvents';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';

const CHROMIUM = process.env.SIFT_CHROMIUM ?? '/usr/bin/chromium';
if (!existsSync(CHROMIUM))
  throw new Error(
    `The console's browser tests need Chromium at ${CHROMIUM}: run \`node scripts/setup.mjs --for-tests\` or set SIFT_CHROMIUM`,
  );
if (!existsSync(`${CONSOLE_DIST}/index.html`))
  throw new Error(`The console is not built (${CONSOLE_DIST}): run \`node scripts/setup.mjs --for-tests\``);

const CONSOLE = 'https://console.example.com';
const OTHER = 'https://evil.example.net';

let stack: TestStack;
let app: SiftApp;
let gateway: Gateway;
let gatewayUrl: string;
let consoleServer: Server;
let consoleOrigin: string;
let browser: Browser;
const savedEnv = { ...process.env };

beforeAll(async () => {
  // the browser's console on its own origin: the built files, and a config.json naming the API (set below)
  let apiUrl = '';
  consoleServer = createServer((req, res) => {
    const target = parseRequestTarget(req.url ?? '/');
    if (target.path === '/console/config.json') {
      res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache' });
      res.end(JSON.stringify({ apiUrl }));
      return;
    }
    void Promise.resolve(serveConsole(req, res, target)).then((served) => {
      if (!served) res.writeHead(404).end();
    });
  });
  await new Promise<void>((ok) => consoleServer.listen(0, '127.0.0.1', ok));
  consoleOrigin = `http://127.0.0.1:${(consoleServer.address() as AddressInfo).port}`;
  stack = await TestStack.start({ config: { consoleOrigins: [CONSOLE, consoleOrigin] } });
  apiUrl = stack.url;
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
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  consoleServer?.closeAllConnections();
  await new Promise((ok) => consoleServer?.close(ok));
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

/**
 * The headers the official SDKs set, as a page that uses them with `dangerouslyAllowBrowser` sends
 * them: each one the Fetch standard does not safelist makes the browser ask for it in the preflight,
 * and one missing from Access-Control-Allow-Headers fails the call before it is sent. The SDKs'
 * own request builders are run here (a fetch that records instead of sending), so a new header in
 * an SDK release shows up as a failure.
 */
describe('the official SDKs used from a page on an allowed origin', () => {
  // CORS-safelisted request headers ("Fetch Standard" §CORS-safelisted request-header; Content-Type
  // only for form/text values) and User-Agent, which browsers do not let a page set.
  const SAFELISTED = new Set(['accept', 'accept-language', 'content-language', 'user-agent']);
  const recorded: Headers[] = [];
  const recordingFetch = async (_url: unknown, init?: { headers?: ConstructorParameters<typeof Headers>[0] }) => {
    recorded.push(new Headers(init?.headers));
    return new Response('{}', { status: 500, headers: { 'content-type': 'application/json' } });
  };

  async function headersOf(call: () => Promise<unknown>): Promise<string[]> {
    recorded.length = 0;
    await call().catch(() => undefined);
    expect(recorded.length).toBeGreaterThan(0);
    const names = new Set<string>();
    for (const headers of recorded) for (const [name] of headers) if (!SAFELISTED.has(name)) names.add(name);
    return [...names].sort();
  }

  const openai = new OpenAI({
    apiKey: 'k',
    baseURL: 'http://api.invalid/v1',
    dangerouslyAllowBrowser: true,
    maxRetries: 1,
    fetch: recordingFetch as typeof fetch,
  });
  const anthropic = new Anthropic({
    apiKey: 'k',
    baseURL: 'http://api.invalid',
    dangerouslyAllowBrowser: true,
    maxRetries: 1,
    fetch: recordingFetch as typeof fetch,
  });
  const chat = { model: 'm', messages: [{ role: 'user' as const, content: 'hi' }] };

  it.each([
    ['openai chat.completions.create', () => openai.chat.completions.create(chat)],
    ['openai chat.completions.stream', () => openai.chat.completions.stream(chat).finalChatCompletion()],
    ['openai responses.create', () => openai.responses.create({ model: 'm', input: 'hi' })],
    ['anthropic messages.create', () => anthropic.messages.create({ ...chat, max_tokens: 8 })],
    ['anthropic messages.stream', () => anthropic.messages.stream({ ...chat, max_tokens: 8 }).finalMessage()],
  ] as const)('%s: every header it sets passes the preflight', async (_what, call) => {
    const names = await headersOf(call);
    const res = await viaLambda('OPTIONS', '/v1/chat/completions', {
      Origin: CONSOLE,
      'Access-Control-Request-Method': 'POST',
      'Access-Control-Request-Headers': names.join(','),
    });
    expect(res.status).toBe(204);
    expect(res.headers['access-control-allow-origin']).toBe(CONSOLE);
    const allowed = new Set(res.headers['access-control-allow-headers']?.split(',').map((h) => h.trim().toLowerCase()));
    expect(names.filter((name) => !allowed.has(name))).toEqual([]);
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

describe('the console in a browser, on another origin than the API', () => {
  it('signs in and loads an authenticated page; the API’s 401 detail reaches the page', async () => {
    const { key } = await stack.newTeam('cross-origin');
    expect(new URL(stack.url).origin).not.toBe(consoleOrigin);
    const page = await browser.newPage();
    page.setDefaultTimeout(15_000);
    const apiCalls: string[] = [];
    page.on('request', (r) => {
      if (r.url().startsWith(stack.url)) apiCalls.push(`${r.method()} ${new URL(r.url()).pathname}`);
    });
    await page.goto(`${consoleOrigin}/console/`);
    // a wrong key: the server's 401 detail is shown, which the browser only lets the page read with CORS
    await page.getByLabel('API key').fill('svc_sk_not-a-real-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('input[aria-invalid="true"]').waitFor();
    // the real key: sign-in reads the team's usage, then the API keys page lists the team's keys
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
    await page.locator('tbody tr').first().waitFor();
    // the calls went to the API's origin, not the console's
    expect(apiCalls).toEqual(expect.arrayContaining(['GET /billing/usage/requests', 'GET /api-keys']));
    await page.close();
  }, 90_000);
});

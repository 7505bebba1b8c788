/**
 * The console as it runs on AWS: loaded from one origin (CloudFront there; here a second server on
 * another port serving the same build and a config.json naming the API, as lib/constructs/console-hosting.ts
 * writes it) and calling the API on another. A real browser (Debian's Chromium through
 * playwright-core) enforces CORS, so this fails unless the API's responses, errors included, carry
 * the console's origin (src/http/cors.ts). test/console/console.test.ts drives the pages same-origin.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';
import { CONSOLE_DIST, serveConsole } from '../../src/local/consoleAssets';
import { parseRequestTarget } from '../../src/runtimes/node/httpAdapter';
import { TestStack } from '../helpers/localStack';

const CHROMIUM = process.env.SIFT_CHROMIUM ?? '/usr/bin/chromium';
if (!existsSync(CHROMIUM))
  throw new Error(
    `The console's browser tests need Chromium at ${CHROMIUM}: run \`node scripts/setup.mjs --for-tests\` or set SIFT_CHROMIUM`,
  );
if (!existsSync(`${CONSOLE_DIST}/index.html`))
  throw new Error(`The console is not built (${CONSOLE_DIST}): run \`node scripts/setup.mjs --for-tests\``);

let stack: TestStack;
let consoleServer: Server;
let consoleOrigin: string;
let browser: Browser;
let key: string;

beforeAll(async () => {
  // the console's own origin: the built files, and a config.json pointing at the API (set below)
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
  stack = await TestStack.start({ config: { consoleOrigins: [consoleOrigin] } });
  apiUrl = stack.url;
  ({ key } = await stack.newTeam('cross-origin'));
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  consoleServer?.closeAllConnections();
  await new Promise((ok) => consoleServer?.close(ok));
});

it('signs in and loads an authenticated page from another origin; the API’s 401 detail reaches the page', async () => {
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

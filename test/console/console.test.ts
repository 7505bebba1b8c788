/**
 * The web console in a real browser (Debian's Chromium through playwright-core) against the local
 * service: sign in, create a key and see its secret once, read usage, upload a dataset and read its
 * validation report, run the playground, run and compare evaluations (the confusion matrix heat map),
 * give feedback in the inference history, promote and roll back a project's model, review a project's
 * uncertain traces and promote the adaptive cycle's candidate, revoke the key; axe-core on every page and keyboard use.
 * With SIFT_CONSOLE_SCREENSHOTS=<dir> it also writes each page at desktop and narrow widths there
 * (docs/console/ holds the committed ones).
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jest } from '@jest/globals';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { CONSOLE_DIST } from '../../src/local/consoleAssets';
import { REPO_ROOT } from '../../src/paths';
import { TestStack } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';

const CHROMIUM = process.env.SIFT_CHROMIUM ?? '/usr/bin/chromium';
const SHOTS = process.env.SIFT_CONSOLE_SCREENSHOTS;
const AXE = readFileSync(join(REPO_ROOT, 'node_modules', 'axe-core', 'axe.min.js'), 'utf8');

if (!existsSync(CHROMIUM))
  throw new Error(
    `The console's browser tests need Chromium at ${CHROMIUM}: run \`node scripts/setup.mjs --for-tests\` (it runs apt-get install chromium) or set SIFT_CHROMIUM`,
  );
if (!existsSync(join(CONSOLE_DIST, 'index.html')))
  throw new Error(`The console is not built (${CONSOLE_DIST}): run \`node scripts/setup.mjs --for-tests\``);

jest.setTimeout(240_000);

let stack: TestStack;
let browser: BrowserContext;
let page: Page;
let profile: string;
let adminKey: string;
let adminTeamId: string;
const loadTimes: Record<string, number> = {};

beforeAll(async () => {
  // three reviewed traces are enough for a cycle here (two to train on, one held out)
  stack = await TestStack.start({
    withModels: true,
    maxTrainingJobs: 1,
    workflowPollMs: 500,
    config: { adaptiveMinExamples: 3 },
  });
  ({ key: adminKey, teamId: adminTeamId } = await stack.newTeam('console'));
  profile = mkdtempSync(join(tmpdir(), 'sift-chromium-'));
  // a new empty profile (--user-data-dir, which playwright passes for a persistent context)
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
    viewport: { width: 1280, height: 900 },
  });
  const context = browser;
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: stack.service.url });
  page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (err) => {
    throw err;
  });
});

afterAll(async () => {
  await browser?.close();
  await stack?.stop();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (Object.keys(loadTimes).length)
    process.stdout.write(
      `console page load times (ms, local service, headless Chromium): ${JSON.stringify(loadTimes)}\n`,
    );
});

/** axe-core's WCAG 2 A/AA rules on the page as it is now: no serious or critical violation. */
async function expectAccessible(name: string) {
  // transitions mid-way (a modal fading in) blend colours: check the settled page. A transition that has not
  // started yet is not among getAnimations() (Mantine sets its target styles a frame after mounting), so the
  // page counts as settled only after three frames in a row with nothing running — a busy machine's slower
  // frames made a single check race the dialog's fade-in (a colour-contrast failure on its button)
  await page.evaluate(async () => {
    const g = globalThis as any;
    const frame = () => new Promise((resolve) => g.requestAnimationFrame(resolve));
    for (let quiet = 0, i = 0; quiet < 3 && i < 300; i++) {
      await frame();
      const running = g.document.getAnimations().filter((a: any) => a.playState === 'running');
      if (!running.length) quiet++;
      else {
        quiet = 0;
        await Promise.all(running.map((a: any) => a.finished.catch(() => undefined)));
      }
    }
  });
  // evaluated through the DevTools protocol: the page's CSP (no inline scripts) stays in force
  if (!(await page.evaluate(() => 'axe' in (globalThis as any)))) await page.evaluate(AXE);
  const violations = await page.evaluate(async () => {
    const g = globalThis as any; // the page's window (this project's TypeScript has no DOM lib)
    const r = await g.axe.run(g.document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21aa'] } });
    return r.violations
      .filter((v: any) => v.impact === 'serious' || v.impact === 'critical')
      .map((v: any) => `${v.id}: ${v.help} (${v.nodes.map((n: any) => n.target.join(' ')).join(', ')})`);
  });
  expect({ page: name, violations }).toEqual({ page: name, violations: [] });
}

async function screenshot(name: string) {
  if (!SHOTS) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.evaluate(() => (globalThis as any).scrollTo(0, 0)); // a full-page shot of a scrolled page draws the fixed header mid-way
  await page.screenshot({ path: join(SHOTS, `${name}-desktop.png`), fullPage: true });
  await page.setViewportSize({ width: 390, height: 844 });
  await page.waitForTimeout(500); // the app shell's navbar slides out (a CSS transition)
  await page.screenshot({ path: join(SHOTS, `${name}-narrow.png`), fullPage: true });
  await page.setViewportSize({ width: 1280, height: 900 });
  await page.waitForTimeout(500);
}

/** Opens a page by its route and waits for its heading; records the time to a rendered heading. */
async function open(route: string, heading: string) {
  const t0 = Date.now();
  await page.goto(`${stack.service.url}/console/#/${route}`);
  await page.reload(); // a full load of the page, not a hash change
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
  loadTimes[route] = Date.now() - t0;
}

const keyCalls = (key: string) =>
  fetch(`${stack.service.url}/api-keys`, { headers: { 'x-api-key': key } }).then((r) => r.status);

describe('the web console', () => {
  it('serves the built app at /console with a CSP, and sends /console to /console/', async () => {
    const res = await fetch(`${stack.service.url}/console`, { redirect: 'manual' });
    expect(res.status).toBe(308);
    expect(res.headers.get('location')).toBe('/console/');
    const index = await fetch(`${stack.service.url}/console/`);
    expect(index.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await index.text()).toContain('<div id="root">');
    expect((await fetch(`${stack.service.url}/console/../package.json`)).status).toBe(404);
  });

  it('refuses a wrong key on the sign-in form and signs in with a real one', async () => {
    const t0 = Date.now();
    await page.goto(`${stack.service.url}/console/`);
    await page.getByLabel('API key').waitFor();
    loadTimes['sign-in'] = Date.now() - t0;
    await expectAccessible('sign-in');
    await screenshot('sign-in');
    // what the server answers that key (the request the form makes), to find its detail on the page
    const refused = await fetch(`${stack.service.url}/billing/usage/requests?days=1`, {
      headers: { 'x-api-key': 'svc_sk_not-a-real-key' },
    });
    expect(refused.status).toBe(401);
    const detail = ((await refused.json()) as { detail: unknown }).detail;
    expect(typeof detail === 'string' && detail.length > 0).toBe(true);
    await page.getByLabel('API key').fill('svc_sk_not-a-real-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const field = page.locator('input[aria-invalid="true"]');
    await field.waitFor();
    // the server's detail, as the field's own error (the input names it in aria-describedby)
    const described = ((await field.getAttribute('aria-describedby')) ?? '').split(/\s+/).filter(Boolean);
    const texts = await Promise.all(described.map((id) => page.locator(`[id="${id}"]`).textContent()));
    expect(texts).toContain(detail);
    expect(await page.getByRole('heading', { name: 'API keys' }).count()).toBe(0);
    // keyboard only: type the key and press Enter
    await page.getByLabel('API key').fill(adminKey);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'API keys' }).waitFor();
  });

  let created = '';
  it('API keys: creates a key, shows its secret once with a copy button, lists it, and the key works', async () => {
    await open('settings/api-keys', 'API keys');
    await expectAccessible('api-keys');
    await page.getByRole('textbox', { name: /^Name/ }).fill('browser test key');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = page.getByTestId('new-key-secret');
    await secret.waitFor();
    created = (await secret.textContent()) ?? '';
    expect(created).toMatch(/^svc_sk_/);
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Copied' }).waitFor();
    expect(await page.evaluate(() => (globalThis as any).navigator.clipboard.readText())).toBe(created);
    const row = page.getByRole('row', { name: /browser test key/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('never');
    expect(await keyCalls(created)).toBe(200);
    await screenshot('api-keys');
    // shown once: after a reload only the prefix is on the page
    await page.reload();
    await page.getByRole('row', { name: /browser test key/ }).waitFor();
    expect(await page.content()).not.toContain(created);
  });

  it('Credits / usage: balance, cap, spend by day and the by-model and by-request tables', async () => {
    const billed = await stack.call('POST', '/gliner-2/entities', {
      key: adminKey,
      body: { model_id: 'sift/gliner2-mini-v1', text: 'Ada Lovelace lived in London.', entities: ['person'] },
    });
    expect(billed.status).toBe(200);
    await stack.service.svc.usage.flush(); // usage is buffered; the page reads what is stored
    await open('settings/credits', 'Credits and usage');
    await page
      .getByRole('table', { name: 'Usage by model' })
      .getByRole('row', { name: /sift\/gliner2-mini-v1/ })
      .waitFor();
    await page
      .getByRole('table', { name: 'Usage by request' })
      .getByRole('row', { name: /\/gliner-2\/entities|entities/ })
      .first()
      .waitFor();
    await page.getByTestId('stat-Credit balance').waitFor();
    await page.getByRole('heading', { name: 'Spend by day' }).waitFor();
    await page.getByRole('heading', { name: 'By request' }).waitFor();
    await expectAccessible('credits');
    await screenshot('credits');
  });

  it('Team settings: sets the default encoder that POST /gliner-2 (the gliner2 client) runs', async () => {
    await open('settings/team', 'Team settings');
    await expectAccessible('team');
    await page.locator('input').and(page.getByLabel('Default encoder')).fill('sift/gliner2-mini-v1');
    await page.keyboard.press('Escape'); // close the suggestions over the buttons
    await page.getByRole('button', { name: 'Save' }).click();
    await page.getByRole('status').filter({ hasText: 'Saved: sift/gliner2-mini-v1' }).waitFor();
    expect((await stack.call('GET', '/team', { key: adminKey })).body.default_encoder).toBe('sift/gliner2-mini-v1');
  });

  it('Datasets: uploads by the presigned PUT and shows the validation report with row numbers', async () => {
    await open('datasets', 'Datasets');
    await page.getByText('No datasets yet').waitFor();
    await expectAccessible('datasets-empty');
    const rows = [
      {
        text: 'Tim Cook works for Apple.',
        entities: [
          ['Tim Cook', 'person'],
          ['apple', 'company'],
        ],
      },
      { text: 'Satya Nadella runs Microsoft.', entities: [['Satya Nadella', 'person']] },
    ];
    await page.getByTestId('dataset-file').setInputFiles({
      name: 'people.jsonl',
      mimeType: 'application/jsonl',
      buffer: Buffer.from(`${rows.map((r) => JSON.stringify(r)).join('\n')}\n`),
    });
    await page.getByLabel('Dataset name').fill('people');
    await page.getByRole('button', { name: 'Upload' }).click();
    const report = page.getByTestId('validation-report');
    await report.waitFor({ timeout: 60_000 });
    const errorRow = report.getByRole('row', { name: /entities\[1\]\.text/ });
    expect(await errorRow.getByRole('cell').first().textContent()).toBe('1');
    await page.getByText('failed', { exact: true }).first().waitFor();
    await expectAccessible('datasets');
    await screenshot('datasets');
    // a good file: ready, with its heads and vocabulary
    await page.getByTestId('dataset-file').setInputFiles({
      name: 'people.jsonl',
      mimeType: 'application/jsonl',
      buffer: Buffer.from(`${JSON.stringify(rows[1])}\n`),
    });
    await page.getByRole('button', { name: 'Upload' }).click();
    await page.getByText('No problems found in 1 rows.').waitFor({ timeout: 60_000 });
    await page.getByText('Entity types: person').waitFor();
  });

  it('Training jobs: starts a small job from the form, streams its logs live and watches it finish', async () => {
    await open('training', 'Training jobs');
    await page.getByText('No training jobs yet').waitFor();
    await page.getByRole('textbox', { name: /^Model name/ }).fill('people-v1');
    await page
      .getByLabel(/^Base model/)
      .first()
      .click();
    await page.getByRole('option', { name: /sift\/gliner2-mini-v1/ }).click();
    await page
      .getByLabel(/^Dataset/)
      .first()
      .click();
    await page.getByRole('option', { name: /people v2/ }).click();
    await page.getByRole('textbox', { name: /^Epochs/ }).fill('1');
    await expectAccessible('training-form');
    await page.getByRole('button', { name: 'Start training' }).click();
    const status = page.getByTestId('job-status');
    await status.waitFor();
    // the SSE log stream shows the trainer's lines while it runs, then its end event
    await page
      .getByTestId('job-logs')
      .getByText(/"event"/)
      .first()
      .waitFor({ timeout: 180_000 });
    await page.getByText('Logs (ended: complete)').waitFor({ timeout: 240_000 });
    await page.getByTestId('job-status').getByText('complete', { exact: true }).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: 'Deploy' }).waitFor();
    await page
      .getByRole('table', { name: 'Training jobs' })
      .getByRole('row', { name: /people-v1.*complete/i })
      .waitFor();
    await expectAccessible('training-job');
    await screenshot('training');
  });

  it('Playground: runs the encoder with a structure and a relation, highlights the spans and shows both tables', async () => {
    await open('playground', 'Playground');
    const model = page.getByRole('textbox', { name: 'Model' });
    await model.waitFor();
    await page.getByLabel('Text', { exact: true }).fill('John Smith works for Acme Corp in Berlin.');
    await page.getByRole('button', { name: 'Add a structure' }).click();
    await page.getByLabel('Structure 1 name').fill('employment');
    await page.getByLabel('Name of structure 1 field 1').fill('employee');
    await page.getByLabel('Description of structure 1 field 1').fill('the person employed');
    await page.getByRole('button', { name: 'Add a field to structure 1' }).click();
    await page.getByLabel('Name of structure 1 field 2').fill('employer');
    await page.getByRole('combobox', { name: 'Relation types' }).fill('works for');
    await page.keyboard.press('Enter');
    // the request carries them as the API's schema takes them
    const request = page.locator('pre:visible', { hasText: '"relations":["works for"]' }); // the curl tab
    await request.waitFor();
    expect(await request.textContent()).toContain(
      '"employment":{"fields":[{"name":"employee","dtype":"str","description":"the person employed"},{"name":"employer","dtype":"str"}]}',
    );
    const thumb = page.getByRole('slider', { name: /Threshold/ });
    for (let i = 0; i < 6; i++) await thumb.press('ArrowLeft'); // 0.5 → 0.2, as the encoder tests use for relations
    await page.getByText('Threshold: 0.20').waitFor();
    await page.getByRole('button', { name: 'Run' }).click();
    const text = page.getByTestId('highlighted-text');
    await text.waitFor({ timeout: 120_000 });
    const marks = text.locator('mark');
    expect(await marks.count()).toBeGreaterThan(0);
    expect(await marks.first().getAttribute('aria-label')).toMatch(
      /: (person|location|organization), score [01]\.\d{3}$/,
    );
    const structure = page.getByRole('table', { name: 'Structure employment' });
    await structure.getByRole('columnheader', { name: 'employee' }).waitFor();
    await structure.getByRole('columnheader', { name: 'employer' }).waitFor();
    expect(await structure.getByRole('row').count()).toBeGreaterThan(1);
    const relations = page.getByRole('table', { name: 'Relations' });
    await relations
      .getByRole('row', { name: /^works for/ })
      .first()
      .waitFor();
    expect(
      await relations
        .getByRole('row', { name: /^works for/ })
        .first()
        .textContent(),
    ).toMatch(/0\.\d{3}$/);
    await page
      .getByRole('tablist', { name: 'Copy this request', exact: true })
      .getByRole('tab', { name: 'Python' })
      .click();
    await page.getByText('requests.post(').first().waitFor();
    await expectAccessible('playground');
    await screenshot('playground');
  });

  it('Playground: the chat streams a reply from the local decoder token by token, then shows its usage; stop and errors work', async () => {
    await open('playground', 'Playground');
    const chat = page.getByRole('region', { name: 'Chat with a decoder' });
    await chat.getByRole('combobox', { name: /^Decoder/ }).waitFor();
    expect(await chat.getByRole('combobox', { name: /^Decoder/ }).inputValue()).toMatch(/SmolLM2/);
    // record every text the reply shows while it streams
    await page.evaluate(() => {
      const g = globalThis as any;
      g.__replies = [];
      new g.MutationObserver(() => {
        const el = g.document.querySelectorAll('[data-testid="assistant-message"]');
        const last = el[el.length - 1];
        if (last) g.__replies.push(last.textContent);
      }).observe(g.document.querySelector('[data-testid="chat-messages"]'), {
        subtree: true,
        childList: true,
        characterData: true,
      });
    });
    await chat.getByRole('textbox', { name: 'Message', exact: true }).fill('Name three colours.');
    await chat.getByRole('button', { name: 'Send' }).click();
    await chat.getByRole('button', { name: 'Stop' }).waitFor(); // visible while it streams
    const usage = chat.getByTestId('chat-usage');
    await usage.waitFor({ timeout: 120_000 });
    expect(await usage.textContent()).toMatch(/^\d+ prompt \+ [1-9]\d* completion = \d+ tokens$/);
    const final = (await chat.getByTestId('assistant-message').last().textContent()) ?? '';
    expect(final.trim().length).toBeGreaterThan(0);
    const seen = [...new Set<string>(await page.evaluate(() => (globalThis as any).__replies))].filter(
      (t) => t && t !== '…',
    );
    expect(seen.length).toBeGreaterThan(2); // more than one update: streamed, not shown at once
    for (const t of seen) expect(final.startsWith(t)).toBe(true); // each update extends the reply
    await chat.getByRole('button', { name: 'Send' }).waitFor();
    await page
      .getByRole('tablist', { name: 'Copy this chat request' })
      .getByRole('tab', { name: 'TypeScript' })
      .click();
    await page.getByText('TextDecoderStream').first().waitFor();
    await expectAccessible('playground-chat');
    await screenshot('playground-chat');
    // stop: the stream is cut and the panel is ready again, with no error. With 512 max tokens the
    // reply outlasts the click: the browser must abort the request (not wait for the reply's end),
    // and the server stores the cut generation with fewer tokens than it was allowed
    const failed: string[] = [];
    const onFailed = (r: import('playwright-core').Request) => {
      if (/\/v1\/chat\/completions$/.test(r.url())) failed.push(r.failure()?.errorText ?? '');
    };
    page.on('requestfailed', onFailed);
    await chat.getByRole('textbox', { name: /^Max tokens/ }).fill('512');
    await chat.getByRole('textbox', { name: 'Message', exact: true }).fill('Write a long story about a dragon.');
    await chat.getByRole('button', { name: 'Send' }).click();
    // streaming has begun (some text of the reply is on the page), so the server has a generation to cut
    await page.waitForFunction(
      () => {
        const el = (globalThis as any).document.querySelectorAll('[data-testid="assistant-message"]');
        const text = el.length ? el[el.length - 1].textContent : '';
        return Boolean(text) && text !== '…';
      },
      undefined,
      { timeout: 120_000 },
    );
    await chat.getByRole('button', { name: 'Stop' }).click();
    await chat.getByRole('button', { name: 'Send' }).waitFor();
    expect(await chat.getByRole('alert').count()).toBe(0);
    expect(failed).toEqual(['net::ERR_ABORTED']);
    page.off('requestfailed', onFailed);
    let cut: any;
    for (let i = 0; i < 100 && !cut; i++) {
      const latest = (await stack.call('GET', '/inferences?task=generate&limit=1', { key: adminKey })).body.data[0];
      if (JSON.stringify(latest?.input ?? '').includes('a long story about a dragon')) cut = latest;
      else await new Promise((r) => setTimeout(r, 200));
    }
    expect(cut).toBeDefined();
    expect(cut.usage.completion_tokens).toBeGreaterThan(0);
    expect(cut.usage.completion_tokens).toBeLessThan(512);
    // an unknown model: the API's error message is shown
    await chat.getByRole('textbox', { name: /^…or a trained decoder/ }).fill('no-such-decoder');
    await chat.getByRole('textbox', { name: 'Message', exact: true }).fill('Hi');
    await chat.getByRole('button', { name: 'Send' }).click();
    await chat
      .getByRole('alert')
      .getByText(/no-such-decoder|not found|model/i)
      .waitFor();
  });

  it('Playground: the chat sends its system prompt, temperature and max tokens, and streams from both /v1/chat/completions and /v1/messages', async () => {
    await open('playground', 'Playground');
    const chat = page.getByRole('region', { name: 'Chat with a decoder' });
    await chat.getByRole('combobox', { name: /^Decoder/ }).waitFor();
    const sent: { url: string; body: any }[] = [];
    const onRequest = (r: import('playwright-core').Request) => {
      if (/\/v1\/(chat\/completions|messages)$/.test(r.url())) sent.push({ url: r.url(), body: r.postDataJSON() });
    };
    page.on('request', onRequest);
    await chat.getByRole('textbox', { name: /^System prompt/ }).fill('You are a terse assistant.');
    await chat.getByRole('textbox', { name: /^Temperature/ }).fill('0');
    await chat.getByRole('textbox', { name: /^Max tokens/ }).fill('6');
    const latestChat = async () =>
      (await stack.call('GET', '/inferences?task=generate&limit=1', { key: adminKey })).body.data[0];
    const usage = chat.getByTestId('chat-usage');
    const completionTokens = async () => Number(/\+ (\d+) completion/.exec((await usage.textContent()) ?? '')?.[1]);

    for (const [api, path] of [
      ['OpenAI', '/v1/chat/completions'],
      ['Anthropic', '/v1/messages'],
    ] as const) {
      await chat.getByRole('radio', { name: new RegExp(`^${api}:`) }).check();
      // the copy-as snippets follow the choice
      await page.getByRole('tablist', { name: 'Copy this chat request' }).getByRole('tab', { name: 'curl' }).click();
      await page.locator('pre:visible', { hasText: `${stack.service.url}${path}` }).waitFor();
      await page.evaluate(() => {
        const g = globalThis as any;
        g.__replies = [];
        new g.MutationObserver(() => {
          const el = g.document.querySelectorAll('[data-testid="assistant-message"]');
          const last = el[el.length - 1];
          if (last) g.__replies.push(last.textContent);
        }).observe(g.document.querySelector('[data-testid="chat-messages"]'), {
          subtree: true,
          childList: true,
          characterData: true,
        });
      });
      await chat.getByRole('textbox', { name: 'Message', exact: true }).fill('Count from one to twenty.');
      await chat.getByRole('button', { name: 'Send' }).click();
      await chat.getByRole('button', { name: 'Stop' }).waitFor();
      await chat.getByRole('button', { name: 'Send' }).waitFor({ timeout: 120_000 });
      expect(await chat.getByRole('alert').count()).toBe(0);
      await usage.waitFor();
      const tokens = await completionTokens();
      expect(tokens).toBeGreaterThan(0);
      expect(tokens).toBeLessThanOrEqual(6); // max tokens reached the decoder
      const final = (await chat.getByTestId('assistant-message').last().textContent()) ?? '';
      const seen = [...new Set<string>(await page.evaluate(() => (globalThis as any).__replies))].filter(
        (t) => t && t !== '…',
      );
      expect(seen.length).toBeGreaterThan(1); // streamed: the reply grew on the page
      for (const t of seen) expect(final.startsWith(t)).toBe(true);
      // what the browser sent, in each API's own shape
      const request = sent.at(-1)!;
      expect(request.url).toBe(`${stack.service.url}${path}`);
      if (api === 'OpenAI')
        expect(request.body).toMatchObject({
          stream: true,
          max_tokens: 6,
          temperature: 0,
          messages: [
            { role: 'system', content: 'You are a terse assistant.' },
            { role: 'user', content: 'Count from one to twenty.' },
          ],
        });
      else
        expect(request.body).toMatchObject({
          stream: true,
          max_tokens: 6,
          temperature: 0,
          system: 'You are a terse assistant.',
          messages: [
            { role: 'user', content: 'Count from one to twenty.' },
            { role: 'assistant' },
            { role: 'user', content: 'Count from one to twenty.' },
          ],
        });
      // and what the server stored: the endpoint, the system prompt, a reply cut at the token limit
      const stored = await latestChat();
      expect(stored.endpoint).toBe(path);
      expect(stored.usage.completion_tokens).toBe(tokens);
      expect(JSON.stringify(stored.input)).toContain('You are a terse assistant.');
      expect(stored.output.completion).toBe(final);
    }
    page.off('request', onRequest);
    await expectAccessible('playground-chat-settings');
  });

  it('Evaluations: runs an evaluation on a classification dataset and shows the confusion matrix heat map', async () => {
    await open('evaluations', 'Evaluations');
    await page.getByText('No evaluations yet').waitFor();
    await expectAccessible('evaluations-empty');
    const sentiment = [
      { text: 'I love this product, it works great.', label: 'positive' },
      { text: 'Terrible, it broke after a day.', label: 'negative' },
      { text: 'Absolutely wonderful experience, would buy again.', label: 'positive' },
      { text: 'Awful support and a broken screen.', label: 'negative' },
    ];
    expect(
      (
        await stack.uploadDataset('sentiment', `${sentiment.map((r) => JSON.stringify(r)).join('\n')}\n`, {
          key: adminKey,
        })
      ).status,
    ).toBe('ready');
    await page.reload();
    await page
      .getByLabel(/^Model/)
      .first()
      .click();
    await page.getByRole('option', { name: 'sift/gliner2-mini-v1' }).click();
    await page
      .getByLabel(/^Dataset/)
      .first()
      .click();
    await page.getByRole('option', { name: /sentiment v1/ }).click();
    await page.getByRole('button', { name: 'Run evaluation' }).click();
    await page.getByTestId('evaluation-status').getByText('complete', { exact: true }).waitFor({ timeout: 120_000 });
    // the heat map: gold rows × predicted columns, every gold row counted once, shaded by its share
    const matrix = page.getByTestId('confusion-matrix');
    await matrix.getByRole('rowheader', { name: 'positive' }).waitFor();
    await matrix.getByRole('columnheader', { name: 'negative' }).waitFor();
    const counts = await matrix.locator('td').evaluateAll((tds) => tds.map((td: any) => Number(td.dataset.count)));
    expect(counts.reduce((a, b) => a + b, 0)).toBe(sentiment.length);
    const shades = await matrix.locator('td').evaluateAll((tds) => tds.map((td: any) => td.style.backgroundColor));
    expect(new Set(shades).size).toBeGreaterThan(1); // counts differ, so colours differ
    await page
      .getByRole('table', { name: 'Metrics by label' })
      .getByRole('row', { name: /^positive/ })
      .waitFor();
    await page.getByTestId('stat-Rows scored').getByText('4').waitFor();
    await expectAccessible('evaluation');
    await screenshot('evaluations');
  });

  it('Evaluations: compares the base model with the trained model side by side', async () => {
    await open('evaluations', 'Evaluations');
    for (const model of [/^people-v1/, /^sift\/gliner2-mini-v1$/]) {
      await page
        .getByLabel(/^Model/)
        .first()
        .click();
      await page.getByRole('option', { name: model }).click();
      await page
        .getByLabel(/^Dataset/)
        .first()
        .click();
      await page.getByRole('option', { name: /people v2/ }).click();
      await page.getByRole('button', { name: 'Run evaluation' }).click();
      await page.getByTestId('evaluation-status').getByText('complete', { exact: true }).waitFor({ timeout: 120_000 });
    }
    await page
      .getByRole('table', { name: 'Metrics by entity type' })
      .getByRole('row', { name: /^person/ })
      .waitFor();
    // the open (newest) evaluation's best threshold per type, as the API reports it, and its curve
    const newest = (await stack.call('GET', '/core/evaluations', { key: adminKey })).body.data[0];
    const person = (await stack.call('GET', `/core/evaluations/${newest.id}`, { key: adminKey })).body.metrics
      .calibration.per_entity.person;
    const best = person.best_threshold === null ? '— (keeps 0.5)' : person.best_threshold.toFixed(2);
    const bestRow = page.getByTestId('calibration-table').getByRole('row', { name: /^entity type person/ });
    expect(await bestRow.textContent()).toMatch(new RegExp(`^entity type person${best.replace(/[().]/g, '\\$&')}`));
    const curve = page.getByTestId('calibration-curve');
    expect(await curve.getAttribute('aria-label')).toMatch(
      /^F1, precision and recall of entity type person by threshold/,
    );
    expect(await curve.locator('.recharts-line').count()).toBe(3);
    const rows = page.getByRole('table', { name: 'Evaluations' }).getByRole('row', { name: /people v2.*complete/ });
    await rows.nth(1).waitFor({ timeout: 120_000 }); // the list shows both finished
    expect(await rows.count()).toBe(2);
    // keyboard: tick both with Space
    for (const i of [0, 1]) {
      await rows.nth(i).getByRole('checkbox').focus();
      await page.keyboard.press('Space');
    }
    const compare = page.getByTestId('evaluation-compare');
    await compare.getByRole('row', { name: /F1 · entity type person/ }).waitFor();
    // each cell from the two evaluations as the API returns them (A: the one ticked first)
    const listed = (await stack.call('GET', '/core/evaluations', { key: adminKey })).body.data as {
      id: string;
      dataset_name: string;
      status: string;
    }[];
    const evaluations = await Promise.all(
      listed
        .filter((e) => e.dataset_name === 'people' && e.status === 'complete')
        .map(async (e) => (await stack.call('GET', `/core/evaluations/${e.id}`, { key: adminKey })).body),
    );
    expect(evaluations).toHaveLength(2);
    const title = (e: any) => `${e.base_model} on ${e.dataset_name} v${e.dataset_version}`;
    const headerA = (await compare.getByRole('columnheader', { name: /^A: / }).textContent()) ?? '';
    const a = evaluations.find((e) => headerA === `A: ${title(e)}`);
    const b = evaluations.find((e) => e !== a);
    expect(a).toBeDefined();
    const pct = (n: number) => `${(n * 100).toFixed(1)}%`;
    const diff = (x: number, y: number) => `${(y - x) * 100 > 0 ? '+' : ''}${((y - x) * 100).toFixed(1)} pts`;
    for (const [name, x, y] of [
      ['Micro F1', a.metrics.f1, b.metrics.f1],
      ['Precision', a.metrics.precision, b.metrics.precision],
      ['F1 · entity type person', a.metrics.per_entity.person.f1, b.metrics.per_entity.person.f1],
    ] as [string, number, number][]) {
      expect(typeof x === 'number' && typeof y === 'number').toBe(true);
      expect(await compare.getByRole('row', { name: new RegExp(`^${name}`) }).textContent()).toBe(
        `${name}${pct(x)}${pct(y)}${diff(x, y)}`,
      );
    }
    await expectAccessible('evaluations-compare');
  });

  it('Inference history: filters by task, opens one and records feedback, and a correction is checked', async () => {
    await open('inferences', 'Inference history');
    const table = page.getByRole('table', { name: 'Inferences' });
    await table
      .getByRole('row', { name: /gliner2-mini-v1/ })
      .first()
      .waitFor();
    await page.getByLabel(/^Task/).first().click();
    await page.getByRole('option', { name: 'generate', exact: true }).click();
    // only the playground chat's decoder calls are left
    await table
      .getByRole('row', { name: /SmolLM2/ })
      .first()
      .waitFor();
    await table
      .getByRole('row', { name: /gliner2-mini-v1/ })
      .first()
      .waitFor({ state: 'detached' });
    await page.getByLabel(/^Task/).first().click();
    await page.getByRole('option', { name: 'ner', exact: true }).click();
    await table
      .getByRole('row', { name: /gliner2-mini-v1/ })
      .first()
      .waitFor();
    await expectAccessible('inferences');
    await table
      .getByRole('button', { name: /^Open inference/ })
      .first()
      .click();
    await page.getByTestId('inference-output').waitFor();
    await page.getByRole('button', { name: 'Mark correct' }).click();
    await page.getByTestId('feedback-saved').getByText('correct', { exact: true }).waitFor();
    await table.getByRole('row').filter({ hasText: 'correct' }).first().waitFor();
    // a correction that is not JSON is refused here; one of the wrong shape by the server, with its detail
    await page.getByRole('button', { name: 'Mark incorrect…' }).click();
    const box = page.getByLabel(/^Corrected output/);
    // pre-filled with the output in the shape a correction takes: spans without their scores
    const prefilled = await box.inputValue();
    const template = JSON.parse(prefilled) as { entities: Record<string, unknown>[] };
    expect(template.entities.length).toBeGreaterThan(0);
    for (const span of template.entities) expect(Object.keys(span).sort()).toEqual(['end', 'label', 'start', 'text']);
    await box.fill('{not json');
    await page.getByRole('button', { name: 'Save correction' }).click();
    await page
      .getByRole('alert')
      .getByText(/not valid JSON/)
      .waitFor();
    await box.fill('{"nonsense_head": 1}');
    await page.getByRole('button', { name: 'Save correction' }).click();
    await page
      .getByRole('alert')
      .getByText(/nonsense_head|corrected_output/)
      .waitFor();
    await expectAccessible('inference-feedback');
    // the pre-filled correction is accepted as it is
    await box.fill(prefilled);
    await page.getByRole('button', { name: 'Save correction' }).click();
    await page.getByTestId('feedback-saved').getByText('incorrect', { exact: true }).waitFor();
    await screenshot('inferences');
  });

  it('Projects: creates a project, promotes two models, rolls back to the first and shows the history', async () => {
    // a second complete model to promote (the mini model's weights, recorded as a finished job)
    await seedCompleteEncoderJob(stack, adminTeamId, 'people', 'people-v2');
    await open('projects', 'Projects');
    await page.getByText('No projects yet').waitFor();
    await expectAccessible('projects-empty');
    await page.getByRole('textbox', { name: /^Project name/ }).fill('support-ner');
    await page.getByRole('button', { name: 'Create project' }).click();
    await page.getByText('Nothing deployed yet').waitFor();
    const serving = page.getByTestId('current-model');
    for (const model of ['people-v1', 'people-v2']) {
      await page
        .getByLabel(/^Promote a trained model/)
        .first()
        .click();
      await page.getByRole('option', { name: new RegExp(`^${model} `) }).click();
      await page.getByRole('button', { name: 'Promote', exact: true }).click();
      await serving.getByText(new RegExp(`^${model} `)).waitFor();
    }
    await page.getByRole('button', { name: 'Roll back to the previous model' }).click();
    await serving.getByText(/^people-v1 /).waitFor();
    const history = page.getByRole('table', { name: 'Deployment history' });
    await history.getByRole('row', { name: /rollback.*people-v1.*people-v2/ }).waitFor();
    expect(await history.getByRole('row', { name: /promote/ }).count()).toBe(2);
    await page
      .getByRole('table', { name: 'Projects' })
      .getByRole('row', { name: /support-ner.*people-v1/ })
      .waitFor();
    await page.getByText('No adaptive cycles yet.').waitFor();
    await expectAccessible('projects');
    await screenshot('projects');
  });

  it('Projects: reviews the traces a cycle asks about, a second cycle trains a candidate from that feedback, and its promote button serves it', async () => {
    const projectId = (
      (await stack.call('GET', '/projects', { key: adminKey })).body.data as { id: string; name: string }[]
    ).find((p) => p.name === 'support-ner')!.id;
    // traffic under the project's id: a person who is also the customer (two types for one span: the
    // model cannot be sure, so these traces are the informative ones), and two classifications
    const people: Record<string, string> = {
      'Ada Lovelace asked Babbage Ltd for a refund.': 'Ada Lovelace',
      'Grace Hopper reported a bug to Remington Rand.': 'Grace Hopper',
      'Alan Turing cannot log in to the Bletchley portal.': 'Alan Turing',
      'Katherine Johnson wants NASA to resend the invoice.': 'Katherine Johnson',
      'Linus Torvalds says the Transmeta order never arrived.': 'Linus Torvalds',
      'Margaret Hamilton was charged twice by Draper Labs.': 'Margaret Hamilton',
    };
    const schema = {
      entities: ['person', 'customer', 'company'],
      classifications: [
        { task: 'priority', labels: ['urgent', 'normal', 'low'] },
        { task: 'sentiment', labels: ['positive', 'negative'] },
      ],
    };
    for (const text of Object.keys(people))
      expect(
        (
          await stack.call('POST', '/inference', {
            key: adminKey,
            body: { model_id: projectId, text, schema, threshold: 0.3 },
          })
        ).status,
      ).toBe(200);
    const feedbackOf = async (id: string) =>
      (await stack.call('GET', `/inferences/${id}`, { key: adminKey })).body.feedback;

    await open('projects', 'Projects');
    await page.getByRole('button', { name: 'Open project support-ner' }).click();
    await page.getByText('Nothing to review yet').waitFor();
    await page.getByRole('button', { name: 'Start a cycle' }).click();
    // too little feedback: the cycle is skipped and says why; the page follows it without a reload
    const cycles = page.getByRole('table', { name: 'Adaptive cycles' });
    await cycles
      .getByRole('row', { name: /skipped/ })
      .getByText(/0 reviewed traces .* a cycle needs 3/)
      .waitFor({ timeout: 60_000 });
    const review = page.getByRole('region', { name: 'Traces waiting for review' });
    const traces = review.getByRole('article');
    await traces.first().waitFor();
    expect(await traces.count()).toBeGreaterThanOrEqual(3);
    await review
      .getByTestId('review-progress')
      .getByText(/^0 of \d+ reviewed/)
      .waitFor();
    await expectAccessible('projects-review');

    // one marked correct: stored on the inference
    const ids = await traces.evaluateAll((els) => els.map((el: any) => el.dataset.inferenceId as string));
    await traces.nth(0).getByRole('button', { name: 'Mark correct' }).click();
    await traces.nth(0).getByTestId('trace-feedback').getByText('marked correct').waitFor();
    expect(await feedbackOf(ids[0]!)).toMatchObject({ verdict: 'correct', corrected_output: null });

    // one corrected: every predicted span removed, the real person added by its text, the priority changed
    const second = traces.nth(1);
    const text = (await stack.call('GET', `/inferences/${ids[1]}`, { key: adminKey })).body.input.text as string;
    await second.getByRole('button', { name: 'Correct it…' }).click();
    for (let n = await second.getByRole('button', { name: /^Remove / }).count(); n > 0; n--)
      await second
        .getByRole('button', { name: /^Remove / })
        .first()
        .click();
    await second.getByText('No entities').waitFor();
    await second.getByRole('textbox', { name: /^Missing span/ }).fill('Nobody Here');
    await second.getByRole('button', { name: 'Add span' }).click();
    await second
      .getByRole('alert')
      .getByText(/is not in the text/)
      .waitFor();
    await second.getByRole('textbox', { name: /^Missing span/ }).fill(people[text]!);
    await second.getByRole('button', { name: 'Add span' }).click();
    await second
      .getByRole('table', { name: /^Corrected entities/ })
      .getByRole('row', { name: new RegExp(`${people[text]} person`) })
      .waitFor();
    await second.getByRole('combobox', { name: 'Label for priority' }).click();
    await page.getByRole('option', { name: 'urgent' }).click();
    await expectAccessible('projects-review-correction');
    await second.getByRole('button', { name: 'Save correction' }).click();
    await second.getByTestId('trace-feedback').getByText('marked incorrect').waitFor();
    const start = Array.from(text.slice(0, text.indexOf(people[text]!))).length;
    expect(await feedbackOf(ids[1]!)).toMatchObject({
      verdict: 'incorrect',
      corrected_output: {
        entities: [{ text: people[text], label: 'person', start, end: start + people[text]!.length }],
        classifications: { priority: 'urgent' },
      },
    });
    await traces.nth(2).getByRole('button', { name: 'Mark correct' }).click();
    await traces.nth(2).getByTestId('trace-feedback').getByText('marked correct').waitFor();
    await review
      .getByTestId('review-progress')
      .getByText(/^3 of \d+ reviewed/)
      .waitFor();
    await screenshot('projects-review');

    // enough feedback now: the next cycle trains a candidate from the deployed model, scores both, offers it
    await page.getByRole('button', { name: 'Start a cycle' }).click();
    await cycles.getByRole('row', { name: /running/ }).waitFor();
    // the newest cycle is the first row
    await cycles
      .getByRole('row')
      .nth(1)
      .getByText(/^(offered|failed|skipped)$/)
      .waitFor({ timeout: 480_000 });
    const cycle = (await stack.call('GET', `/projects/${projectId}/adaptive-cycles`, { key: adminKey })).body.data[0];
    expect({ status: cycle.status, reason: cycle.reason }).toEqual({ status: 'offered', reason: null });
    const comparison = page.getByRole('region', { name: 'Candidate vs deployed model' });
    const pct = (n: number) => `${(n * 100).toFixed(1)}%`;
    expect(await comparison.getByRole('row', { name: /^F1/ }).textContent()).toBe(
      `F1${pct(cycle.comparison.baseline.f1)}${pct(cycle.comparison.candidate.f1)}${(cycle.comparison.candidate.f1 - cycle.comparison.baseline.f1 > 0 ? '+' : '') + ((cycle.comparison.candidate.f1 - cycle.comparison.baseline.f1) * 100).toFixed(1)} pts`,
    );
    await comparison
      .getByTestId('recommendation')
      .getByText(`recommendation: ${cycle.comparison.recommendation}`)
      .waitFor();
    await expectAccessible('projects-adaptive');
    await screenshot('projects-adaptive');
    const serving = page.getByTestId('current-model');
    expect(await serving.textContent()).toMatch(/people-v1/); // offered, not promoted

    // the promote button: the project serves the candidate, and the cycle says so
    await comparison.getByRole('button', { name: 'Promote the candidate', exact: true }).click();
    await serving.getByText(/^support-ner-adaptive-/).waitFor();
    const project = (await stack.call('GET', `/projects/${projectId}`, { key: adminKey })).body;
    expect(project.active_training_job_id).toBe(cycle.candidate_training_job_id);
    expect(
      (await stack.call('GET', `/projects/${projectId}/adaptive-cycles/${cycle.id}`, { key: adminKey })).body.status,
    ).toBe('promoted');
    await comparison.getByText(/^Promoted: the project serves this candidate/).waitFor();
    await page
      .getByRole('table', { name: 'Deployment history' })
      .getByRole('row', { name: /promote.*support-ner-adaptive-.*people-v1/ })
      .waitFor();
  }, 600_000);

  it('keyboard: the navigation is reachable with Tab and opens a page with Enter', async () => {
    await open('settings/api-keys', 'API keys');
    let reached = false;
    for (let i = 0; i < 15 && !reached; i++) {
      await page.keyboard.press('Tab');
      reached = await page.evaluate(() => (globalThis as any).document.activeElement?.textContent === 'Datasets');
    }
    expect(reached).toBe(true);
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { level: 1, name: 'Datasets' }).waitFor();
  });

  it('API keys: revokes the key after a confirmation, and the key stops working', async () => {
    await open('settings/api-keys', 'API keys');
    await page.getByRole('button', { name: 'Revoke browser test key' }).click();
    const dialog = page.getByRole('dialog', { name: 'Revoke this key?' });
    await dialog.waitFor();
    await expectAccessible('api-keys-revoke-dialog');
    await dialog.getByRole('button', { name: 'Revoke' }).click();
    await dialog.waitFor({ state: 'hidden' });
    await page.getByRole('row', { name: /browser test key/ }).waitFor({ state: 'detached' });
    expect(await keyCalls(created)).toBe(401);
  });
});

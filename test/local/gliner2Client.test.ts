/**
 * The gliner2 package's own API client (`GLiNER2.from_api`, installed in the trainer venv) against the local
 * server, unchanged but for the key and base URL: every public method is compared with the same method of the
 * local library on the checkpoint the mini encoder was exported from (test/clients/gliner2_client_check.py).
 * The team's default encoder (PATCH /team) picks the model, since the client sends none.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DEFAULT_PYTHON, REPO_ROOT } from '../../src/paths';
import { MINI_MODEL_DIR } from '../helpers/miniModel';
import { TestStack } from '../helpers/localStack';

const MODEL = 'sift/gliner2-mini-v1';
const SCRIPT = join(REPO_ROOT, 'test/clients/gliner2_client_check.py');
const python = (mode: string, env: Record<string, string> = {}) =>
  promisify(execFile)(DEFAULT_PYTHON, [SCRIPT, mode], {
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  }).then((r) => JSON.parse(r.stdout));

describe('the comparator', () => {
  it('reports a score, a span, a label and a shape that differ, and nothing for the same answer', async () => {
    const found = await python('selftest');
    expect(found.same).toEqual([]);
    for (const what of ['score', 'span', 'label', 'shape']) expect(found[what].length).toBeGreaterThan(0);
  }, 60_000);
});

describe('POST /gliner-2 with the gliner2 client', () => {
  let stack: TestStack;
  let key: string;

  beforeAll(async () => {
    stack = await TestStack.start({ withModels: true });
    ({ key } = await stack.newTeam('gliner2-client'));
  }, 180_000);
  afterAll(async () => {
    await stack?.stop();
  });

  it("a team's default encoder: read, refused when not an encoder the team can run, set by an admin key", async () => {
    expect((await stack.call('GET', '/team', { key })).body.default_encoder).toBeNull();
    const unknown = await stack.call('PATCH', '/team', { key, body: { default_encoder: 'no-such-model' } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.detail).toContain('default_encoder');
    const decoder = await stack.call('PATCH', '/team', {
      key,
      body: { default_encoder: 'HuggingFaceTB/SmolLM2-135M-Instruct' },
    });
    expect(decoder.status).toBe(422);
    expect(decoder.body.detail).toContain('decoder');
    const member = await stack.call('POST', '/api-keys', { key, body: { name: 'member' } });
    const byMember = await stack.call('PATCH', '/team', { key: member.body.key, body: { default_encoder: MODEL } });
    expect(byMember.status).toBe(403);
    const set = await stack.call('PATCH', '/team', { key, body: { default_encoder: MODEL } });
    expect(set.status).toBe(200);
    expect(set.body.default_encoder).toBe(MODEL);
    expect((await stack.call('GET', '/team', { key: member.body.key })).body.default_encoder).toBe(MODEL);
  });

  it('answers every public method as the local library does, and its errors as the client maps them', async () => {
    const report = await python('run', { SIFT_URL: stack.url, SIFT_KEY: key, MODEL_DIR: MINI_MODEL_DIR });
    expect(report.failures).toEqual([]);
    expect(report.compared.length).toBe(38);
    expect(report.max_score_diff).toBeLessThanOrEqual(1e-3);
    expect(report.errors.bad_key).toMatchObject({ error: 'AuthenticationError', status: 401 });
    expect(report.errors.bad_threshold).toMatchObject({ error: 'ValidationError', status: 422 });
    expect(report.errors.bad_threshold.message).toContain('threshold');
    // billed and stored like other inference
    const stored = await stack.call('GET', '/inferences?limit=5', { key });
    expect(stored.status).toBe(200);
    const items = stored.body.data ?? stored.body.inferences ?? stored.body.items ?? stored.body;
    expect(items.some((i: any) => i.endpoint === '/gliner-2' && i.model_id === MODEL)).toBe(true);
  }, 300_000);
});

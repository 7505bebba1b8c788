/** GET /ready: the ECS target-health check — stores reachable, preloaded models really loaded. */
import { configFromEnv } from '../../src/adapters/config';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
/** As the service would have read SIFT_PRELOAD_MODELS at start (configuration is read once per process). */
const preload = (value: string | undefined) => {
  stack.svc.config.preloadModels = configFromEnv({ SIFT_PRELOAD_MODELS: value }).preloadModels ?? [];
};

beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
}, 120_000);
afterAll(async () => {
  await stack?.stop();
});

it('is ready without credentials when the stores answer', async () => {
  preload(undefined);
  const res = await stack.call('GET', '/ready', { key: null });
  expect(res.status).toBe(200);
  expect(res.body.ready).toBe(true);
  expect(Object.keys(res.body.checks).sort()).toEqual(['blobs', 'records']);
});

it('loads the preloaded models before saying ready, and says which one is missing', async () => {
  preload('sift/gliner2-mini-v1');
  const ok = await stack.call('GET', '/ready', { key: null });
  expect(ok.status).toBe(200);
  expect(ok.body.checks['model:sift/gliner2-mini-v1'].ok).toBe(true);

  // a catalog model whose weights this installation does not have
  preload('sift/gliner2-mini-v1, fastino/gliner2-large-v1');
  const missing = await stack.call('GET', '/ready', { key: null });
  expect(missing.status).toBe(503);
  expect(missing.body.ready).toBe(false);
  expect(missing.body.checks['model:fastino/gliner2-large-v1']).toMatchObject({
    ok: false,
    detail: expect.stringContaining('not in the model store'),
  });
});

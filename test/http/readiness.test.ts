/**
 * GET /ready: the ECS target-health check — stores reachable, preloaded models really loaded, and
 * (SIFT_REQUIRE_EXECUTION_PROVIDER) on the provider the task pays for.
 *
 * The encoder runtime asks for `cuda` as the ECS gateway task does; this machine's onnxruntime-node has
 * no CUDA provider libraries, so a real session creation throws and the sessions fall back to CPU —
 * the GPU task whose CUDA provider does not load (no stand-in: onnxruntime's own error is the reason).
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { configFromEnv } from '../../src/adapters/config';
import { emfUsageMetrics } from '../../src/adapters/metrics/emfUsageMetrics';
import { OnnxEncoderRuntime } from '../../src/adapters/onnx/encoderRuntime';
import { OPERATIONAL_DIMENSION, PROVIDER_FALLBACK_METRIC } from '../../src/core/billing/metricNames';
import { TestStack } from '../helpers/localStack';

const cudaInstalled = existsSync(
  join('node_modules', 'onnxruntime-node', 'bin', 'napi-v6', 'linux', 'x64', 'libonnxruntime_providers_cuda.so'),
);
const warnings: { message: string; extra: Record<string, unknown> }[] = [];
const emf: string[] = [];
let stack: TestStack;
/** As the service would have read SIFT_PRELOAD_MODELS at start (configuration is read once per process). */
const preload = (value: string | undefined) => {
  stack.svc.config.preloadModels = configFromEnv({ SIFT_PRELOAD_MODELS: value }).preloadModels ?? [];
};

beforeAll(async () => {
  stack = await TestStack.start({
    withModels: true,
    ports: {
      encoder: new OnnxEncoderRuntime({
        executionProvider: 'cuda',
        logger: { info: () => {}, error: () => {}, warn: (message, extra = {}) => warnings.push({ message, extra }) },
      }),
      usageMetrics: emfUsageMetrics((line) => emf.push(line)),
    },
  });
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

describe('a GPU task whose CUDA provider does not load', () => {
  (cudaInstalled ? it.skip : it)(
    'without SIFT_REQUIRE_EXECUTION_PROVIDER: ready, with a warning (serves on CPU)',
    async () => {
      preload('sift/gliner2-mini-v1');
      stack.svc.config.requireExecutionProvider = configFromEnv({}).requireExecutionProvider;
      const res = await stack.call('GET', '/ready', { key: null });
      expect(res.status).toBe(200);
      expect(warnings).toContainEqual({
        message: 'the cuda execution provider could not be loaded; encoder sessions run on CPU',
        extra: expect.objectContaining({ requested: 'cuda', execution_provider: 'cpu' }),
      });
      expect(emf.filter((l) => l.includes(PROVIDER_FALLBACK_METRIC))).toEqual([]);
    },
  );

  (cudaInstalled ? it.skip : it)(
    "with SIFT_REQUIRE_EXECUTION_PROVIDER=cuda: 503 naming the provider it got and onnxruntime's reason, and counted",
    async () => {
      preload('sift/gliner2-mini-v1');
      stack.svc.config.requireExecutionProvider = configFromEnv({
        SIFT_REQUIRE_EXECUTION_PROVIDER: 'cuda',
      }).requireExecutionProvider;
      try {
        const res = await stack.call('GET', '/ready', { key: null });
        expect(res.status).toBe(503);
        expect(res.body.ready).toBe(false);
        const detail: string = res.body.checks['model:sift/gliner2-mini-v1'].detail;
        expect(detail).toContain('encoder sessions run on cpu, not cuda as SIFT_REQUIRE_EXECUTION_PROVIDER requires');
        expect(detail).toMatch(/Failed to load shared library|AppendExecutionProvider/);
        // the alarm's metric (lib/observability-stack.ts), as CloudWatch would extract it from the EMF line
        const lines = emf.map((l) => JSON.parse(l)).filter((l) => PROVIDER_FALLBACK_METRIC in l);
        expect(lines).toEqual([
          expect.objectContaining({
            [PROVIDER_FALLBACK_METRIC]: 1,
            [OPERATIONAL_DIMENSION]: 'encoder',
            _aws: expect.objectContaining({
              CloudWatchMetrics: [
                expect.objectContaining({
                  Namespace: 'Sift',
                  Dimensions: [[OPERATIONAL_DIMENSION]],
                  Metrics: [expect.objectContaining({ Name: PROVIDER_FALLBACK_METRIC })],
                }),
              ],
            }),
          }),
        ]);
      } finally {
        stack.svc.config.requireExecutionProvider = undefined;
      }
    },
  );

  (cudaInstalled ? it.skip : it)(
    'with the requirement and nothing preloaded (the stack preloads none by default): a model a request loaded fails /ready too',
    async () => {
      preload(undefined);
      const extraction = await stack.call('POST', '/gliner-2/entities', {
        body: { model_id: 'sift/gliner2-mini-v1', text: 'Ada Lovelace lived in London.', entities: ['person'] },
      });
      expect(extraction.status).toBe(200); // served, on the CPU
      stack.svc.config.requireExecutionProvider = 'cuda';
      const before = emf.length;
      try {
        const res = await stack.call('GET', '/ready', { key: null });
        expect(res.status).toBe(503);
        expect(res.body.checks['encoder-provider']).toMatchObject({
          ok: false,
          detail: expect.stringContaining('encoder sessions run on cpu, not cuda'),
        });
        expect(emf.slice(before).filter((l) => l.includes(PROVIDER_FALLBACK_METRIC))).toHaveLength(1);
      } finally {
        stack.svc.config.requireExecutionProvider = undefined;
      }
    },
  );
});

it('SIFT_REQUIRE_EXECUTION_PROVIDER names the variable when it is not a provider', () => {
  expect(configFromEnv({ SIFT_REQUIRE_EXECUTION_PROVIDER: ' CUDA ' }).requireExecutionProvider).toBe('cuda');
  expect(() => configFromEnv({ SIFT_REQUIRE_EXECUTION_PROVIDER: 'gpu' })).toThrow(
    "SIFT_REQUIRE_EXECUTION_PROVIDER must be one of cpu, cuda; got 'gpu'",
  );
});

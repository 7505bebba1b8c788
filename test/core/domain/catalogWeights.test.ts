/**
 * The catalog-weights check on the extraction path (models.ts ensureEncoderWeights): a long-lived
 * server (hotPath) asks the model store once per TTL, not per request; a miss is asked again at once.
 */
import { createMemoryServices } from '../../../src/adapters/memory/services';
import { createHotPath } from '../../../src/core/hotPath';
import { baseModelManifestKey } from '../../../src/core/modelLayout';
import { ensureEncoderWeights, type ResolvedEncoder } from '../../../src/core/models';

const MODEL = 'sift/gliner2-mini-v1';
const catalog: ResolvedEncoder = {
  type: 'encoder',
  requested: MODEL,
  baseModel: MODEL,
  prefix: `models/${MODEL}/`,
  projectId: null,
  trainingJobId: null,
};

function servicesCountingHeads(ttlMs?: number) {
  const svc = createMemoryServices();
  if (ttlMs !== undefined) svc.hotPath = createHotPath(() => {}, ttlMs);
  const heads: string[] = [];
  const head = svc.blobs.head.bind(svc.blobs);
  svc.blobs.head = (key: string) => {
    heads.push(key);
    return head(key);
  };
  return { svc, heads };
}

test('a long-lived server checks a catalog model in the store once per TTL; a removal is seen after it', async () => {
  const { svc, heads } = servicesCountingHeads(100);
  await svc.blobs.put(baseModelManifestKey(MODEL), '{}');
  for (let i = 0; i < 5; i++) await ensureEncoderWeights(svc, catalog);
  expect(heads).toEqual([baseModelManifestKey(MODEL)]);

  await svc.blobs.deletePrefix(baseModelManifestKey(MODEL));
  await ensureEncoderWeights(svc, catalog); // within the TTL: still the checked answer
  await new Promise((r) => setTimeout(r, 150));
  await expect(ensureEncoderWeights(svc, catalog)).rejects.toMatchObject({
    status: 503,
    message: expect.stringContaining('not in the model store'),
  });
});

test('missing weights are asked for on every request, so a model published meanwhile is served at once', async () => {
  const { svc, heads } = servicesCountingHeads(60_000);
  await expect(ensureEncoderWeights(svc, catalog)).rejects.toMatchObject({ status: 503 });
  await expect(ensureEncoderWeights(svc, catalog)).rejects.toMatchObject({ status: 503 });
  await svc.blobs.put(baseModelManifestKey(MODEL), '{}');
  await ensureEncoderWeights(svc, catalog);
  expect(heads).toHaveLength(3);
});

test('without a hot path (a Lambda) every request asks the store; a deployed job is never asked', async () => {
  const { svc, heads } = servicesCountingHeads();
  await svc.blobs.put(baseModelManifestKey(MODEL), '{}');
  await ensureEncoderWeights(svc, catalog);
  await ensureEncoderWeights(svc, catalog);
  expect(heads).toHaveLength(2);
  await ensureEncoderWeights(svc, {
    ...catalog,
    requested: 'job_1',
    trainingJobId: 'job_1',
    prefix: 'jobs/t/job_1/model/',
  });
  expect(heads).toHaveLength(2);
});

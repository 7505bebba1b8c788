/**
 * The one model resolver (src/core/models.ts resolveServable) on the in-memory Services: a model string becomes a
 * servable model typed by kind — weights checked, runtime attached — or the one error that says why not.
 */
import { createMemoryServices } from '../../../src/adapters/memory/services';
import type { DecoderRuntime } from '../../../src/core/decoder/runtime';
import { baseModelManifestKey, baseModelPrefix } from '../../../src/core/modelLayout';
import { requireRuntime, resolveServable } from '../../../src/core/models';
import type { EncoderRuntime } from '../../../src/core/ports';
import { ENCODER } from '../../helpers/memoryDomain';

const DECODER = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const team = { team_id: 'team-1' };
const NOT_AVAILABLE = (kind: string) => `The ${kind} runtime is not available on this deployment`;

function services(opts: { encoder?: boolean; decoder?: boolean; installed?: string[] } = {}) {
  const svc = createMemoryServices();
  const encoder = {} as EncoderRuntime;
  const installed = new Set(opts.installed ?? [DECODER]);
  const decoder = {
    backend: { name: 'fake', hasModel: async (m: string) => installed.has(m) },
    cache: {},
  } as unknown as DecoderRuntime;
  if (opts.encoder !== false) svc.encoder = encoder;
  if (opts.decoder !== false) svc.decoder = decoder;
  return { svc, encoder, decoder };
}

test('an encoder: its weights in the store, the encoder runtime attached', async () => {
  const { svc, encoder } = services();
  await svc.blobs.put(baseModelManifestKey(ENCODER), '{}');
  const servable = await resolveServable(svc, team, ENCODER, { want: 'encoder' });
  expect(servable.kind).toBe('encoder');
  expect(servable.runtime).toBe(encoder);
  expect(servable.model).toMatchObject({ type: 'encoder', baseModel: ENCODER, prefix: baseModelPrefix(ENCODER) });
  // without `want` the kind comes from the model
  expect((await resolveServable(svc, team, ENCODER)).kind).toBe('encoder');
});

test('a decoder: installed on the backend, the decoder runtime attached', async () => {
  const { svc, decoder } = services();
  const servable = await resolveServable(svc, team, DECODER, { want: 'decoder' });
  expect(servable.kind).toBe('decoder');
  expect(servable.runtime).toBe(decoder);
  expect(servable.model).toMatchObject({ type: 'decoder', backendModel: DECODER, baseModel: DECODER });
});

test('an unknown model is a 404 (with the vendor hints on the compatible routes)', async () => {
  const { svc } = services();
  await expect(resolveServable(svc, team, 'no-such-model', { want: 'decoder' })).rejects.toMatchObject({
    status: 404,
    param: 'model',
    code: 'model_not_found',
  });
  await expect(
    resolveServable(svc, team, 'no-such-model', { want: 'encoder', field: ['body', 'model_id'] }),
  ).rejects.toMatchObject({ status: 404 });
});

test('the wrong kind: a 422 on the native field, a 400 with hints on the compatible routes', async () => {
  const { svc } = services();
  await svc.blobs.put(baseModelManifestKey(ENCODER), '{}');
  await expect(
    resolveServable(svc, team, ENCODER, { want: 'decoder', field: ['body', 'model_id'] }),
  ).rejects.toMatchObject({
    status: 422,
    errors: [{ loc: ['body', 'model_id'], msg: expect.stringContaining('is an encoder (extraction) model') }],
  });
  await expect(resolveServable(svc, team, ENCODER, { want: 'decoder' })).rejects.toMatchObject({
    status: 400,
    param: 'model',
    code: 'model_not_generative',
  });
  await expect(
    resolveServable(svc, team, DECODER, { want: 'encoder', field: ['body', 'model_id'] }),
  ).rejects.toMatchObject({
    status: 422,
    errors: [{ loc: ['body', 'model_id'], msg: expect.stringContaining('extraction needs an encoder') }],
  });
  await expect(resolveServable(svc, team, DECODER, { want: 'encoder' })).rejects.toMatchObject({
    status: 400,
    param: 'schema',
  });
});

test('a missing runtime is one 503 with one wording, checked before the model is looked up', async () => {
  const { svc } = services({ encoder: false, decoder: false });
  for (const kind of ['encoder', 'decoder'] as const) {
    await expect(resolveServable(svc, team, 'no-such-model', { want: kind })).rejects.toMatchObject({
      status: 503,
      message: NOT_AVAILABLE(kind),
    });
    expect(() => requireRuntime(svc, kind)).toThrow(NOT_AVAILABLE(kind));
  }
  // without `want`, the runtime of the model's kind
  await svc.blobs.put(baseModelManifestKey(ENCODER), '{}');
  await expect(resolveServable(svc, team, ENCODER)).rejects.toMatchObject({
    status: 503,
    message: NOT_AVAILABLE('encoder'),
  });
  await expect(resolveServable(svc, team, DECODER)).rejects.toMatchObject({
    status: 503,
    message: NOT_AVAILABLE('decoder'),
  });
});

test('missing weights are a 503: an encoder not in the model store, a decoder not installed', async () => {
  const { svc } = services({ installed: [] });
  await expect(resolveServable(svc, team, ENCODER, { want: 'encoder' })).rejects.toMatchObject({
    status: 503,
    message: expect.stringContaining('not in the model store'),
  });
  await expect(resolveServable(svc, team, DECODER, { want: 'decoder' })).rejects.toMatchObject({
    status: 503,
    message: expect.stringContaining('weights are not installed'),
  });
});

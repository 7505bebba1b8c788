/**
 * The encoder runtime's disk cache (src/adapters/onnx/encoderRuntime.ts) stays within its byte bound:
 * least recently used copies go first, the copy in use never does, and a pruned model comes back.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EncoderModel } from '../../src/encoder/engine';
import { MemoryBlobStore } from '../../src/adapters/memory/blobStore';
import { OnnxEncoderRuntime } from '../../src/adapters/onnx/encoderRuntime';

const FILE_BYTES = 1000;
const FILES = EncoderModel.requiredFiles('fp32');
const MODEL_BYTES = FILES.length * FILE_BYTES;

let cacheDir: string;
beforeEach(async () => {
  cacheDir = await mkdtemp(join(tmpdir(), 'sift-enc-cache-'));
});
afterEach(async () => {
  await rm(cacheDir, { recursive: true, force: true });
});

async function storeWith(models: string[]): Promise<MemoryBlobStore> {
  const blobs = new MemoryBlobStore();
  for (const m of models) {
    for (const f of FILES) await blobs.put(`models/${m}/${f}`, new Uint8Array(FILE_BYTES));
    await blobs.put(`models/${m}/manifest.json`, JSON.stringify({ id: m }));
  }
  return blobs;
}

const served = (m: string) => ({ requested: m, prefix: `models/${m}/` });
const copies = async () => (await readdir(cacheDir)).length;
const pause = () => new Promise((r) => setTimeout(r, 20));

test('the cache keeps at most its byte bound, dropping the least recently used copy', async () => {
  const blobs = await storeWith(['a', 'b', 'c']);
  // room for two copies (each copy also holds its manifest and marker: a little over MODEL_BYTES)
  const runtime = new OnnxEncoderRuntime({ cacheDir, maxCacheBytes: 2 * MODEL_BYTES + 500 });
  const dirA = await runtime.localDir(blobs, served('a'));
  await pause();
  const dirB = await runtime.localDir(blobs, served('b'));
  expect(await copies()).toBe(2);
  await pause();
  const dirC = await runtime.localDir(blobs, served('c'));
  expect(await copies()).toBe(2);
  expect(existsSync(dirA)).toBe(false); // oldest
  expect(existsSync(dirB)).toBe(true);
  expect(existsSync(dirC)).toBe(true);
  await runtime.close();
});

test('using a copy makes it recent: the other one is pruned instead', async () => {
  const blobs = await storeWith(['a', 'b', 'c']);
  const runtime = new OnnxEncoderRuntime({ cacheDir, maxCacheBytes: 2 * MODEL_BYTES + 500 });
  const dirA = await runtime.localDir(blobs, served('a'));
  await pause();
  const dirB = await runtime.localDir(blobs, served('b'));
  await pause();
  // a second runtime (no TTL memory) re-checks 'a' against the store: that use refreshes it
  const again = new OnnxEncoderRuntime({ cacheDir, maxCacheBytes: 2 * MODEL_BYTES + 500 });
  expect(await again.localDir(blobs, served('a'))).toBe(dirA);
  await pause();
  await again.localDir(blobs, served('c'));
  expect(existsSync(dirA)).toBe(true);
  expect(existsSync(dirB)).toBe(false);
  await runtime.close();
  await again.close();
});

test('a pruned model is fetched again when asked for', async () => {
  const blobs = await storeWith(['a', 'b']);
  const runtime = new OnnxEncoderRuntime({ cacheDir, maxCacheBytes: MODEL_BYTES + 500 });
  const dirA = await runtime.localDir(blobs, served('a'));
  await pause();
  await runtime.localDir(blobs, served('b'));
  expect(existsSync(dirA)).toBe(false);
  expect(await runtime.localDir(blobs, served('a'))).toBe(dirA);
  expect(existsSync(join(dirA, 'onnx/encoder.onnx'))).toBe(true);
  await runtime.close();
});

test('a bound smaller than one model keeps the copy just fetched', async () => {
  const blobs = await storeWith(['a']);
  const runtime = new OnnxEncoderRuntime({ cacheDir, maxCacheBytes: 1 });
  const dirA = await runtime.localDir(blobs, served('a'));
  expect(existsSync(join(dirA, '.complete'))).toBe(true);
  await runtime.close();
});

test('a re-published model is picked up within the checked-copy TTL; while its manifest is withdrawn, no copy is made', async () => {
  const blobs = await storeWith(['a']);
  const runtime = new OnnxEncoderRuntime({ cacheDir, checkedTtlMs: 100 });
  const first = await runtime.localDir(blobs, served('a'));
  // re-publishing: the manifest goes first, the changed file comes, the new manifest last
  await blobs.deletePrefix('models/a/manifest.json');
  expect(await runtime.localDir(blobs, served('a'))).toBe(first); // within the TTL: the checked copy
  await new Promise((r) => setTimeout(r, 150));
  await expect(runtime.localDir(blobs, served('a'))).rejects.toMatchObject({
    status: 503,
    message: expect.stringContaining('not in the model store'),
  });
  await blobs.put('models/a/onnx/encoder.onnx', new Uint8Array(FILE_BYTES).fill(7));
  await blobs.put('models/a/manifest.json', JSON.stringify({ id: 'a', build: 2 }));
  const second = await runtime.localDir(blobs, served('a'));
  expect(second).not.toBe(first);
  expect((await readFile(join(second, 'onnx/encoder.onnx')))[0]).toBe(7);
  await runtime.close();
});

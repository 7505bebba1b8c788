/**
 * The encoder runtime copies a model's serving files from the store into its cache directory, one
 * file per key after the model's prefix. A key such as `onnx/../../x` passes the "serving files"
 * filter (it starts with `onnx/`); it must not land outside the model's copy (security review F12).
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryBlobStore } from '../../src/adapters/memory/blobStore';
import { OnnxEncoderRuntime } from '../../src/adapters/onnx/encoderRuntime';
import { EncoderModel } from '../../src/encoder/engine';

let root: string;
let cacheDir: string;
beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), 'sift-enc-contain-'));
  cacheDir = join(root, 'cache');
  await mkdir(cacheDir);
});
afterEach(async () => rm(root, { recursive: true, force: true }));

async function modelWith(extraKey: string): Promise<MemoryBlobStore> {
  const blobs = new MemoryBlobStore();
  for (const f of EncoderModel.requiredFiles('fp32')) await blobs.put(`models/m/${f}`, new Uint8Array(10));
  await blobs.put(`models/m/${extraKey}`, 'hostile');
  await blobs.put('models/m/manifest.json', JSON.stringify({ id: 'm' }));
  return blobs;
}

test.each(['onnx/../../escaped.txt', 'onnx/../../../escaped.txt', 'onnx/..\\..\\escaped.txt'])(
  'a store key %j is refused, naming it, and nothing is written outside the cache',
  async (suffix) => {
    const runtime = new OnnxEncoderRuntime({ cacheDir });
    const refused = await runtime
      .localDir(await modelWith(suffix), { requested: 'm', prefix: 'models/m/' })
      .catch((e: unknown) => e as Error);
    await runtime.close();
    expect(refused).toBeInstanceOf(Error);
    expect((refused as Error).message).toBe(
      `model store key models/m/${suffix} names an unsafe path ${JSON.stringify(suffix)}: it climbs out with ".."`,
    );
    expect(existsSync(join(root, 'escaped.txt'))).toBe(false);
    expect(existsSync(join(cacheDir, 'escaped.txt'))).toBe(false);
    expect(await readdir(root)).toEqual(['cache']);
  },
);

test('a plain model is still copied whole', async () => {
  const runtime = new OnnxEncoderRuntime({ cacheDir });
  const dir = await runtime.localDir(await modelWith('onnx/extra.json'), { requested: 'm', prefix: 'models/m/' });
  await runtime.close();
  expect(existsSync(join(dir, 'onnx', 'extra.json'))).toBe(true);
  expect(existsSync(join(dir, '.complete'))).toBe(true);
});

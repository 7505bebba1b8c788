/** BlobStore contract, against s3rver (the same S3 SDK code that runs against S3), presigned URLs over real HTTP. */
import type { S3Client } from '@aws-sdk/client-s3';
import { createReadStream, unlinkSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { MIN_PART_BYTES, S3BlobStore } from '../../src/adapters/s3/blobStore';
import { enforceS3UploadRules } from '../helpers/s3UploadRules';
import { createS3Client } from '../../src/adapters/aws';
import { startEmulators, type Emulators } from '../../src/local/emulators';

let dir: string;
let emulators: Emulators;
let s3: S3Client;
let blobs: S3BlobStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-blobs-'));
  emulators = await startEmulators(dir, { bucket: 'contract-bucket' });
  // the production client factory, pointed at the emulator
  s3 = createS3Client({ credentials: emulators.credentials, endpoint: emulators.s3Endpoint });
  blobs = new S3BlobStore(s3, 'contract-bucket');
  await blobs.ensureBucket();
});
afterAll(async () => {
  s3.destroy();
  await emulators.close();
  await rm(dir, { recursive: true, force: true });
});

async function collect(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const c of stream) parts.push(Buffer.from(c));
  return Buffer.concat(parts);
}

describe('put / head / stream / getText', () => {
  it('stores strings, bytes and streams, and reads them back byte for byte', async () => {
    await blobs.put('t/a.txt', 'héllo 🎉', 'text/plain; charset=utf-8');
    const bytes = Buffer.from([0, 1, 2, 254, 255]);
    await blobs.put('t/b.bin', bytes);
    const big = Buffer.alloc(3 * 1024 * 1024 + 7, 'z');
    // A file stream, as processing publishes rows.jsonl: the SDK takes its length from the file
    // (S3 needs a Content-Length on PutObject; a stream of unknown length works on s3rver only).
    await writeFile(join(dir, 'big.jsonl'), big);
    await blobs.put('t/c.jsonl', createReadStream(join(dir, 'big.jsonl')), 'application/x-ndjson');

    expect(await blobs.head('t/a.txt')).toMatchObject({
      size: Buffer.byteLength('héllo 🎉'),
      contentType: 'text/plain; charset=utf-8',
    });
    expect((await blobs.head('t/a.txt'))?.lastModified).toBeInstanceOf(Date);
    expect(await blobs.head('t/b.bin')).toMatchObject({ size: 5, contentType: 'application/octet-stream' });
    expect(await blobs.head('t/c.jsonl')).toMatchObject({ size: big.length, contentType: 'application/x-ndjson' });

    expect(await blobs.getText('t/a.txt')).toBe('héllo 🎉');
    expect(await collect(await blobs.stream('t/b.bin'))).toEqual(bytes);
    expect((await collect(await blobs.stream('t/c.jsonl'))).equals(big)).toBe(true);
  });

  it('overwrites a key; a missing key heads as undefined and fails to read', async () => {
    await blobs.put('t/over', 'one');
    await blobs.put('t/over', 'second');
    expect(await blobs.getText('t/over')).toBe('second');
    expect(await blobs.head('t/over')).toMatchObject({ size: 6 });
    expect(await blobs.head('t/missing')).toBeUndefined();
    expect(await blobs.head('nope/')).toBeUndefined();
    await expect(blobs.getText('t/missing')).rejects.toMatchObject({ name: 'NoSuchKey' });
    await expect(blobs.stream('t/missing')).rejects.toMatchObject({ name: 'NoSuchKey' });
  });

  it('keeps keys with spaces and non-ASCII characters', async () => {
    const key = 'datasets/team/my data/v1/source/rows 🎉 é.jsonl';
    await blobs.put(key, '{"a":1}');
    expect(await blobs.head(key)).toMatchObject({ size: 7 });
    expect(await blobs.list('datasets/team/my data/')).toEqual([key]);
  });

  it('ensureBucket is idempotent and creates a missing bucket', async () => {
    await blobs.ensureBucket();
    const other = new S3BlobStore(s3, 'created-on-demand');
    await other.ensureBucket();
    await other.ensureBucket();
    await other.put('k', 'v');
    expect(await other.getText('k')).toBe('v');
    expect(await blobs.head('k')).toBeUndefined();
  });
});

describe('putDirectory', () => {
  it('uploads every file under the directory; one that vanishes after the listing is skipped, not a failed upload', async () => {
    const src = join(dir, 'ckpt');
    await mkdir(join(src, 'sub'), { recursive: true });
    await writeFile(join(src, 'adapter.bin'), Buffer.from([1, 2, 3]));
    await writeFile(join(src, 'sub', 'meta.json'), '{"step":22}');
    await writeFile(join(src, 'meta.json.tmp'), 'being renamed'); // a writer's temp file, listed, then gone
    const seen: string[] = [];
    await blobs.putDirectory(src, 'ckpt/', (file) => {
      seen.push(file);
      // the first file the upload reaches removes the temp file, as a trainer's rename would mid-upload
      if (seen.length === 1) unlinkSync(join(src, 'meta.json.tmp'));
      return false;
    });
    expect(seen).toHaveLength(3);
    expect((await blobs.list('ckpt/')).sort()).toEqual(['ckpt/adapter.bin', 'ckpt/sub/meta.json']);
    expect(await blobs.getText('ckpt/sub/meta.json')).toBe('{"step":22}');
  });

  it('sends a file longer than a part as one PutObject of its length (S3 takes 5 GiB so); other streams go in parts', async () => {
    const small = new S3BlobStore(s3, 'contract-bucket', MIN_PART_BYTES);
    const rules = enforceS3UploadRules(s3); // PutObject needs a length; parts but the last are 5 MiB at least
    const sent: { command: string; length?: unknown }[] = [];
    s3.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { ContentLength?: unknown };
        sent.push({ command: String((context as { commandName?: string }).commandName), length: input.ContentLength });
        return next(args);
      },
      { step: 'initialize', name: 'recordCommands' },
    );
    try {
      const weights = Buffer.alloc(2 * MIN_PART_BYTES + 11, 7);
      const src = join(dir, 'weights');
      await mkdir(src, { recursive: true });
      await writeFile(join(src, 'model.safetensors'), weights);
      await small.putDirectory(src, 'weights/');
      await small.put('weights/again', createReadStream(join(src, 'model.safetensors')));
      expect(sent).toEqual([
        { command: 'PutObjectCommand', length: weights.length },
        { command: 'PutObjectCommand', length: weights.length },
      ]);
      expect((await collect(await blobs.stream('weights/model.safetensors'))).equals(weights)).toBe(true);
      expect((await collect(await blobs.stream('weights/again'))).equals(weights)).toBe(true);

      sent.length = 0; // a stream of unknown length (an archive's entry): a multipart upload
      await small.put('weights/streamed', Readable.from([weights]));
      expect(sent.map((c) => c.command)).toEqual([
        'CreateMultipartUploadCommand',
        'UploadPartCommand',
        'UploadPartCommand',
        'UploadPartCommand',
        'CompleteMultipartUploadCommand',
      ]);
      expect((await collect(await blobs.stream('weights/streamed'))).equals(weights)).toBe(true);
      expect(rules.stored).toBeGreaterThanOrEqual(weights.length);
    } finally {
      s3.middlewareStack.remove('recordCommands');
      s3.middlewareStack.remove('siftS3UploadRules');
    }
  });
});

describe('list / deletePrefix', () => {
  it('lists exactly the keys under a prefix (a sibling with a longer name is not under it)', async () => {
    for (const k of ['p/x/1', 'p/x/2/deep', 'p/xy/1', 'p/y/1']) await blobs.put(k, k);
    expect((await blobs.list('p/x/')).sort()).toEqual(['p/x/1', 'p/x/2/deep']);
    expect((await blobs.list('p/x')).sort()).toEqual(['p/x/1', 'p/x/2/deep', 'p/xy/1']);
    expect(await blobs.list('p/none/')).toEqual([]);
    expect(await blobs.deletePrefix('p/x/')).toBe(2);
    expect((await blobs.list('p/')).sort()).toEqual(['p/xy/1', 'p/y/1']);
    expect(await blobs.deletePrefix('p/none/')).toBe(0);
  });

  it('pages past 1,000 keys when listing and deletes in batches of 1,000', async () => {
    const keys = Array.from({ length: 1003 }, (_, i) => `many/${String(i).padStart(4, '0')}`);
    for (let i = 0; i < keys.length; i += 50) await Promise.all(keys.slice(i, i + 50).map((k) => blobs.put(k, 'x')));
    await blobs.put('many-other/keep', 'x');
    const listed = await blobs.list('many/');
    expect(listed).toHaveLength(1003);
    expect(new Set(listed)).toEqual(new Set(keys));
    expect(await blobs.deletePrefix('many/')).toBe(1003);
    expect(await blobs.list('many/')).toEqual([]);
    expect(await blobs.list('many-other/')).toEqual(['many-other/keep']);
    // 2,000 requests, each through the store's SigV4 front (one more local HTTP hop) on a shared 2-core machine
  }, 60_000);
});

describe('presigned URLs over plain HTTP (no SDK, no credentials)', () => {
  it('presignPut lets fetch upload exactly that key; presignGet lets fetch download it', async () => {
    const key = 'presigned/upload 1.jsonl';
    const putUrl = await blobs.presignPut(key, 600);
    expect(putUrl).toContain('X-Amz-Signature=');
    expect(putUrl).toContain('X-Amz-Expires=600');
    const body = Buffer.from('{"text":"🎉","label":"x"}\n'.repeat(1000));
    const put = await fetch(putUrl, { method: 'PUT', body });
    expect(put.status).toBe(200);
    expect(await blobs.head(key)).toMatchObject({ size: body.length });

    const getUrl = await blobs.presignGet(key, 60);
    const got = await fetch(getUrl);
    expect(got.status).toBe(200);
    expect(Buffer.from(await got.arrayBuffer()).equals(body)).toBe(true);
  });

  it('a presigned PUT carries no checksum of an empty body, so a real body is accepted', async () => {
    // Without requestChecksumCalculation WHEN_REQUIRED the URL would pin the CRC32 of an empty payload.
    const url = await blobs.presignPut('presigned/checksum', 60);
    expect(url.toLowerCase()).not.toContain('x-amz-checksum-crc32');
    expect(url.toLowerCase()).not.toContain('x-amz-sdk-checksum-algorithm');
  });

  it('presignPut with a content type; presignGet names the download', async () => {
    // Note: the SDK presigner signs only `host`, so the content type is not enforced by the URL.
    const url = await blobs.presignPut('presigned/typed.json', 60, { contentType: 'application/json' });
    const put = await fetch(url, { method: 'PUT', body: '[1]', headers: { 'content-type': 'application/json' } });
    expect(put.status).toBe(200);
    expect(await blobs.head('presigned/typed.json')).toMatchObject({ contentType: 'application/json', size: 3 });
    const getUrl = await blobs.presignGet('presigned/typed.json', 60, 'weights.tar.gz');
    expect(decodeURIComponent(getUrl)).toContain('attachment; filename="weights.tar.gz"');
    const got = await fetch(getUrl);
    expect(got.status).toBe(200);
    expect(got.headers.get('content-disposition')).toBe('attachment; filename="weights.tar.gz"');
    expect(await got.text()).toBe('[1]');
  });

  it('presignPut with a contentLength: a body of that length is stored, any other is refused by storage (403)', async () => {
    const url = await blobs.presignPut('presigned/sized', 60, { contentLength: 5 });
    expect((await fetch(url, { method: 'PUT', body: 'too long' })).status).toBe(403);
    expect(await blobs.head('presigned/sized')).toBeUndefined();
    expect((await fetch(url, { method: 'PUT', body: 'exact' })).status).toBe(200);
    expect(await blobs.getText('presigned/sized')).toBe('exact');
  });

  it('a presigned GET of a missing key is a 404 from storage', async () => {
    const res = await fetch(await blobs.presignGet('presigned/none', 60));
    expect(res.status).toBe(404);
  });
});

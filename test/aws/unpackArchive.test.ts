/**
 * `training.complete` unpacks SageMaker's model.tar.gz into the job's model prefix. Entry names come
 * from the archive, and node-tar's Parser passes `..` and absolute names through as they are (security
 * review F12): an unsafe one fails the step, naming it, and no key is written from it or after it.
 * The archives are written byte by byte (tar headers), as a hostile trainer could write them.
 * A large archive is unpacked against the S3 emulator with S3's upload rules enforced
 * (test/helpers/s3UploadRules.ts), holding a bounded number of bytes whatever the archive's size.
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { createCipheriv, createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Readable, Transform } from 'node:stream';
import { constants, gzipSync } from 'node:zlib';
import { Header } from 'tar';
import { createS3Client } from '../../src/adapters/aws';
import { MIN_PART_BYTES, S3BlobStore } from '../../src/adapters/s3/blobStore';
import { completeTraining } from '../../src/aws/trainingWorkflow';
import { modelPrefix } from '../../src/core/training/artifacts';
import { getTrainingJob } from '../../src/core/trainingJobs';
import { startEmulators, type Emulators } from '../../src/local/emulators';
import { newJob, teamWithDataset } from '../helpers/memoryDomain';
import { enforceS3UploadRules } from '../helpers/s3UploadRules';

/** A gzipped tar of these regular files, their names written into the headers exactly as given. */
function tarGz(files: [name: string, content: string | Buffer][], level = constants.Z_DEFAULT_COMPRESSION): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, content] of files) {
    const body = Buffer.isBuffer(content) ? content : Buffer.from(content);
    const header = Buffer.alloc(512);
    new Header({ path: name, type: 'File', size: body.length, mode: 0o644, mtime: new Date(0) }).encode(header, 0);
    blocks.push(header, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024)); // the end-of-archive marker
  return gzipSync(Buffer.concat(blocks), { level });
}

async function complete(files: [string, string][]) {
  const { svc, teamId } = await teamWithDataset();
  const job = await newJob(svc, teamId);
  const artifactKey = `jobs/${teamId}/${job.id}/sagemaker/output/model.tar.gz`;
  await svc.blobs.put(artifactKey, tarGz(files));
  const outcome = await completeTraining(svc, {
    teamId,
    jobId: job.id,
    trainingResult: { modelArtifacts: svc.blobs.uri(artifactKey) },
  }).then(
    (done) => ({ done }),
    (error: Error) => ({ error }),
  );
  const written = (await svc.blobs.list('')).filter((k) => k !== artifactKey && !k.startsWith('datasets/'));
  return { outcome, written, prefix: modelPrefix(teamId, job.id), job: await getTrainingJob(svc, teamId, job.id) };
}

const METRICS = JSON.stringify({ metrics: { f1: 0.5 } });

describe('training.complete: unpacking the model archive', () => {
  it('writes every plain entry under the job model prefix and completes the job', async () => {
    const { outcome, written, prefix, job } = await complete([
      ['./metrics.json', METRICS],
      ['onnx/encoder.onnx', 'onnx'],
    ]);
    expect(outcome).toEqual({ done: { status: 'complete' } });
    expect(written).toEqual(expect.arrayContaining([`${prefix}metrics.json`, `${prefix}onnx/encoder.onnx`]));
    expect(job.status).toBe('complete');
  });

  it.each([
    ['../../escaped.txt', /climbs out/],
    ['onnx/../../../../models/sift/gliner2-mini-v1/onnx/encoder.onnx', /climbs out/],
    ['/etc/cron.d/x', /absolute/],
  ])('refuses the entry %j, naming it, and writes nothing from it on', async (name, why) => {
    const { outcome, written, prefix, job } = await complete([
      ['metrics.json', METRICS],
      [name, 'hostile'],
      ['onnx/after.onnx', 'never written'],
    ]);
    expect('error' in outcome && outcome.error.message).toMatch(why);
    expect('error' in outcome && outcome.error.message).toContain(`names an unsafe path ${JSON.stringify(name)}`);
    expect(written.filter((k) => !k.startsWith(prefix) || k.includes('..') || k.includes('//'))).toEqual([]);
    expect(written).not.toContain(`${prefix}onnx/after.onnx`);
    // the step failed: Step Functions' catch records it (training.failed), the job never completes here
    expect(job.status).not.toBe('complete');
  });
});

/** `bytes` that gzip cannot shrink, the same every run (AES-CTR's keystream under a zero key). */
const incompressible = (bytes: number) =>
  createCipheriv('aes-128-ctr', Buffer.alloc(16), Buffer.alloc(16)).update(Buffer.alloc(bytes));

const sha256 = async (stream: Readable) => {
  const hash = createHash('sha256');
  for await (const chunk of stream) hash.update(chunk as Buffer);
  return hash.digest('hex');
};

describe('training.complete: a model archive larger than the memory it may use', () => {
  let dir: string;
  let emulators: Emulators;
  let s3: S3Client;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'sift-unpack-'));
    emulators = await startEmulators(dir, { bucket: 'unpack-bucket' });
    s3 = createS3Client({ credentials: emulators.credentials, endpoint: emulators.s3Endpoint });
  });
  afterAll(async () => {
    s3?.destroy();
    await emulators?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('streams each entry to S3 in parts: what it has read and not yet stored stays within two parts', async () => {
    // a full fine-tune's weights stand here as 4 parts' worth of one file; a 1,024 MB Lambda that
    // buffered a whole file (or archive) fails on ~0.8 GB of weights, so what is held must not grow
    // with the file: the peak of (archive bytes read − bytes S3 has stored) is measured
    const weights = incompressible(4 * MIN_PART_BYTES + 12_345);
    const archive = tarGz(
      [
        ['metrics.json', METRICS],
        ['model.safetensors', weights],
        ['onnx/encoder.onnx', incompressible(MIN_PART_BYTES + 7)],
      ],
      constants.Z_NO_COMPRESSION, // stored as is: compressing random bytes only costs time
    );
    const meter = { read: 0, stored: 0, peak: 0 };
    enforceS3UploadRules(s3, (bytes) => (meter.stored += bytes));
    class Metered extends S3BlobStore {
      override async stream(key: string): Promise<Readable> {
        const counted = new Transform({
          transform(chunk: Buffer, _encoding, done) {
            meter.read += chunk.length;
            meter.peak = Math.max(meter.peak, meter.read - meter.stored);
            done(null, chunk);
          },
        });
        return (await super.stream(key)).pipe(counted);
      }
    }
    const blobs = new Metered(s3, 'unpack-bucket', MIN_PART_BYTES);
    await blobs.ensureBucket();
    const { svc: memory, teamId } = await teamWithDataset();
    const job = await newJob(memory, teamId);
    const svc = { ...memory, blobs };
    const artifactKey = `jobs/${teamId}/${job.id}/sagemaker/output/model.tar.gz`;
    await blobs.put(artifactKey, archive);
    meter.stored = 0;

    const done = await completeTraining(svc, {
      teamId,
      jobId: job.id,
      trainingResult: { modelArtifacts: blobs.uri(artifactKey) },
    });

    const peak = meter.peak;
    expect(done).toEqual({ status: 'complete' });
    expect(meter.read).toBeGreaterThanOrEqual(archive.length);
    expect(peak).toBeLessThan(2 * MIN_PART_BYTES + 1024 * 1024);
    const prefix = modelPrefix(teamId, job.id);
    expect(await sha256(await blobs.stream(`${prefix}model.safetensors`))).toBe(
      createHash('sha256').update(weights).digest('hex'),
    );
    expect((await blobs.head(`${prefix}onnx/encoder.onnx`))?.size).toBe(MIN_PART_BYTES + 7);
  }, 60_000);
});

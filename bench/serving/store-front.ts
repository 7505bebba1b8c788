/**
 * What the stores' SigV4 front (src/local/storeFront.ts) costs per request: the same S3 SDK calls
 * against s3rver directly on TCP (as local mode ran before the front, fixed credentials) and
 * through the front (signature checked, then proxied to s3rver on its unix socket), alternating
 * rounds so both see the same machine load. `npx tsx bench/serving/store-front.ts` (BENCH_OPS, BENCH_ROUNDS).
 *
 * Prints the median milliseconds per call for small PutObject (hex payload hash: buffered and
 * checked), HeadObject, GetObject, a 4 MiB streamed PutObject (UNSIGNED-PAYLOAD: streamed through),
 * and 50-at-once small puts (per call, wall clock / 50).
 */
import { GetObjectCommand, HeadObjectCommand, PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import S3rver from 's3rver';
import { createS3Client } from '../../src/adapters/aws';
import { startEmulators } from '../../src/local/emulators';

const OPS = Number(process.env['BENCH_OPS'] ?? 200);
const ROUNDS = Number(process.env['BENCH_ROUNDS'] ?? 3);
const BUCKET = 'bench';
const BIG = Buffer.alloc(4 * 1024 * 1024, 97);

type Scenario = (s3: S3Client, i: number) => Promise<unknown>;
const scenarios: Record<string, { ops: number; run: Scenario; batch?: number }> = {
  'PutObject 1 KiB (signed hash)': { ops: OPS, run: (s3, i) => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `small/${i}`, Body: 'x'.repeat(1024) })) },
  HeadObject: { ops: OPS, run: (s3, i) => s3.send(new HeadObjectCommand({ Bucket: BUCKET, Key: `small/${i}` })) },
  'GetObject 1 KiB': {
    ops: OPS,
    run: async (s3, i) => (await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: `small/${i}` }))).Body!.transformToString(),
  },
  'PutObject 4 MiB stream (unsigned payload)': {
    ops: Math.max(10, OPS / 10),
    run: (s3, i) => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `big/${i}`, Body: Readable.from([BIG]), ContentLength: BIG.length })),
  },
  'PutObject 1 KiB, 50 at once (per call)': { ops: OPS, batch: 50, run: (s3, i) => s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: `many/${i}`, Body: 'x'.repeat(1024) })) },
};

async function measure(s3: S3Client, scenario: { ops: number; run: Scenario; batch?: number }): Promise<number> {
  const batch = scenario.batch ?? 1;
  const start = performance.now();
  for (let i = 0; i < scenario.ops; i += batch) {
    await Promise.all(Array.from({ length: Math.min(batch, scenario.ops - i) }, (_, j) => scenario.run(s3, i + j)));
  }
  return (performance.now() - start) / scenario.ops;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'sift-bench-front-'));
  const direct = new S3rver({ address: '127.0.0.1', port: 0, directory: join(dir, 'direct'), silent: true, configureBuckets: [{ name: BUCKET }] });
  const address = await direct.run();
  const directClient = createS3Client({ credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }, endpoint: `http://127.0.0.1:${address.port}` });
  const emulators = await startEmulators(join(dir, 'front'), { bucket: BUCKET });
  const frontClient = createS3Client({ credentials: emulators.credentials, endpoint: emulators.s3Endpoint });

  const results: Record<string, { direct: number[]; front: number[] }> = {};
  for (let round = 0; round < ROUNDS; round += 1) {
    for (const [name, scenario] of Object.entries(scenarios)) {
      const r = (results[name] ??= { direct: [], front: [] });
      // alternate which side goes first, so drift in machine load falls on both
      if (round % 2 === 0) {
        r.direct.push(await measure(directClient, scenario));
        r.front.push(await measure(frontClient, scenario));
      } else {
        r.front.push(await measure(frontClient, scenario));
        r.direct.push(await measure(directClient, scenario));
      }
    }
  }
  console.log(`median ms per call over ${ROUNDS} rounds (s3rver direct on TCP vs through the SigV4 front)`);
  for (const [name, r] of Object.entries(results)) {
    const d = median(r.direct);
    const f = median(r.front);
    console.log(`${name.padEnd(44)} direct ${d.toFixed(2).padStart(7)}   front ${f.toFixed(2).padStart(7)}   (+${(f - d).toFixed(2)})`);
  }
  await emulators.close();
  await direct.close();
  await rm(dir, { recursive: true, force: true });
}

await main();

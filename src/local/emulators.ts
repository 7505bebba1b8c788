import dynalite from 'dynalite';
import { mkdir } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import S3rver from 's3rver';

/** Credentials s3rver insists on; dynalite accepts anything. Loopback-only services, so not secrets. */
export const EMULATOR_CREDENTIALS = { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' };

export interface Emulators {
  dynamoEndpoint: string;
  s3Endpoint: string;
  close(): Promise<void>;
}

/**
 * DynamoDB (dynalite, LevelDB on disk) and S3 (s3rver, files on disk), in this process, on
 * 127.0.0.1 only. State lives under `dataDir` and survives restarts.
 */
export async function startEmulators(dataDir: string, opts: { s3Port?: number; bucket: string }): Promise<Emulators> {
  const dynamoDir = join(dataDir, 'dynamodb');
  const s3Dir = join(dataDir, 's3');
  await mkdir(dynamoDir, { recursive: true });
  await mkdir(s3Dir, { recursive: true });

  const dynamo = dynalite({ path: dynamoDir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    dynamo.once('error', reject);
    dynamo.listen(0, '127.0.0.1', () => resolve());
  });
  const dynamoPort = (dynamo.address() as AddressInfo).port;

  const s3 = new S3rver({
    address: '127.0.0.1',
    port: opts.s3Port ?? 0,
    directory: s3Dir,
    silent: true,
    configureBuckets: [
      {
        name: opts.bucket,
        configs: [
          // Browsers upload to presigned URLs directly, so the bucket must answer CORS.
          `<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod><AllowedHeader>*</AllowedHeader></CORSRule></CORSConfiguration>`,
        ],
      },
    ],
  });
  const s3Address = await s3.run();

  return {
    dynamoEndpoint: `http://127.0.0.1:${dynamoPort}`,
    s3Endpoint: `http://127.0.0.1:${s3Address.port}`,
    async close() {
      await s3.close();
      await new Promise<void>((resolve) => dynamo.close(() => resolve()));
    },
  };
}

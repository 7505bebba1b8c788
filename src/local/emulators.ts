import dynalite from 'dynalite';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import type { StoreCredentials } from './sigv4';
import { startStoreFront } from './storeFront';

export interface Emulators {
  dynamoEndpoint: string;
  s3Endpoint: string;
  /** This start's secret: both fronts accept only requests signed with it (SigV4). */
  credentials: StoreCredentials;
  /**
   * Origins whose pages may call the S3 endpoint from a browser (the console's presigned uploads);
   * none until set. Set once the API listens, when its origin is known.
   */
  allowBrowserOrigins(origins: readonly string[]): void;
  close(): Promise<void>;
}

/** The file, in the data dir, where each start writes its store credentials (AWS shared-credentials format, mode 0600). */
export const STORE_CREDENTIALS_FILE = 'store-credentials';

/** Fresh credentials for one start: nothing fixed for another process or a web page to know. */
export function randomStoreCredentials(): StoreCredentials {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  const id = [...randomBytes(11)].map((b) => alphabet[b % 32]).join('');
  return { accessKeyId: `SIFTLOCAL${id}`, secretAccessKey: randomBytes(30).toString('base64url') };
}

/** DynamoDB signs its JSON bodies' hash; its largest request (BatchWriteItem) is 16 MB. */
const DYNAMO_MAX_BODY = 16 * 1024 * 1024 + 64 * 1024;
/** The S3 SDK signs the hash of bodies it holds in memory (strings, buffers); streams go unsigned. */
const S3_MAX_VERIFIED_BODY = 256 * 1024 * 1024;

/**
 * DynamoDB (dynalite, LevelDB on disk) and S3 (s3rver, files on disk), in this process. Neither
 * emulator checks signatures, so neither is on the network: each listens on a unix socket in a
 * fresh directory only this user can open, behind a front on 127.0.0.1 (src/local/storeFront.ts)
 * that lets through only requests signed with this start's random credentials. The S3 front is on
 * `s3Port` (presigned URLs point there), DynamoDB's on a random port. State lives under `dataDir`
 * and survives restarts; the credentials do not.
 */
export async function startEmulators(
  dataDir: string,
  opts: { s3Port?: number; bucket: string; credentials?: StoreCredentials },
): Promise<Emulators> {
  const dynamoDir = join(dataDir, 'dynamodb');
  const s3Dir = join(dataDir, 's3');
  await mkdir(dynamoDir, { recursive: true });
  await mkdir(s3Dir, { recursive: true });
  const credentials = opts.credentials ?? randomStoreCredentials();
  // mkdtemp makes it 0700; short, so the socket paths stay under the 107-byte limit
  const socketDir = await mkdtemp(join(tmpdir(), 'sift-stores-'));
  const dynamoSocket = join(socketDir, 'dynamodb.sock');
  const s3Socket = join(socketDir, 's3.sock');
  const closers: (() => Promise<void>)[] = [() => rm(socketDir, { recursive: true, force: true })];
  const close = async () => {
    for (const closer of closers.splice(0).reverse()) await closer();
  };

  try {
    const dynamo = dynalite({ path: dynamoDir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
    await new Promise<void>((resolve, reject) => {
      dynamo.once('error', reject);
      dynamo.listen(dynamoSocket, () => resolve());
    });
    closers.push(() => new Promise<void>((resolve) => dynamo.close(() => resolve())));

    // No CORS rule in the bucket: the front answers browsers itself (and drops s3rver's answers,
    // which a data dir from an older version may still configure with AllowedOrigin *).
    const s3 = new S3rver({
      port: s3Socket,
      directory: s3Dir,
      silent: true,
      configureBuckets: [{ name: opts.bucket }],
    });
    await s3.run();
    closers.push(() => s3.close());

    let origins: readonly string[] = [];
    const dynamoFront = await startStoreFront({
      service: 'dynamodb',
      credentials,
      upstreamSocket: dynamoSocket,
      host: '127.0.0.1',
      port: 0,
      maxVerifiedBodyBytes: DYNAMO_MAX_BODY,
    });
    closers.push(() => dynamoFront.close());
    const s3Front = await startStoreFront({
      service: 's3',
      credentials,
      upstreamSocket: s3Socket,
      host: '127.0.0.1',
      port: opts.s3Port ?? 0,
      browserOrigins: () => origins,
      maxVerifiedBodyBytes: S3_MAX_VERIFIED_BODY,
    });
    closers.push(() => s3Front.close());
    await writeCredentialsFile(join(dataDir, STORE_CREDENTIALS_FILE), credentials);

    return {
      dynamoEndpoint: `http://127.0.0.1:${dynamoFront.port}`,
      s3Endpoint: `http://127.0.0.1:${s3Front.port}`,
      credentials,
      allowBrowserOrigins(list) {
        origins = [...list];
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/**
 * For tools of the same user that talk to this start's stores (`sift models publish --endpoint-url
 * http://127.0.0.1:8081`): AWS_SHARED_CREDENTIALS_FILE=<data dir>/store-credentials. Readable by
 * this user only, who can read the stores' files in the data dir anyway.
 */
async function writeCredentialsFile(file: string, credentials: StoreCredentials): Promise<void> {
  const text = [
    "# The local stores' credentials for the current `sift serve` run (new at every start).",
    '[default]',
    `aws_access_key_id = ${credentials.accessKeyId}`,
    `aws_secret_access_key = ${credentials.secretAccessKey}`,
    '',
  ].join('\n');
  // a fresh file, so the mode holds from its first byte (a mode applies only when a file is created)
  await rm(file, { force: true });
  await writeFile(file, text, { mode: 0o600, flag: 'wx' });
}

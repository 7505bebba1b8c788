/**
 * Local mode's embedded stores answer only the service (#25 item 3, security review F3 and F9).
 * s3rver lets unsigned requests through and never checks SigV4, dynalite checks nothing, and the
 * bucket answered CORS for any origin: any process or web page on the host could list, read and
 * overwrite every team's files. Here, against a real local stack: only requests signed with this
 * start's secret reach the stores (SDK calls and presigned URLs until their expiry), the browser
 * gets CORS for the console's origin only, and a declared dataset size is signed into the upload URL.
 */
import { DynamoDBClient, GetItemCommand, ListTablesCommand, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { GetObjectCommand, ListObjectsCommand, PutBucketCorsCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { SignatureV4 } from '@smithy/signature-v4';
import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { request } from 'node:http';
import fc from 'fast-check';
import { join } from 'node:path';
import { createS3Client } from '../../src/adapters/aws';
import { randomStoreCredentials, STORE_CREDENTIALS_FILE } from '../../src/local/emulators';
import { consoleOrigins } from '../../src/runtimes/local/main';
import { NodeSha256, SigV4Verifier } from '../../src/local/sigv4';
import { jsonl, TestStack } from '../helpers/localStack';

let stack: TestStack;
let s3Endpoint: string;
let dynamoEndpoint: string;
const BUCKET = 'sift-data';
/** One file of one team, as the service wrote it. */
const VICTIM_KEY = 'datasets/team-victim/people/v1/source/u1/rows.jsonl';
const VICTIM_BODY = jsonl([{ text: 'secret row', label: 'x' }]);

interface RawResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** A plain HTTP request with exactly these headers (fetch will not send a false content-length). */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string | number>; body?: string | Buffer } = {},
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers ?? {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

const s3Code = (res: RawResponse) => /<Code>([^<]+)<\/Code>/.exec(res.body)?.[1];
const dynamoCode = (res: RawResponse) => (JSON.parse(res.body) as { __type: string }).__type.split('#')[1];
const sha256 = (s: string | Buffer) => createHash('sha256').update(s).digest('hex');
const stored = async (key: string) => ((await stack.svc.blobs.head(key)) ? stack.svc.blobs.getText(key) : undefined);

/** Signs a request as the SDK does (the secret given), so the test can then send it changed. */
async function signS3(
  credentials: { accessKeyId: string; secretAccessKey: string },
  method: string,
  path: string,
  headers: Record<string, string>,
) {
  const url = new URL(s3Endpoint);
  const signer = new SignatureV4({
    credentials,
    region: 'us-east-1',
    service: 's3',
    sha256: NodeSha256,
    uriEscapePath: false,
  });
  const signed = await signer.sign({
    method,
    protocol: 'http:',
    hostname: url.hostname,
    port: Number(url.port),
    path,
    query: {},
    headers: { host: url.host, ...headers },
  });
  return signed.headers as Record<string, string>;
}
async function healthy() {
  expect((await stack.call('GET', '/health', { key: null })).status).toBe(200);
}

/** A console on another origin (SIFT_CONSOLE_ORIGINS): it uploads to S3 too, as the bucket's CORS rule allows on AWS. */
const DEV_CONSOLE = 'http://localhost:5173';

beforeAll(async () => {
  stack = await TestStack.start({ config: { consoleOrigins: [DEV_CONSOLE] } });
  const s3 = await stack.svc.blobs.s3.config.endpoint!();
  s3Endpoint = `${s3.protocol}//${s3.hostname}:${s3.port}`;
  const dynamo = await stack.svc.records.client.config.endpoint!();
  dynamoEndpoint = `${dynamo.protocol}//${dynamo.hostname}:${dynamo.port}`;
  await stack.svc.blobs.put(VICTIM_KEY, VICTIM_BODY);
});
afterAll(async () => stack?.stop());

describe('the S3 endpoint refuses what is not signed with this start’s secret', () => {
  it('unsigned list, get and put → 403 AccessDenied (S3 XML); nothing is read or written', async () => {
    const list = await raw(`${s3Endpoint}/${BUCKET}?prefix=datasets/`);
    expect(list.status).toBe(403);
    expect(s3Code(list)).toBe('AccessDenied');
    expect(list.body).not.toContain('team-victim');

    const get = await raw(`${s3Endpoint}/${BUCKET}/${VICTIM_KEY}`);
    expect(get.status).toBe(403);
    expect(get.body).not.toContain('secret row');

    const overwrite = await raw(`${s3Endpoint}/${BUCKET}/${VICTIM_KEY}`, { method: 'PUT', body: 'overwritten' });
    expect(overwrite.status).toBe(403);
    expect(s3Code(overwrite)).toBe('AccessDenied');
    const models = await raw(`${s3Endpoint}/${BUCKET}/models/sift/gliner2-mini-v1/manifest.json`, {
      method: 'PUT',
      body: '{}',
    });
    expect(models.status).toBe(403);
    // read back through the service's own signed client
    expect(await stored(VICTIM_KEY)).toBe(VICTIM_BODY);
    expect(await stack.svc.blobs.head('models/sift/gliner2-mini-v1/manifest.json')).toBeUndefined();
    await healthy();
  });

  it('the old fixed emulator key, or the right key id with a wrong secret → 403; the service’s own client works', async () => {
    const fixed = createS3Client({
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
      endpoint: s3Endpoint,
    });
    fixed.config.maxAttempts = async () => 1;
    await expect(fixed.send(new ListObjectsCommand({ Bucket: BUCKET, Prefix: 'datasets/' }))).rejects.toMatchObject({
      name: 'InvalidAccessKeyId',
      $metadata: { httpStatusCode: 403 },
    });
    const own = await stack.svc.blobs.s3.config.credentials();
    const guessed = createS3Client({
      credentials: { accessKeyId: own.accessKeyId, secretAccessKey: 'not-the-secret' },
      endpoint: s3Endpoint,
    });
    await expect(
      guessed.send(new PutObjectCommand({ Bucket: BUCKET, Key: VICTIM_KEY, Body: 'overwritten' })),
    ).rejects.toMatchObject({
      name: 'SignatureDoesNotMatch',
      $metadata: { httpStatusCode: 403 },
    });
    expect(await stored(VICTIM_KEY)).toBe(VICTIM_BODY);
    expect(await stack.svc.blobs.list('datasets/team-victim/')).toEqual([VICTIM_KEY]);
  });

  it('a header-signed request dated more than 15 minutes off → 403 RequestTimeTooSkewed', async () => {
    const own = await stack.svc.blobs.s3.config.credentials();
    const late = createS3Client({ credentials: own, endpoint: s3Endpoint });
    late.config.systemClockOffset = -20 * 60_000;
    late.config.maxAttempts = async () => 1;
    await expect(late.send(new GetObjectCommand({ Bucket: BUCKET, Key: VICTIM_KEY }))).rejects.toMatchObject({
      name: 'RequestTimeTooSkewed',
      $metadata: { httpStatusCode: 403 },
    });
  });

  it('a signed request whose body is not the one its x-amz-content-sha256 signs → 400, the object untouched', async () => {
    const own = await stack.svc.blobs.s3.config.credentials();
    const path = `/${BUCKET}/${VICTIM_KEY}`;
    const headers = await signS3(own, 'PUT', path, {
      'content-length': '11',
      'x-amz-content-sha256': sha256('legitimate!'),
    });
    const res = await raw(`${s3Endpoint}${path}`, { method: 'PUT', headers, body: 'tampered!!!' });
    expect(res.status).toBe(400);
    expect(s3Code(res)).toBe('XAmzContentSHA256Mismatch');
    expect(await stored(VICTIM_KEY)).toBe(VICTIM_BODY);
  });

  it('aws-chunked streaming signatures are refused (501), not stored with their chunk framing', async () => {
    const own = await stack.svc.blobs.s3.config.credentials();
    const path = `/${BUCKET}/chunked/object`;
    const headers = await signS3(own, 'PUT', path, {
      'content-length': '5',
      'x-amz-content-sha256': 'STREAMING-AWS4-HMAC-SHA256-PAYLOAD',
    });
    const res = await raw(`${s3Endpoint}${path}`, { method: 'PUT', headers, body: 'hello' });
    expect(res.status).toBe(501);
    expect(await stack.svc.blobs.head('chunked/object')).toBeUndefined();
  });
});

describe('what the service signs passes', () => {
  it('keys with spaces, +, =, &, non-ASCII round-trip through the SDK and through presigned URLs', async () => {
    const key = 'odd keys/a b+c=d&e/ü é~(1).jsonl';
    await stack.svc.blobs.put(key, 'via the SDK');
    expect(await stack.svc.blobs.getText(key)).toBe('via the SDK');
    expect(await stack.svc.blobs.list('odd keys/')).toEqual([key]);
    const put = await fetch(await stack.svc.blobs.presignPut(key, 60, { contentLength: 12 }), {
      method: 'PUT',
      body: 'via the URL!',
    });
    expect(put.status).toBe(200);
    expect(await (await fetch(await stack.svc.blobs.presignGet(key, 60, 'x.jsonl'))).text()).toBe('via the URL!');
    expect(await stack.svc.blobs.deletePrefix('odd keys/')).toBe(1);
  });
});

describe('presigned URLs: valid until their expiry, for exactly what was signed', () => {
  it('a presigned GET works; the same signature for another key or another expiry → 403 SignatureDoesNotMatch', async () => {
    const url = await stack.svc.blobs.presignGet(VICTIM_KEY, 600);
    const ok = await raw(url);
    expect(ok.status).toBe(200);
    expect(ok.body).toBe(VICTIM_BODY);

    const otherKey = url.replace('/team-victim/', '/team-other/');
    expect(otherKey).not.toBe(url);
    const res = await raw(otherKey);
    expect(res.status).toBe(403);
    expect(s3Code(res)).toBe('SignatureDoesNotMatch');

    const longer = url.replace('X-Amz-Expires=600', 'X-Amz-Expires=604800');
    expect(longer).not.toBe(url);
    expect(s3Code(await raw(longer))).toBe('SignatureDoesNotMatch');
    const noSignature = url.replace(/&?X-Amz-Signature=[0-9a-f]+/, '');
    expect((await raw(noSignature)).status).toBe(400);
  });

  it('an expired presigned URL (signed two hours ago for one hour) → 403 AccessDenied, nothing written', async () => {
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    const put = await getSignedUrl(stack.svc.blobs.s3, new PutObjectCommand({ Bucket: BUCKET, Key: VICTIM_KEY }), {
      expiresIn: 3600,
      signingDate: twoHoursAgo,
    });
    const res = await raw(put, { method: 'PUT', body: 'overwritten' });
    expect(res.status).toBe(403);
    expect(s3Code(res)).toBe('AccessDenied');
    expect(res.body).toContain('Request has expired');
    expect(await stored(VICTIM_KEY)).toBe(VICTIM_BODY);
    // the same URL signed now is accepted: the date is what failed
    const fresh = await getSignedUrl(stack.svc.blobs.s3, new GetObjectCommand({ Bucket: BUCKET, Key: VICTIM_KEY }), {
      expiresIn: 3600,
    });
    expect((await raw(fresh)).status).toBe(200);
  });

  it('a presigned PUT with a signed content-length stores that length and refuses any other (longer, shorter, chunked)', async () => {
    const key = 'presigned/bounded.jsonl';
    const body = jsonl([{ text: 'exactly this', label: 'x' }]);
    const url = await stack.svc.blobs.presignPut(key, 600, { contentLength: Buffer.byteLength(body) });
    expect(new URL(url).searchParams.get('X-Amz-SignedHeaders')).toBe('content-length;host');

    const longer = body + 'x'.repeat(1000);
    const tooLong = await raw(url, {
      method: 'PUT',
      headers: { 'content-length': Buffer.byteLength(longer) },
      body: longer,
    });
    expect(tooLong.status).toBe(403);
    expect(s3Code(tooLong)).toBe('SignatureDoesNotMatch');
    const tooShort = await raw(url, { method: 'PUT', headers: { 'content-length': 3 }, body: 'abc' });
    expect(tooShort.status).toBe(403);
    const chunked = await raw(url, { method: 'PUT', headers: { 'transfer-encoding': 'chunked' }, body });
    expect(chunked.status).toBe(403);
    expect(await stack.svc.blobs.head(key)).toBeUndefined();

    const exact = await fetch(url, { method: 'PUT', body });
    expect(exact.status).toBe(200);
    expect(await stored(key)).toBe(body);
    await healthy();
  });
});

describe('CORS: the console’s origin only', () => {
  const preflight = (origin: string) =>
    raw(`${s3Endpoint}/${BUCKET}/some/key`, {
      method: 'OPTIONS',
      headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'content-type' },
    });

  it('a preflight from http://evil.example gets no Access-Control-Allow-Origin; from the console’s origin (127.0.0.1 and localhost forms) it does', async () => {
    const evil = await preflight('http://evil.example');
    expect(evil.status).toBe(403);
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();

    const port = new URL(stack.url).port;
    for (const origin of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
      const ok = await preflight(origin);
      expect(ok.status).toBe(200);
      expect(ok.headers['access-control-allow-origin']).toBe(origin);
      expect(ok.headers['access-control-allow-methods']).toContain('PUT');
      expect(ok.headers['access-control-allow-headers']).toBe('content-type');
    }
    // another port on this host is another origin
    expect(
      (await preflight(`http://127.0.0.1:${Number(port) + 1}`)).headers['access-control-allow-origin'],
    ).toBeUndefined();
  });

  it('a configured console origin gets CORS too; a requested header outside the bucket’s rule is refused, as S3 refuses it', async () => {
    const ok = await preflight(DEV_CONSOLE);
    expect(ok.status).toBe(200);
    expect(ok.headers['access-control-allow-origin']).toBe(DEV_CONSOLE);
    // S3: each Access-Control-Request-Headers entry must match an AllowedHeader (src/http/cors.ts UPLOAD_CORS)
    const extra = await raw(`${s3Endpoint}/${BUCKET}/some/key`, {
      method: 'OPTIONS',
      headers: {
        origin: DEV_CONSOLE,
        'access-control-request-method': 'PUT',
        'access-control-request-headers': 'content-type, x-amz-meta-owner',
      },
    });
    expect(extra.status).toBe(403);
    expect(extra.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('responses carry the console’s origin only, even when the bucket itself has an allow-all CORS rule (as data dirs from older versions do)', async () => {
    await stack.svc.blobs.s3.send(
      new PutBucketCorsCommand({
        Bucket: BUCKET,
        CORSConfiguration: {
          CORSRules: [{ AllowedOrigins: ['*'], AllowedMethods: ['GET', 'PUT'], AllowedHeaders: ['*'] }],
        },
      }),
    );
    const url = await stack.svc.blobs.presignGet(VICTIM_KEY, 600);
    const evil = await raw(url, { headers: { origin: 'http://evil.example' } });
    expect(evil.status).toBe(200);
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    expect((await preflight('http://evil.example')).headers['access-control-allow-origin']).toBeUndefined();
    const consoleOrigin = new URL(stack.url).origin;
    const ok = await raw(url, { headers: { origin: consoleOrigin } });
    expect(ok.headers['access-control-allow-origin']).toBe(consoleOrigin);
  });

  it('consoleOrigins: a loopback or wildcard bind is every loopback form of the port; another host is itself plus those', () => {
    expect(consoleOrigins('127.0.0.1', 8080)).toEqual([
      'http://127.0.0.1:8080',
      'http://localhost:8080',
      'http://[::1]:8080',
    ]);
    expect(consoleOrigins('0.0.0.0', 9000)).toEqual([
      'http://127.0.0.1:9000',
      'http://localhost:9000',
      'http://[::1]:9000',
    ]);
    expect(consoleOrigins('192.168.1.20', 8080)[0]).toBe('http://192.168.1.20:8080');
  });
});

describe('the DynamoDB endpoint answers only the service', () => {
  const item = { pk: { S: 'TEAM#victim' }, sk: { S: 'BALANCE' }, credits: { N: '100' } };

  it('unsigned, wrongly signed or signed with the old fixed key → refused with DynamoDB’s error; nothing is written', async () => {
    const unsigned = await raw(dynamoEndpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amz-target': 'DynamoDB_20120810.PutItem' },
      body: JSON.stringify({ TableName: 'sift-records', Item: item }),
    });
    expect(unsigned.status).toBe(400);
    expect(dynamoCode(unsigned)).toBe('MissingAuthenticationTokenException');

    const own = await stack.svc.records.client.config.credentials();
    const client = (credentials: { accessKeyId: string; secretAccessKey: string }) =>
      new DynamoDBClient({ region: 'us-east-1', endpoint: dynamoEndpoint, credentials, maxAttempts: 1 });
    await expect(
      client({ accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' }).send(
        new PutItemCommand({ TableName: 'sift-records', Item: item }),
      ),
    ).rejects.toMatchObject({
      name: 'UnrecognizedClientException',
    });
    await expect(
      client({ accessKeyId: own.accessKeyId, secretAccessKey: 'guess' }).send(
        new PutItemCommand({ TableName: 'sift-records', Item: item }),
      ),
    ).rejects.toMatchObject({
      name: 'InvalidSignatureException',
    });
    const read = await client(own).send(
      new GetItemCommand({ TableName: 'sift-records', Key: { pk: item.pk, sk: item.sk } }),
    );
    expect(read.Item).toBeUndefined();
    expect((await client(own).send(new ListTablesCommand({}))).TableNames).toContain('sift-records');
    await healthy();
  });
});

describe('per-start credentials', () => {
  it('are random, not the emulators’ fixed ones, and written for this user only to <data dir>/store-credentials', async () => {
    const own = await stack.svc.blobs.s3.config.credentials();
    expect(own.accessKeyId).not.toBe('S3RVER');
    expect(own.secretAccessKey).toHaveLength(40);
    const a = randomStoreCredentials();
    const b = randomStoreCredentials();
    expect(a.accessKeyId).not.toBe(b.accessKeyId);
    expect(a.secretAccessKey).not.toBe(b.secretAccessKey);
    const file = join(stack.dataDir, STORE_CREDENTIALS_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const text = await readFile(file, 'utf8');
    expect(text).toContain(`aws_access_key_id = ${own.accessKeyId}`);
    expect(text).toContain(`aws_secret_access_key = ${own.secretAccessKey}`);
  });
});

describe('POST /core/datasets/upload/url binds a declared size', () => {
  const reserve = async (name: string, extra: Record<string, unknown>) => {
    const res = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: name, file_name: 'rows.jsonl', ...extra },
    });
    expect(res.status).toBe(200);
    return res.body as { upload_url: string; version: number };
  };

  it('with size_bytes the URL signs content-length: another size is refused by storage and nothing is stored; the declared size uploads', async () => {
    const content = jsonl([
      { text: 'one', label: 'a' },
      { text: 'two', label: 'b' },
    ]);
    const url = await reserve('bounded', { size_bytes: Buffer.byteLength(content) });
    expect(new URL(url.upload_url).searchParams.get('X-Amz-SignedHeaders')).toBe('content-length;host');
    const bigger = content + 'x'.repeat(4096);
    expect((await fetch(url.upload_url, { method: 'PUT', body: bigger })).status).toBe(403);
    const nothing = await stack.call('POST', '/core/datasets/upload/process', {
      body: { dataset_name: 'bounded', version: url.version },
    });
    expect(nothing.status).toBe(409);
    expect(nothing.body.detail).toMatch(/No file has been uploaded/);
    expect((await fetch(url.upload_url, { method: 'PUT', body: content })).status).toBe(200);
    expect(
      (
        await stack.call('POST', '/core/datasets/upload/process', {
          body: { dataset_name: 'bounded', version: url.version },
        })
      ).status,
    ).toBe(202);
    await stack.service.idle();
    expect((await stack.call('GET', '/core/datasets/bounded/1')).body).toMatchObject({
      status: 'ready',
      size_bytes: Buffer.byteLength(content),
    });
  });

  it('without size_bytes the URL is as before (host signed only): existing clients keep working', async () => {
    const url = await reserve('unbounded', {});
    expect(new URL(url.upload_url).searchParams.get('X-Amz-SignedHeaders')).toBe('host');
    expect((await fetch(url.upload_url, { method: 'PUT', body: jsonl([{ text: 'a', label: 'x' }]) })).status).toBe(200);
  });
});

describe('SigV4Verifier on its own (no server)', () => {
  const credentials = randomStoreCredentials();
  const signedAt = new Date('2026-03-01T12:00:00Z');
  const verifier = new SigV4Verifier(credentials, 's3', () => new Date(signedAt.getTime() + 60_000));
  const host = '127.0.0.1:8081';
  const presigned = () =>
    getSignedUrl(
      createS3Client({ credentials, endpoint: `http://${host}` }),
      new PutObjectCommand({
        Bucket: BUCKET,
        Key: 'datasets/team-a/people/v1/source/u1/rows 1.jsonl',
        ContentLength: 42,
      }),
      { expiresIn: 3600, signingDate: signedAt },
    );
  const target = (url: string) => url.slice(`http://${host}`.length);
  const decoded = (t: string) => {
    const q = t.indexOf('?');
    const params = [...new URLSearchParams(t.slice(q + 1).replace(/\+/g, '%2B'))].sort();
    return JSON.stringify([t.slice(0, q), params]);
  };

  it('accepts the URL as signed, and nothing else once any character of its path or query changes what it says (fast-check)', async () => {
    const original = target(await presigned());
    const headers = { host, 'content-length': '42' };
    expect(await verifier.verify({ method: 'PUT', url: original, headers })).toMatchObject({
      ok: true,
      payloadHash: 'UNSIGNED-PAYLOAD',
      presigned: true,
    });
    expect(await verifier.verify({ method: 'GET', url: original, headers })).toMatchObject({ ok: false });
    expect(
      await verifier.verify({ method: 'PUT', url: original, headers: { ...headers, 'content-length': '43' } }),
    ).toMatchObject({ ok: false, refusal: 'mismatch' });
    expect(
      await verifier.verify({ method: 'PUT', url: original, headers: { ...headers, host: 'localhost:8081' } }),
    ).toMatchObject({ ok: false, refusal: 'mismatch' });
    await fc.assert(
      fc.asyncProperty(
        fc.nat({ max: original.length - 1 }),
        fc.constantFrom(...'aZ09/%&=.-_~+ A'.split('')),
        async (at, ch) => {
          const changed = original.slice(0, at) + ch + original.slice(at + 1);
          fc.pre(changed !== original && decoded(changed) !== decoded(original));
          const verdict = await verifier.verify({ method: 'PUT', url: changed, headers });
          expect(verdict.ok).toBe(false);
        },
      ),
      { seed: 25_005, numRuns: 400 },
    );
  });

  it('a header-signed request: another secret, a changed signed header, or a date 16 minutes off is refused', async () => {
    const signer = (secretAccessKey: string) =>
      new SignatureV4({
        credentials: { ...credentials, secretAccessKey },
        region: 'us-east-1',
        service: 's3',
        sha256: NodeSha256,
        uriEscapePath: false,
      });
    const sign = async (secret: string, date: Date) =>
      (
        await signer(secret).sign(
          {
            method: 'GET',
            protocol: 'http:',
            hostname: '127.0.0.1',
            port: 8081,
            path: '/sift-data/a%20b',
            query: { 'list-type': '2' },
            headers: { host, 'x-amz-content-sha256': sha256('') },
          },
          { signingDate: date },
        )
      ).headers as Record<string, string>;
    const url = '/sift-data/a%20b?list-type=2';
    const good = await sign(credentials.secretAccessKey, signedAt);
    expect(await verifier.verify({ method: 'GET', url, headers: good })).toMatchObject({ ok: true, presigned: false });
    expect(await verifier.verify({ method: 'GET', url: '/sift-data/a%20c?list-type=2', headers: good })).toMatchObject({
      ok: false,
      refusal: 'mismatch',
    });
    expect(
      await verifier.verify({ method: 'GET', url, headers: { ...good, 'x-amz-content-sha256': sha256('x') } }),
    ).toMatchObject({ ok: false, refusal: 'mismatch' });
    expect(await verifier.verify({ method: 'GET', url, headers: await sign('other-secret', signedAt) })).toMatchObject({
      ok: false,
      refusal: 'mismatch',
    });
    const late = await sign(credentials.secretAccessKey, new Date(signedAt.getTime() - 16 * 60_000));
    expect(await verifier.verify({ method: 'GET', url, headers: late })).toMatchObject({
      ok: false,
      refusal: 'skewed',
    });
  });
});

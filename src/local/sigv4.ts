import { SignatureV4 } from '@smithy/signature-v4';
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

/**
 * AWS Signature Version 4 verification for the local stores' fronts (src/local/storeFront.ts).
 *
 * The AWS SDK's own signer does the cryptography: a request is verified by signing its canonical
 * form again with the same inputs (date, scope, signed headers, payload hash) and comparing the two
 * signatures in constant time. Both forms are handled: the `Authorization` header (SDK calls) and
 * the presigned query string (upload and download URLs).
 * https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
 * https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html
 */

export interface StoreCredentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
/** S3 refuses requests whose time is further than this from its clock (RequestTimeTooSkewed). */
export const MAX_CLOCK_SKEW_MS = 15 * 60_000;
/** SigV4 presigned URLs last at most seven days. */
export const MAX_PRESIGNED_EXPIRY_S = 7 * 24 * 3600;

export type Refusal =
  | 'missing' // no signature at all
  | 'malformed' // an Authorization header or X-Amz-* parameters that cannot be parsed
  | 'unknown_key' // signed with another access key
  | 'mismatch' // the signature is not the one the secret gives
  | 'skewed' // header-signed, but its date is more than 15 minutes from now
  | 'expired' // a presigned URL past its X-Amz-Expires
  | 'not_yet_valid' // a presigned URL dated in the future
  | 'payload_missing' // no x-amz-content-sha256 where the service requires one
  | 'payload_unsupported'; // a streaming (aws-chunked) payload signature

export type Verdict =
  | {
      ok: true;
      /** `UNSIGNED-PAYLOAD` or the hex sha256 the signature covers: the body must hash to it. */
      payloadHash: string;
      /** Lower-case names of the headers the signature covers (`content-length` binds the size). */
      signedHeaders: string[];
      presigned: boolean;
    }
  | { ok: false; refusal: Refusal; message: string };

/** What the verifier needs of an HTTP request: the raw target as received, its headers, maybe its body. */
export interface RequestToVerify {
  method: string;
  /** The request target exactly as received (`/bucket/key%20name?x-id=PutObject`). */
  url: string;
  headers: IncomingHttpHeaders;
  /** The whole body, when the caller has buffered it (needed only where no x-amz-content-sha256 is sent). */
  body?: Uint8Array;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';
// Query-string auth parameters, by their exact names (as S3 reads them; the payload hash is the SDK presigner's).
const AUTH_QUERY_PARAMS = [
  'X-Amz-Algorithm',
  'X-Amz-Credential',
  'X-Amz-Date',
  'X-Amz-Expires',
  'X-Amz-SignedHeaders',
  'X-Amz-Signature',
];
const PAYLOAD_QUERY_PARAM = 'X-Amz-Content-Sha256';
const CONTENT_SHA256 = 'x-amz-content-sha256';
const SIGNATURE = /^[0-9a-f]{64}$/;
const LONG_DATE = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/;

/** node:crypto in the shape the SDK's signer takes for its hash (what @smithy/hash-node does). */
type SourceData = string | ArrayBuffer | ArrayBufferView;
const bytes = (data: SourceData) =>
  typeof data === 'string'
    ? data
    : data instanceof ArrayBuffer
      ? new Uint8Array(data)
      : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
export class NodeSha256 {
  private hash: Hash | Hmac;
  constructor(private readonly secret?: SourceData) {
    this.hash = this.fresh();
  }
  private fresh(): Hash | Hmac {
    return this.secret === undefined ? createHash('sha256') : createHmac('sha256', bytes(this.secret));
  }
  update(data: SourceData): void {
    this.hash.update(bytes(data));
  }
  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.hash.digest());
  }
  reset(): void {
    this.hash = this.fresh();
  }
}

type SignableRequest = Parameters<SignatureV4['presign']>[0];
type Query = Record<string, string | string[]>;

function parseLongDate(value: string | undefined): Date | undefined {
  const m = value ? LONG_DATE.exec(value) : null;
  if (!m) return undefined;
  const date = new Date(
    Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])),
  );
  return Number.isNaN(date.getTime()) ? undefined : date;
}

/** The query string decoded as received (`+` stays `+`: SigV4 encodes spaces as %20), or undefined if malformed. */
function parseQuery(raw: string): Query | undefined {
  const query: Query = {};
  for (const part of raw.split('&')) {
    if (!part) continue;
    const eq = part.indexOf('=');
    let key: string;
    let value: string;
    try {
      key = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
      value = eq < 0 ? '' : decodeURIComponent(part.slice(eq + 1));
    } catch {
      return undefined;
    }
    const prior = query[key];
    query[key] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  return query;
}

const single = (v: string | string[] | undefined): string | undefined => (Array.isArray(v) ? undefined : v);

/** Node joins repeated headers with ", " (set-cookie aside), as SigV4's canonical form does. */
function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

interface Scope {
  accessKeyId: string;
  shortDate: string;
  region: string;
  service: string;
}

function parseCredential(credential: string | undefined): Scope | undefined {
  const parts = credential?.split('/');
  if (parts?.length !== 5 || parts[4] !== 'aws4_request') return undefined;
  const [accessKeyId, shortDate, region, service] = parts as [string, string, string, string];
  if (!accessKeyId || !/^\d{8}$/.test(shortDate) || !region || !service) return undefined;
  return { accessKeyId, shortDate, region, service };
}

function sameSignature(expected: string | undefined, provided: string): boolean {
  if (!expected || !SIGNATURE.test(expected)) return false;
  return timingSafeEqual(Buffer.from(expected, 'ascii'), Buffer.from(provided, 'ascii'));
}

export class SigV4Verifier {
  private readonly signer: SignatureV4;

  /**
   * `service`: the signing name the credential scope must carry (`s3`, `dynamodb`). S3 signs the path
   * exactly as sent; every other service URI-escapes it again (the SDK's `uriEscapePath`).
   */
  constructor(
    private readonly credentials: StoreCredentials,
    private readonly service: string,
    private readonly now: () => Date = () => new Date(),
  ) {
    this.signer = new SignatureV4({
      credentials,
      region: 'us-east-1', // every call names the region of the request's own scope
      service,
      sha256: NodeSha256,
      uriEscapePath: service !== 's3',
      // never add an x-amz-content-sha256 the client did not sign
      applyChecksum: false,
    });
  }

  async verify(req: RequestToVerify): Promise<Verdict> {
    const q = req.url.indexOf('?');
    const path = q < 0 ? req.url : req.url.slice(0, q);
    const query = parseQuery(q < 0 ? '' : req.url.slice(q + 1));
    if (!query || !path.startsWith('/')) return refuse('malformed', 'The request target could not be parsed.');
    const authorization = headerValue(req.headers, 'authorization');
    const presigned = 'X-Amz-Algorithm' in query || 'X-Amz-Signature' in query;
    if (authorization !== undefined && presigned) {
      return refuse(
        'malformed',
        'Only one auth mechanism allowed: the Authorization header or the X-Amz-* query parameters.',
      );
    }
    if (presigned) return this.verifyPresigned(req, path, query);
    if (authorization !== undefined) return this.verifyHeader(req, path, query, authorization);
    return refuse('missing', 'Access Denied: the request is not signed.');
  }

  private async verifyHeader(
    req: RequestToVerify,
    path: string,
    query: Query,
    authorization: string,
  ): Promise<Verdict> {
    const space = authorization.indexOf(' ');
    const algorithm = space < 0 ? authorization : authorization.slice(0, space);
    if (algorithm !== ALGORITHM)
      return refuse('malformed', `Unsupported authorization type: only ${ALGORITHM} is accepted.`);
    const fields = new Map<string, string>();
    for (const part of authorization.slice(space + 1).split(',')) {
      const eq = part.indexOf('=');
      if (eq > 0) fields.set(part.slice(0, eq).trim(), part.slice(eq + 1).trim());
    }
    const scope = parseCredential(fields.get('Credential'));
    const signedHeaders = fields.get('SignedHeaders')?.split(';');
    const signature = fields.get('Signature');
    const longDate = headerValue(req.headers, 'x-amz-date');
    const date = parseLongDate(longDate);
    if (!scope || !signedHeaders?.length || !signature || !SIGNATURE.test(signature)) {
      return refuse(
        'malformed',
        'The authorization header is malformed: it needs Credential, SignedHeaders and Signature.',
      );
    }
    if (!date) return refuse('malformed', 'AWS authentication requires a valid x-amz-date header.');
    const problem = this.checkScope(scope, longDate!, signedHeaders);
    if (problem) return problem;
    if (Math.abs(this.now().getTime() - date.getTime()) > MAX_CLOCK_SKEW_MS) {
      return refuse('skewed', 'The difference between the request time and the current time is too large.');
    }
    const payloadHash = headerValue(req.headers, CONTENT_SHA256);
    const payload = this.checkPayload(payloadHash);
    if (payload) return payload;

    const headers: Record<string, string> = {};
    for (const name of signedHeaders) {
      const value = headerValue(req.headers, name);
      if (value === undefined) return refuse('mismatch', `The signed header '${name}' is missing from the request.`);
      headers[name] = value;
    }
    const signed = await this.signer.sign(this.signable(req, path, query, headers), {
      signingDate: date,
      signingRegion: scope.region,
      signingService: scope.service,
      signableHeaders: new Set(signedHeaders),
    });
    const expected = /Signature=([0-9a-f]+)/.exec(String(signed.headers.authorization))?.[1];
    if (!sameSignature(expected, signature)) return mismatch();
    return { ok: true, payloadHash: payloadHash ?? (await this.bodyHash(req.body)), signedHeaders, presigned: false };
  }

  private async verifyPresigned(req: RequestToVerify, path: string, query: Query): Promise<Verdict> {
    const param = (name: string) => single(query[name]);
    const algorithm = param('X-Amz-Algorithm');
    const scope = parseCredential(param('X-Amz-Credential'));
    const longDate = param('X-Amz-Date');
    const date = parseLongDate(longDate);
    const expiresText = param('X-Amz-Expires');
    const signedHeaders = param('X-Amz-SignedHeaders')?.split(';');
    const signature = param('X-Amz-Signature');
    if (
      algorithm !== ALGORITHM ||
      !scope ||
      !date ||
      !expiresText ||
      !signedHeaders?.length ||
      !signature ||
      !SIGNATURE.test(signature)
    ) {
      return refuse(
        'malformed',
        'Query-string authentication requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature parameters.',
      );
    }
    const expires = /^[1-9]\d{0,6}$/.test(expiresText) ? Number(expiresText) : NaN;
    if (!(expires <= MAX_PRESIGNED_EXPIRY_S))
      return refuse(
        'malformed',
        `X-Amz-Expires must be a whole number of seconds from 1 to ${MAX_PRESIGNED_EXPIRY_S}.`,
      );
    const problem = this.checkScope(scope, longDate!, signedHeaders);
    if (problem) return problem;
    const now = this.now().getTime();
    if (date.getTime() - now > MAX_CLOCK_SKEW_MS) return refuse('not_yet_valid', 'Request is not valid yet.');
    if (now > date.getTime() + expires * 1000) return refuse('expired', 'Request has expired.');

    // The request the SDK presigned: its other query parameters, its signed headers, and the
    // payload hash it put in the query (the presigner hoists it there from a header).
    const rest: Query = {};
    for (const [key, value] of Object.entries(query)) {
      if (!AUTH_QUERY_PARAMS.includes(key) && key !== PAYLOAD_QUERY_PARAM) rest[key] = value;
    }
    const inQuery = PAYLOAD_QUERY_PARAM in query;
    const payloadHash = inQuery ? single(query[PAYLOAD_QUERY_PARAM]) : UNSIGNED_PAYLOAD;
    if (payloadHash === undefined) return refuse('malformed', 'X-Amz-Content-Sha256 appears more than once.');
    const payload = this.checkPayload(payloadHash);
    if (payload) return payload;
    const headers: Record<string, string> = {};
    for (const name of signedHeaders) {
      const value = headerValue(req.headers, name);
      if (value === undefined) return refuse('mismatch', `The signed header '${name}' is missing from the request.`);
      headers[name] = value;
    }
    // The presigner hoists the hash from a header into the query: put it back where it came from
    // (the signer hoists it again); without it, S3 presigned URLs sign UNSIGNED-PAYLOAD.
    headers[inQuery ? PAYLOAD_QUERY_PARAM : CONTENT_SHA256] = payloadHash;
    const presignedAgain = await this.signer.presign(this.signable(req, path, rest, headers), {
      signingDate: date,
      expiresIn: expires,
      signingRegion: scope.region,
      signingService: scope.service,
      signableHeaders: new Set(signedHeaders),
      // signed headers stay headers; the payload hash goes back to the query only if it was there
      unhoistableHeaders: new Set([
        ...signedHeaders.filter((h) => h.startsWith('x-amz-')),
        ...(inQuery ? [] : [CONTENT_SHA256]),
      ]),
      ...(inQuery ? {} : { unsignableHeaders: new Set([CONTENT_SHA256]) }),
    });
    if (!sameSignature(single(presignedAgain.query?.['X-Amz-Signature'] ?? undefined), signature)) return mismatch();
    return { ok: true, payloadHash, signedHeaders, presigned: true };
  }

  private checkScope(scope: Scope, longDate: string, signedHeaders: string[]): Verdict | undefined {
    if (scope.accessKeyId !== this.credentials.accessKeyId) {
      return refuse('unknown_key', 'The AWS access key id you provided does not exist in our records.');
    }
    if (scope.service !== this.service || scope.shortDate !== longDate.slice(0, 8)) {
      return refuse(
        'malformed',
        `The credential scope must name this service ('${this.service}') and the request's date.`,
      );
    }
    if (!signedHeaders.includes('host') || signedHeaders.some((h) => h !== h.toLowerCase() || !h)) {
      return refuse('malformed', 'SignedHeaders must be lower-case names and include host.');
    }
    return undefined;
  }

  /** S3 requires the payload's hash (or UNSIGNED-PAYLOAD) on every header-signed request; aws-chunked bodies are not supported here. */
  private checkPayload(payloadHash: string | undefined): Verdict | undefined {
    if (payloadHash === undefined) {
      return this.service === 's3'
        ? refuse('payload_missing', 'Missing required header for this request: x-amz-content-sha256.')
        : undefined;
    }
    if (payloadHash.startsWith('STREAMING-')) {
      return refuse(
        'payload_unsupported',
        `The local store does not accept ${payloadHash} (aws-chunked) bodies; send UNSIGNED-PAYLOAD or the body's sha256.`,
      );
    }
    if (payloadHash !== UNSIGNED_PAYLOAD && !/^[0-9a-f]{64}$/.test(payloadHash)) {
      return refuse('malformed', 'x-amz-content-sha256 must be UNSIGNED-PAYLOAD or a lower-case hex sha256.');
    }
    // (the hash is the canonical request's last line: it is signed whether or not its header is listed)
    return undefined;
  }

  private signable(req: RequestToVerify, path: string, query: Query, headers: Record<string, string>): SignableRequest {
    const [hostname = '', port] = (headers.host ?? '').split(':');
    return {
      method: req.method,
      protocol: 'http:',
      hostname,
      ...(port ? { port: Number(port) } : {}),
      path,
      query,
      headers,
      ...(req.body ? { body: req.body } : {}),
    } as SignableRequest;
  }

  private async bodyHash(body: Uint8Array | undefined): Promise<string> {
    const hash = new NodeSha256();
    hash.update(body ?? new Uint8Array());
    return Buffer.from(await hash.digest()).toString('hex');
  }
}

function refuse(refusal: Refusal, message: string): Verdict {
  return { ok: false, refusal, message };
}

function mismatch(): Verdict {
  return refuse(
    'mismatch',
    'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
  );
}

import { createHash, randomUUID } from 'node:crypto';
import {
  Agent,
  createServer,
  request as upstreamRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { SigV4Verifier, UNSIGNED_PAYLOAD, type Refusal, type StoreCredentials, type Verdict } from './sigv4';
import { UPLOAD_CORS } from '../http/cors';

/**
 * The local stores' front door. s3rver checks no signature (it lets unsigned requests through and
 * never computes SigV4) and dynalite checks none either, so neither listens on a TCP port: each
 * serves a unix socket in a directory only this user can open, and this front listens on the
 * advertised 127.0.0.1 port. Every request must carry a SigV4 signature made with this start's
 * secret credentials (header-signed SDK calls, or a presigned URL until its expiry); anything else
 * gets the service's own error and never reaches the store. A request that passes is forwarded
 * unchanged (its body streamed, never held whole) except where a signed payload hash must be checked
 * first. Browsers get CORS answers for the console's origins only.
 */

export interface StoreFrontOptions {
  /** The signing name requests must be signed for; also picks the error format (S3 XML, DynamoDB JSON). */
  service: 's3' | 'dynamodb';
  credentials: StoreCredentials;
  /** The store's unix socket. */
  upstreamSocket: string;
  host: string;
  port: number;
  /** Origins whose pages may call this store from a browser (S3: the console's uploads); none when empty. */
  browserOrigins?: () => readonly string[];
  /**
   * The largest body buffered to check a signed payload hash before the store sees it (the SDK signs
   * the hash of bodies it holds in memory; streams go as UNSIGNED-PAYLOAD and are streamed through).
   */
  maxVerifiedBodyBytes: number;
  now?: () => Date;
}

export interface StoreFront {
  server: Server;
  port: number;
  close(): Promise<void>;
}

/** s3rver's built-in access key: it checks a key is known, never the signature (which we did). */
const S3RVER_ACCESS_KEY = 'S3RVER';
// Headers that describe one hop, not the request: never forwarded.
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'content-length',
  'expect',
]);

interface StoreError {
  status: number;
  code: string;
  message: string;
}

/** What S3 answers for each refusal (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html). */
const S3_REFUSALS: Record<Refusal, Omit<StoreError, 'message'>> = {
  missing: { status: 403, code: 'AccessDenied' },
  malformed: { status: 400, code: 'AuthorizationQueryParametersError' },
  unknown_key: { status: 403, code: 'InvalidAccessKeyId' },
  mismatch: { status: 403, code: 'SignatureDoesNotMatch' },
  skewed: { status: 403, code: 'RequestTimeTooSkewed' },
  expired: { status: 403, code: 'AccessDenied' },
  not_yet_valid: { status: 403, code: 'AccessDenied' },
  payload_missing: { status: 400, code: 'InvalidRequest' },
  payload_unsupported: { status: 501, code: 'NotImplemented' },
};

/** What DynamoDB answers (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Programming.Errors.html). */
const DYNAMO_REFUSALS: Record<Refusal, Omit<StoreError, 'message'>> = {
  missing: { status: 400, code: 'MissingAuthenticationTokenException' },
  malformed: { status: 400, code: 'IncompleteSignatureException' },
  unknown_key: { status: 400, code: 'UnrecognizedClientException' },
  mismatch: { status: 400, code: 'InvalidSignatureException' },
  skewed: { status: 400, code: 'InvalidSignatureException' },
  expired: { status: 400, code: 'InvalidSignatureException' },
  not_yet_valid: { status: 400, code: 'InvalidSignatureException' },
  payload_missing: { status: 400, code: 'InvalidSignatureException' },
  payload_unsupported: { status: 400, code: 'InvalidSignatureException' },
};

const xmlEscape = (s: string) => s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

export async function startStoreFront(opts: StoreFrontOptions): Promise<StoreFront> {
  const verifier = new SigV4Verifier(opts.credentials, opts.service, opts.now);
  const agent = new Agent({ keepAlive: true });
  const isS3 = opts.service === 's3';

  const allowedOrigin = (req: IncomingMessage): string | undefined => {
    const origin = req.headers.origin;
    return origin && opts.browserOrigins?.().includes(origin) ? origin : undefined;
  };
  const corsHeaders = (req: IncomingMessage): OutgoingHttpHeaders => {
    const origin = allowedOrigin(req);
    return isS3
      ? {
          vary: 'Origin',
          ...(origin
            ? {
                'access-control-allow-origin': origin,
                'access-control-expose-headers': UPLOAD_CORS.exposeHeaders.join(', '),
              }
            : {}),
        }
      : {};
  };

  // `cors: false`: a refused preflight, which matched no CORS rule, so S3 sends none of its headers
  const fail = (req: IncomingMessage, res: ServerResponse, error: StoreError, cors = true) => {
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const requestId = randomUUID();
    const body = isS3
      ? `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${error.code}</Code><Message>${xmlEscape(error.message)}</Message><RequestId>${requestId}</RequestId></Error>`
      : JSON.stringify({ __type: `com.amazon.coral.service#${error.code}`, message: error.message });
    res.writeHead(error.status, {
      'content-type': isS3 ? 'application/xml' : 'application/x-amz-json-1.0',
      'content-length': Buffer.byteLength(body),
      'x-amz-request-id': requestId,
      // the body of a refused request is never read: close rather than drain it
      connection: 'close',
      ...(cors ? corsHeaders(req) : {}),
    });
    res.end(body);
  };
  const refuse = (req: IncomingMessage, res: ServerResponse, verdict: Extract<Verdict, { ok: false }>) =>
    fail(req, res, { ...(isS3 ? S3_REFUSALS : DYNAMO_REFUSALS)[verdict.refusal], message: verdict.message });

  /** A CORS preflight, answered here: only the console's origins, only the methods it uses. */
  const preflight = (req: IncomingMessage, res: ServerResponse) => {
    const origin = allowedOrigin(req);
    const method = String(req.headers['access-control-request-method']);
    const requested = req.headers['access-control-request-headers'];
    // as S3: every requested header must be one the bucket's rule allows (UPLOAD_CORS)
    const allowedHeaders: readonly string[] = UPLOAD_CORS.headers;
    const requestedNames = (requested ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean);
    if (
      !origin ||
      !(UPLOAD_CORS.methods as readonly string[]).includes(method) ||
      !requestedNames.every((h) => allowedHeaders.includes(h))
    ) {
      fail(
        req,
        res,
        { status: 403, code: 'AccessDenied', message: 'CORSResponse: This CORS request is not allowed.' },
        false,
      );
      return;
    }
    res.writeHead(200, {
      'access-control-allow-origin': origin,
      'access-control-allow-methods': UPLOAD_CORS.methods.join(', '),
      ...(requested ? { 'access-control-allow-headers': requestedNames.join(', ') } : {}),
      'access-control-max-age': String(UPLOAD_CORS.maxAgeSeconds),
      vary: 'Origin, Access-Control-Request-Method, Access-Control-Request-Headers',
      'content-length': 0,
    });
    res.end();
  };

  /** The whole body, or undefined once it passes `limit` bytes. */
  const readBody = (req: IncomingMessage, limit: number) =>
    new Promise<Buffer | undefined>((resolve, reject) => {
      const chunks: Buffer[] = [];
      let size = 0;
      req.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > limit) {
          req.removeAllListeners('data');
          req.pause();
          resolve(undefined);
          return;
        }
        chunks.push(chunk);
      });
      req.once('end', () => resolve(Buffer.concat(chunks)));
      req.once('error', reject);
      req.once('aborted', () => reject(new Error('request aborted')));
    });

  const forward = (
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    headers: OutgoingHttpHeaders,
    body: Buffer | 'stream',
  ) => {
    const up = upstreamRequest(
      { socketPath: opts.upstreamSocket, agent, method: req.method, path, headers },
      (upRes) => {
        const out: OutgoingHttpHeaders = {};
        for (const [name, value] of Object.entries(upRes.headers)) {
          // the store's own CORS answers (s3rver's bucket rules) never reach a browser: ours do
          if (
            value === undefined ||
            name.startsWith('access-control-') ||
            name === 'vary' ||
            name === 'connection' ||
            name === 'keep-alive'
          )
            continue;
          out[name] = value;
        }
        res.writeHead(upRes.statusCode ?? 502, { ...out, ...corsHeaders(req) });
        upRes.pipe(res);
      },
    );
    up.on('error', () =>
      fail(req, res, {
        status: 500,
        code: isS3 ? 'InternalError' : 'InternalServerError',
        message: 'The local store did not answer.',
      }),
    );
    // a client that goes away mid-upload aborts the store's request too
    res.on('close', () => {
      if (!res.writableFinished) up.destroy();
    });
    if (body === 'stream') req.pipe(up);
    else up.end(body);
  };

  /** `expectsContinue`: the client waits for 100 Continue before sending its body, sent only once the signature holds. */
  const handle = async (req: IncomingMessage, res: ServerResponse, expectsContinue: boolean) => {
    if (isS3 && req.method === 'OPTIONS' && req.headers.origin && req.headers['access-control-request-method']) {
      preflight(req, res);
      return;
    }
    const url = req.url ?? '/';
    // DynamoDB clients other than the SDK sign the body's hash without sending it: hash what came
    const needsBody =
      !isS3 && req.headers['x-amz-content-sha256'] === undefined && req.headers.authorization !== undefined;
    let body: Buffer | undefined;
    if (needsBody) {
      if (expectsContinue) res.writeContinue();
      body = await readBody(req, opts.maxVerifiedBodyBytes);
      if (!body)
        return fail(req, res, { status: 413, code: 'RequestEntityTooLarge', message: 'Request body too large' });
    }
    const verdict = await verifier.verify({
      method: req.method ?? 'GET',
      url,
      headers: req.headers,
      ...(body ? { body } : {}),
    });
    if (!verdict.ok) return refuse(req, res, verdict);
    if (expectsContinue && !needsBody) res.writeContinue();

    if (verdict.payloadHash !== UNSIGNED_PAYLOAD) {
      // a signed hash is checked before the store sees a byte: s3rver truncates an object as soon as a PUT begins
      body ??= await readBody(req, opts.maxVerifiedBodyBytes);
      if (!body) {
        return fail(req, res, {
          status: 400,
          code: isS3 ? 'EntityTooLarge' : 'RequestEntityTooLarge',
          message: `A body whose sha256 is signed is checked in memory, up to ${opts.maxVerifiedBodyBytes} bytes here; send larger ones as UNSIGNED-PAYLOAD.`,
        });
      }
      if (createHash('sha256').update(body).digest('hex') !== verdict.payloadHash) {
        return fail(req, res, {
          status: 400,
          code: isS3 ? 'XAmzContentSHA256Mismatch' : 'InvalidSignatureException',
          message: "The provided 'x-amz-content-sha256' header does not match what was computed.",
        });
      }
    }

    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !HOP_BY_HOP.has(name) && !name.startsWith('proxy-')) headers[name] = value;
    }
    // The signed length is the length: Node's parser reads exactly content-length bytes, and the
    // signature covered it. A chunked body (no length) is re-chunked to the store.
    if (body) headers['content-length'] = body.length;
    else if (req.headers['content-length'] !== undefined) headers['content-length'] = req.headers['content-length'];
    let path = url;
    if (isS3) {
      // s3rver knows only its built-in key; the signature was checked here, so name that key instead
      if (typeof headers.authorization === 'string')
        headers.authorization = headers.authorization.replace(/Credential=[^/]+\//, `Credential=${S3RVER_ACCESS_KEY}/`);
      path = url.replace(/([?&]X-Amz-Credential=)[^/%&]+(%2F|\/)/, `$1${S3RVER_ACCESS_KEY}$2`);
    }
    forward(req, res, path, headers, body ?? 'stream');
  };

  const serve = (expectsContinue: boolean) => (req: IncomingMessage, res: ServerResponse) => {
    handle(req, res, expectsContinue).catch(() =>
      fail(req, res, {
        status: 500,
        code: isS3 ? 'InternalError' : 'InternalServerError',
        message: 'We encountered an internal error. Please try again.',
      }),
    );
  };
  const server = createServer(serve(false));
  server.on('checkContinue', serve(true));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  return {
    server,
    port: (server.address() as AddressInfo).port,
    async close() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      agent.destroy();
    },
  };
}

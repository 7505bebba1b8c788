import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ApiError, BadRequestError, MethodNotAllowedError } from '../../core/errors';
import { newUuid } from '../../core/ids';
import type { Logger } from '../../core/logger';
import type { SiftApp } from '../../http/app';
import { errorFormatFor, renderError } from '../../http/errorFormats';
import { createKeepAliveServer } from '../../http/keepAlive';
import { createLogger } from '../../http/logger';
import type { ApiRequest, ApiResponse } from '../../http/types';

/** Reads the body up to `limit` bytes; returns undefined when the client sent more (→ 413). */
async function readBody(req: IncomingMessage, limit: number): Promise<Buffer | 'too_large'> {
  const declared = Number(req.headers['content-length'] ?? '0');
  if (declared > limit) return 'too_large';
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) return 'too_large';
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The request target as the API reads it: the path (still percent-encoded, as routes match it) and the query. */
export interface RequestTarget {
  path: string;
  /** The first value of each query parameter, decoded. */
  query: Record<string, string>;
}

/** How much of a caller's target an error message echoes. */
const ECHO_LIMIT = 200;
const echo = (text: string) => JSON.stringify(text.length > ECHO_LIMIT ? `${text.slice(0, ECHO_LIMIT)}…` : text);

/** Percent-decodes a path or one of its parts; a sequence that is not UTF-8 (`%ff`, overlong `%c0%ae`) is the caller's error (400). */
export function decodePath(path: string): string {
  try {
    return decodeURIComponent(path);
  } catch {
    // URIError is the only thing decodeURIComponent throws: a malformed or non-UTF-8 percent-encoding
    throw new BadRequestError(
      `The request path ${echo(path)} has a malformed percent-encoding: each %XX sequence must spell UTF-8`,
    );
  }
}

/**
 * Parses a request line's target. Origin-form (`/path?query`) and absolute-form
 * (`http://host/path?query`, which RFC 9112 §3.2.2 says a server must accept; the host is ignored,
 * as Host is) are served; anything else — asterisk-form `*`, other schemes, a URL that does not
 * parse (`http://[`) — and malformed percent-encodings in the path or the query are a 400 naming
 * what was wrong. Node's parser lets all of these through to the listener.
 */
export function parseRequestTarget(target: string): RequestTarget {
  let url: URL;
  if (target.startsWith('/')) {
    // the target is appended to a fixed origin, never resolved against it: `//x/core` is the path `//x/core`, not host x
    url = new URL(`http://localhost${target}`);
  } else if (/^https?:\/\//i.test(target)) {
    try {
      url = new URL(target);
    } catch {
      // the only thing the URL constructor throws: ERR_INVALID_URL
      throw new BadRequestError(`The request target ${echo(target)} is not a valid URL`);
    }
  } else {
    throw new BadRequestError(`The request target ${echo(target)} is not served: send a path (/…) or an http(s) URL`);
  }
  decodePath(url.pathname);
  // no prototype: `?constructor=1` is a parameter like any other, and `__proto__` an ordinary key
  const query: Record<string, string> = Object.create(null) as Record<string, string>;
  if (url.search.length > 1) {
    for (const part of url.search.slice(1).split('&')) {
      const name = part.split('=', 1)[0] as string;
      try {
        decodeURIComponent(part.replace(/\+/g, ' '));
      } catch {
        throw new BadRequestError(
          `The query parameter ${echo(name)} has a malformed percent-encoding: each %XX sequence must spell UTF-8`,
        );
      }
    }
    for (const [k, v] of url.searchParams) if (!(k in query)) query[k] = v;
  }
  return { path: url.pathname, query };
}

export function toApiRequest(
  req: IncomingMessage,
  target: RequestTarget,
  body: Buffer,
  signal: AbortSignal,
): ApiRequest {
  const headers: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
  return {
    method: (req.method ?? 'GET').toUpperCase(),
    path: target.path,
    query: target.query,
    headers,
    body,
    sourceIp: req.socket.remoteAddress ?? 'unknown',
    signal,
  };
}

export async function writeApiResponse(res: ServerResponse, response: ApiResponse, signal: AbortSignal): Promise<void> {
  if (response.stream) {
    const chunks = response.stream[Symbol.asyncIterator]();
    try {
      res.writeHead(response.status, response.headers ?? {});
      while (!signal.aborted) {
        const next = await chunks.next();
        if (next.done || signal.aborted) break;
        res.write(next.value);
      }
      res.end();
    } finally {
      // Always, also when the client left before the first chunk was read: the stream's owner frees
      // what it holds there (a decoder slot, the request's billing). A no-op on a finished stream.
      await chunks.return?.();
    }
    return;
  }
  res.writeHead(response.status, response.headers ?? {});
  if (response.raw !== undefined) {
    res.end(response.raw);
  } else if (response.body !== undefined) {
    res.end(JSON.stringify(response.body));
  } else {
    res.end();
  }
}

/**
 * What the local server answers before the API (the console's files): true when it answered.
 * It runs inside the listener's guard, like the API.
 */
export type FrontHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  target: RequestTarget,
) => boolean | Promise<boolean>;

export interface ListenerOptions {
  /** Where failures outside the pipeline are logged (default: the service's JSON logger). */
  logger?: Logger;
  front?: FrontHandler;
}

/**
 * The node:http adapter: the local server and the ECS gateway serve SiftApp through it. Nothing a
 * request does can throw out of it (node:http would let that end the process): a malformed target
 * or encoding is a 400, anything else unexpected a 500 and an error log line; once a response has
 * started, the connection is closed instead.
 */
export function nodeHandler(app: SiftApp, maxBodyBytes: number, opts: ListenerOptions = {}): RequestListener {
  const logger = opts.logger ?? createLogger();
  return (req, res) => {
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    serve(app, maxBodyBytes, opts.front, req, res, abort.signal).catch((err: unknown) =>
      answerFailure(app, req, res, err, abort.signal, logger),
    );
  };
}

async function serve(
  app: SiftApp,
  maxBodyBytes: number,
  front: FrontHandler | undefined,
  req: IncomingMessage,
  res: ServerResponse,
  signal: AbortSignal,
): Promise<void> {
  const target = parseRequestTarget(req.url ?? '/');
  if (front && (await front(req, res, target))) return;
  const body = await readBody(req, maxBodyBytes);
  if (body === 'too_large') {
    res.writeHead(
      413,
      app.corsHeaders(req.headers.origin, { 'content-type': 'application/json', connection: 'close' }),
    );
    res.end(JSON.stringify({ detail: `Request body is larger than the ${maxBodyBytes} byte limit` }));
    req.destroy();
    return;
  }
  const response = await app.handle(toApiRequest(req, target, body, signal));
  await writeApiResponse(res, response, signal);
}

/** The last stop of a request that failed outside SiftApp's own error handling; it never throws. */
function answerFailure(
  app: SiftApp,
  req: IncomingMessage,
  res: ServerResponse,
  err: unknown,
  signal: AbortSignal,
  logger: Logger,
): void {
  try {
    // a client that went away (mid-body, mid-stream) is the one failure nobody needs to hear about
    const clientGone = signal.aborted || req.socket.destroyed;
    if (res.headersSent || clientGone) {
      if (!clientGone)
        logger.error('response failed after it started; closing the connection', {
          method: req.method,
          url: req.url?.slice(0, ECHO_LIMIT),
          error: err,
        });
      res.destroy();
      return;
    }
    const requestId = newUuid();
    const known = err instanceof ApiError ? err : undefined;
    if (!known)
      logger.error('request failed outside the pipeline', {
        request_id: requestId,
        method: req.method,
        url: req.url?.slice(0, ECHO_LIMIT),
        error: err,
      });
    let path = '/';
    try {
      path = parseRequestTarget(req.url ?? '/').path;
    } catch {
      // the target itself was the problem: answer in the native format
    }
    const response = renderError(errorFormatFor(path), known, requestId);
    res.writeHead(
      response.status,
      app.corsHeaders(req.headers.origin, {
        ...response.headers,
        'content-type': 'application/json',
        'x-request-id': requestId,
      }),
    );
    res.end(JSON.stringify(response.body));
  } catch (error) {
    logger.error('could not answer a failed request; closing the connection', { error });
    res.destroy();
  }
}

/** Node's own answers to requests its parser refuses, as JSON with `detail` (the status node would send). */
const PARSER_STATUS: Record<string, [number, string]> = {
  HPE_HEADER_OVERFLOW: [431, 'Request Header Fields Too Large'],
  HPE_CHUNK_EXTENSIONS_OVERFLOW: [413, 'Payload Too Large'],
  ERR_HTTP_REQUEST_TIMEOUT: [408, 'Request Timeout'],
};

function rawJsonResponse(status: number, reason: string, body: object, extra: Record<string, string> = {}): string {
  const text = JSON.stringify(body);
  const headers = {
    'content-type': 'application/json',
    'content-length': String(Buffer.byteLength(text)),
    connection: 'close',
    ...extra,
  };
  return `HTTP/1.1 ${status} ${reason}\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n${text}`;
}

/**
 * Answers what never reaches the listener: a request node's parser refuses ('clientError': a bad
 * method, control characters in the target, headers over the size limit) and CONNECT ('connect',
 * which node otherwise answers by dropping the connection).
 */
export function answerUnparsedRequests(server: Server, logger: Logger): void {
  server.on('clientError', (err: NodeJS.ErrnoException & { reason?: string }, socket: Socket) => {
    // like node's default: reply only where no response is under way on this connection
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (err.code !== 'ECONNRESET' && socket.writable && !inFlight?.headersSent) {
      const [status, reason] = PARSER_STATUS[err.code ?? ''] ?? [400, 'Bad Request'];
      const why =
        status === 431
          ? 'the request line and headers are larger than the server accepts'
          : (err.reason ?? err.message);
      socket.end(rawJsonResponse(status, reason, { detail: `Malformed HTTP request: ${why}` }));
    }
    socket.destroySoon();
  });
  server.on('connect', (req: IncomingMessage, socket: Socket) => {
    socket.on('error', () => {}); // a client gone before the answer: nothing to tell it
    logger.info('refused a CONNECT request', { target: req.url?.slice(0, ECHO_LIMIT) });
    const methods = 'GET, HEAD, POST, PUT, PATCH, DELETE';
    socket.end(
      rawJsonResponse(
        405,
        'Method Not Allowed',
        new MethodNotAllowedError(`CONNECT is not served here; allowed: ${methods}`).toBody(),
        { allow: methods },
      ),
    );
  });
}

/** The HTTP server of the local service and the ECS gateway: keep-alive timeouts, the guarded listener, node's refusals as JSON. */
export function createApiServer(
  app: SiftApp,
  maxBodyBytes: number,
  opts: ListenerOptions & { logger: Logger },
): Server {
  const server = createKeepAliveServer(nodeHandler(app, maxBodyBytes, opts));
  answerUnparsedRequests(server, opts.logger);
  return server;
}

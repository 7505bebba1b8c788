import type { IncomingMessage, ServerResponse } from 'node:http';
import type { SiftApp } from '../http/app';
import type { ApiRequest, ApiResponse } from '../http/types';

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

export function toApiRequest(req: IncomingMessage, body: Buffer, signal: AbortSignal): ApiRequest {
  const url = new URL(req.url ?? '/', 'http://localhost');
  const query: Record<string, string> = {};
  for (const [k, v] of url.searchParams) if (!(k in query)) query[k] = v;
  const headers: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(req.headers)) headers[k] = Array.isArray(v) ? v.join(', ') : v;
  return {
    method: (req.method ?? 'GET').toUpperCase(),
    path: url.pathname,
    query,
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

/** The node:http adapter: the local server and the ECS gateway serve SiftApp through it. */
export function nodeHandler(app: SiftApp, maxBodyBytes: number) {
  return async (req: IncomingMessage, res: ServerResponse) => {
    const abort = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      const body = await readBody(req, maxBodyBytes);
      if (body === 'too_large') {
        res.writeHead(413, { 'content-type': 'application/json', connection: 'close' });
        res.end(JSON.stringify({ detail: `Request body is larger than the ${maxBodyBytes} byte limit` }));
        req.destroy();
        return;
      }
      const response = await app.handle(toApiRequest(req, body, abort.signal));
      await writeApiResponse(res, response, abort.signal);
    } catch (err) {
      if (!res.headersSent) {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ detail: 'Internal server error' }));
      } else res.destroy(err as Error);
    }
  };
}

import { createReadStream, existsSync, statSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, normalize, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { decodePath, type RequestTarget } from '../runtimes/node/httpAdapter';
import { REPO_ROOT } from '../paths';

/** Where `vite build` (scripts/setup.mjs) writes the console; served at /console by the local server. */
export const CONSOLE_DIST = join(REPO_ROOT, 'web', 'dist');
export const CONSOLE_PATH = '/console';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/**
 * The console's CSP: scripts and styles from this origin only (Mantine sets CSS variables in style
 * attributes, hence 'unsafe-inline' for styles), API calls to this origin, and presigned uploads to
 * the local S3 emulator (another port on this machine).
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self' http://127.0.0.1:* http://localhost:*",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join('; ');

/**
 * Serves the built console for GET/HEAD under /console; answers false for every other request (the
 * API handles those). Hashed assets are cached for a year, index.html never. It runs inside the
 * node:http adapter's guard (httpAdapter.ts), which parsed the target: a malformed target or
 * percent-encoding never gets here, and what this throws is answered there (400 or 500).
 */
export async function serveConsole(
  req: IncomingMessage,
  res: ServerResponse,
  target: RequestTarget,
  dist = CONSOLE_DIST,
): Promise<boolean> {
  const path = target.path;
  if (path !== CONSOLE_PATH && !path.startsWith(`${CONSOLE_PATH}/`)) return false;
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: `${req.method} is not allowed on the console's static files` }));
    return true;
  }
  // /console → /console/ so the page's relative asset URLs resolve under /console/
  if (path === CONSOLE_PATH) {
    res.writeHead(308, { location: `${CONSOLE_PATH}/` });
    res.end();
    return true;
  }
  if (!existsSync(join(dist, 'index.html'))) {
    res.writeHead(503, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        detail: `The console is not built: run \`node scripts/setup.mjs\` (it runs \`vite build\` in web/ into ${dist})`,
      }),
    );
    return true;
  }
  const rel = decodePath(path.slice(CONSOLE_PATH.length + 1)) || 'index.html';
  // the app reads config.json for the API's URL (written by the CDK deployment); here: this origin
  if (rel === 'config.json') {
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache' });
    res.end('{}');
    return true;
  }
  const file = normalize(join(dist, rel));
  const inside = file.startsWith(dist + sep);
  const found = inside && existsSync(file) && statSync(file).isFile();
  if (!found) {
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ detail: `No console file at ${path}` }));
    return true;
  }
  const html = file.endsWith('.html');
  res.writeHead(200, {
    'content-type': TYPES[extname(file)] ?? 'application/octet-stream',
    'content-length': statSync(file).size,
    'cache-control': html ? 'no-cache' : 'public, max-age=31536000, immutable',
    'x-content-type-options': 'nosniff',
    ...(html ? { 'content-security-policy': CONSOLE_CSP, 'referrer-policy': 'no-referrer' } : {}),
  });
  if (req.method === 'HEAD') res.end();
  // pipeline, not pipe: a read error (the file replaced by a rebuild) rejects here, into the guard, instead of an unhandled 'error' event
  else await pipeline(createReadStream(file), res);
  return true;
}

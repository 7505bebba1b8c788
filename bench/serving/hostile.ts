/**
 * Hostile requests against the local service, one class at a time, while `GET /health` is polled
 * every 50 ms (#25 item 7: what one caller's request does to everyone else's latency). Prints one
 * row per case: the answer's status, how long the request took, and the health poll's max and
 * median latency while it ran. test/hostile/ asserts the answers; this file only measures.
 *
 *   npm run bench:hostile [-- --only <text>] [--url http://127.0.0.1:8080 --key <operator key>]
 *
 * Without --url it starts `sift serve` in a child process on a fresh data dir (so the service has
 * an event loop of its own, which the health poll measures, not this process's).
 *
 * Areas: each is a function returning its cases (`AREAS` below). Requests (malformed targets,
 * parser refusals, hostile JSON) are here; long texts, datasets and streams add a function each.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { streamCases } from './hostile-streams';

const args = process.argv.slice(2);
const opt = (name: string) => (args.includes(name) ? args[args.indexOf(name) + 1] : undefined);
const HEALTH_EVERY_MS = 50;
const REPO = fileURLToPath(new URL('../..', import.meta.url));

/** What a case needs to reach the service. */
export interface Target {
  url: string;
  port: number;
  /** The operator key: cases that pass authentication use it. */
  key: string;
}

export interface HostileCase {
  area: string;
  name: string;
  /** Sends the request and resolves with the answer's status (or why there was none). */
  send(target: Target): Promise<number | string>;
}

/** An area of hostile input: its cases (an area may prepare state first, e.g. upload a dataset). */
export type Area = (target: Target) => HostileCase[] | Promise<HostileCase[]>;

/** Raw bytes over a fresh connection; the status line of the answer, or 'closed' when there was none. */
export function rawStatus(port: number, bytes: string | Buffer): Promise<number | string> {
  return new Promise((ok) => {
    const socket = connect(port, '127.0.0.1');
    let head = '';
    socket.on('data', (b: Buffer) => {
      if (head.length < 64) head += b.toString('latin1');
    });
    socket.on('error', () => {});
    socket.on('close', () => ok(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1] ? Number(/^HTTP\/1\.1 (\d{3})/.exec(head)![1]) : 'closed'));
    socket.write(bytes);
  });
}

/** A request line, headers and optional body, asking the server to close after its answer. */
export function rawRequest(line: string, headers: Record<string, string> = {}, body?: string | Buffer): Buffer {
  const all = { host: 'localhost', connection: 'close', ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}), ...headers };
  const head = Buffer.from(`${line}\r\n${Object.entries(all).map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n`, 'latin1');
  return body === undefined ? head : Buffer.concat([head, Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8')]);
}

/** Malformed request lines, targets and encodings, parser refusals, methods, hostile JSON bodies. */
const requestCases: Area = () => {
  const raw = (name: string, bytes: (t: Target) => Buffer | string): HostileCase => ({ area: 'requests', name, send: (t) => rawStatus(t.port, bytes(t)) });
  const post = (path: string, body: string | Buffer) => (t: Target) => rawRequest(`POST ${path} HTTP/1.1`, { 'content-type': 'application/json', 'x-api-key': t.key }, body);
  const keyed = (line: string) => (t: Target) => rawRequest(line, { 'x-api-key': t.key });
  return [
    raw('GET http://[ (invalid absolute-form)', () => rawRequest('GET http://[ HTTP/1.1')),
    raw('GET /console/%ff', () => rawRequest('GET /console/%ff HTTP/1.1')),
    raw('GET /%ff', () => rawRequest('GET /%ff HTTP/1.1')),
    raw('GET /core/datasets/%ff', keyed('GET /core/datasets/%ff HTTP/1.1')),
    raw('GET /v1/%c0%ae%c0%ae/ (overlong)', keyed('GET /v1/%c0%ae%c0%ae/ HTTP/1.1')),
    raw('GET /projects?limit=%zz', keyed('GET /projects?limit=%zz HTTP/1.1')),
    raw('GET //health', () => rawRequest('GET //health HTTP/1.1')),
    raw('OPTIONS *', () => rawRequest('OPTIONS * HTTP/1.1')),
    raw('CONNECT host:443', () => 'CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n'),
    raw('PROPFIND /projects', keyed('PROPFIND /projects HTTP/1.1')),
    raw('FOO /health (parser refusal)', () => rawRequest('FOO /health HTTP/1.1')),
    raw('raw NUL in the target', () => rawRequest('GET /a\u0000b HTTP/1.1')),
    raw('64 KiB URL', () => rawRequest(`GET /core/datasets/${'a'.repeat(64 * 1024)} HTTP/1.1`)),
    raw('1,000 small headers', () => {
      const many: Record<string, string> = {};
      for (let i = 0; i < 1000; i++) many[`x-h${i}`] = 'v';
      return rawRequest('GET /health HTTP/1.1', many);
    }),
    raw('100k-deep [[[…]]] body', post('/projects', '['.repeat(100_000) + ']'.repeat(100_000))),
    raw('100k-deep {"a":…} body', post('/projects', '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000))),
    raw('9 MiB string field', post('/projects', `{"name":"${'x'.repeat(9 * 1024 * 1024)}"}`)),
    raw('2M-element array body', post('/projects', '[' + '1,'.repeat(2 * 1024 * 1024) + '1]')),
    raw('nr_epochs 1e309', post('/core/training-jobs', '{"model_name":"m","base_model":"sift/gliner2-mini-v1","datasets":[{"name":"d"}],"nr_epochs":1e309}')),
    raw('__proto__ key', post('/projects', '{"name":"p","__proto__":{"admin":true}}')),
    raw('invalid UTF-8 body', post('/projects', Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]))),
    raw('11 MiB declared body', (t) => rawRequest('POST /projects HTTP/1.1', { 'content-type': 'application/json', 'x-api-key': t.key, 'content-length': String(11 * 1024 * 1024) })),
  ];
};

/** Every area, in the order they run. Long texts, datasets and streams add theirs here. */
const AREAS: Area[] = [requestCases, streamCases];

/** Polls GET /health every HEALTH_EVERY_MS (one at a time) until stopped; returns each poll's latency. */
function pollHealth(url: string): { stop(): Promise<number[]> } {
  const samples: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = performance.now();
      try {
        await (await fetch(`${url}/health`)).arrayBuffer();
        samples.push(performance.now() - started);
      } catch {
        samples.push(Number.POSITIVE_INFINITY); // no answer at all: the worst latency there is
      }
      const wait = HEALTH_EVERY_MS - (performance.now() - started);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return samples;
    },
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)]! : NaN;
};

/** `sift serve` in a child process on a fresh data dir; resolves once it listens. */
async function startService(): Promise<{ target: Target; stop(): Promise<void> }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'sift-bench-hostile-'));
  const key = 'svc_sk_bench-hostile-operator-key-0123456789abcdefghij';
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'bin/sift.ts', 'serve', '--port', '0', '--data-dir', dataDir], {
    cwd: REPO,
    env: { ...process.env, SIFT_ADMIN_KEY: key, SIFT_LOG_LEVEL: 'ERROR' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((ok, fail) => {
    child.once('exit', (code) => fail(new Error(`sift serve exited with ${code} before listening`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /listening on (http:\/\/\S+)/.exec(line);
      if (m) ok(m[1]!);
    });
  });
  // a service that died during the run (the point of some cases) has nothing left to stop
  const exited = new Promise<void>((ok) => child.once('exit', () => ok()));
  return {
    target: { url, port: Number(new URL(url).port), key },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

async function main(): Promise<void> {
  const given = opt('--url');
  const service = given ? undefined : await startService();
  const target: Target = service?.target ?? { url: given!, port: Number(new URL(given!).port), key: opt('--key') ?? process.env['SIFT_ADMIN_KEY'] ?? '' };
  const only = opt('--only');
  const rows: string[][] = [];
  try {
    const baseline = pollHealth(target.url);
    await new Promise((r) => setTimeout(r, 1000));
    const idle = await baseline.stop();
    rows.push(['(idle)', '(none)', '-', '-', `${Math.max(...idle).toFixed(1)}`, `${median(idle).toFixed(1)}`]);
    for (const area of AREAS) {
      for (const c of await area(target)) {
        if (only && !c.name.includes(only)) continue;
        const health = pollHealth(target.url);
        const started = performance.now();
        const status = await c.send(target);
        const ms = performance.now() - started;
        const samples = await health.stop();
        rows.push([c.area, c.name, String(status), ms.toFixed(1), Math.max(...samples).toFixed(1), median(samples).toFixed(1)]);
      }
    }
  } finally {
    await service?.stop();
  }
  const header = ['area', 'case', 'status', 'request ms', 'health max ms', 'health p50 ms'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 2 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ');
  process.stdout.write([line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.map(line)].join('\n') + '\n');
}

await main();

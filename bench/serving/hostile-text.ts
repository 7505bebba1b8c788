/**
 * Hostile texts against the local service (security review F1, issue #25): `POST /inference` with a
 * long run of punctuation, four of them in one request, 100,000 characters of `a.`, and one
 * 100,000-character word, while a client polls `GET /health` every 50 ms. Prints each request's
 * wall time and the health latencies meanwhile (max, p50): what every other tenant of the process
 * waits. Before the linear splitter, 100,000 dots took 108 s and /health up to 14.6 s.
 *
 * Each text is sent twice: with a schema the engine refuses after splitting the texts (an entity
 * type too long for the encoder even alone: 422), which times the host-side path alone (splitting,
 * token lookups) at full size; and with a plain schema (200), which adds the encoder passes — on
 * CPU each 200-word window is one, and 100,000 dots are ~600 windows, so these take minutes
 * (`--split-only` leaves them out). `SIFT_ORT_WORKER=1` runs the ONNX sessions in a worker thread;
 * by default they run on the service's main thread, so /health waits for the batch in progress.
 *
 * For comparison in the same run, the splitter alone in this process: the linear scanner
 * (src/encoder/text.ts) against the regex it replaced (test/encoder/splitterOracle.ts),
 * the regex only on 20,000 and 40,000 characters so that it finishes (it is quadratic).
 *
 * The service runs in a process of its own (bench/serving/concurrency-server.ts, the mini encoder from the
 * set-up's models dir), so the polling client here shares no event loop with it.
 *
 *   npm run bench:hostile-text [-- --skip-oracle] [--split-only] [--only dots,a.,word,4x]
 */
import { fork } from 'node:child_process';
import { request } from 'node:http';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { splitWords } from '../../src/encoder/text';
import { regexSplitWords } from '../../test/encoder/splitterOracle';
import type { ServerReady } from './concurrency-server';

const MODEL = 'sift/gliner2-mini-v1';
const SCHEMA = { entities: ['person', 'organization', 'location'] };
const POLL_MS = 50;
const N = 100_000;
/** An entity type whose prompt alone exceeds the encoder: the engine splits the texts, then answers 422. */
const REFUSED_SCHEMA = { entities: { person: '', ['!'.repeat(100)]: '?'.repeat(500) } };
const args = process.argv.slice(2);

const round = (x: number) => Math.round(x * 10) / 10;
const pct = (xs: number[], p: number) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
/** Wall and CPU milliseconds of `f` (on a shared machine the CPU time moves less with others' load). */
const timeMs = (f: () => void) => {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  f();
  const cpu = process.cpuUsage(c0);
  return { wall: performance.now() - t0, cpu: (cpu.user + cpu.system) / 1000 };
};

/** The splitter alone: the scanner on every size, the regex where it finishes in seconds. */
function splitterRows(): Array<Record<string, string | number>> {
  const rows: Array<Record<string, string | number>> = [];
  const shapes: Array<[string, (n: number) => string]> = [
    ['dots', (n) => '.'.repeat(n)],
    ['a.', (n) => 'a.'.repeat(n / 2)],
    ['%+-.', (n) => '%+-.'.repeat(n / 4)],
  ];
  for (const [name, make] of shapes)
    for (const n of [20_000, 40_000, N]) {
      const text = make(n);
      splitWords(text); // warm-up
      const runs = [0, 1, 2, 3, 4].map(() => timeMs(() => splitWords(text)));
      const regex = n <= 40_000 ? timeMs(() => regexSplitWords(text)) : undefined;
      rows.push({
        text: `${name} × ${n}`,
        scanner_wall_ms: round(Math.min(...runs.map((r) => r.wall))),
        scanner_cpu_ms: round(Math.min(...runs.map((r) => r.cpu))),
        regex_wall_ms: regex ? round(regex.wall) : 'not run',
        regex_cpu_ms: regex ? round(regex.cpu) : 'not run',
      });
    }
  return rows;
}

/** POST /inference over node:http: fetch gives up on a response whose headers take over 300 s (4 × 100,000 characters on CPU can). */
function postInference(server: ServerReady, body: unknown): Promise<{ status: number; body: string }> {
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((ok, fail) => {
    const req = request(`${server.url}/inference`, { method: 'POST', headers: { 'x-api-key': server.key, 'content-type': 'application/json', 'content-length': data.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => ok({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', fail);
    });
    req.on('error', fail);
    req.end(data);
  });
}

/** Sends `body` to POST /inference while polling GET /health every POLL_MS; health latencies until the answer. */
async function underPolling(server: ServerReady, body: unknown): Promise<Record<string, string | number>> {
  const health: number[] = [];
  let done = false;
  const poller = (async () => {
    while (!done) {
      const t0 = performance.now();
      const res = await fetch(`${server.url}/health`);
      await res.text();
      const ms = performance.now() - t0;
      health.push(ms);
      if (ms < POLL_MS) await new Promise((r) => setTimeout(r, POLL_MS - ms));
    }
  })();
  const t0 = performance.now();
  const res = await postInference(server, body);
  const answer = JSON.parse(res.body) as { usage?: { input_tokens: number }; detail?: string };
  const wall = performance.now() - t0;
  done = true;
  await poller;
  return {
    status: res.status,
    request_s: round(wall / 1000),
    answer: answer.usage ? `${answer.usage.input_tokens} input tokens` : `${(answer.detail ?? '').slice(0, 48)}…`,
    health_polls: health.length,
    health_max_ms: round(Math.max(...health)),
    health_p50_ms: round(pct(health, 50)),
  };
}

async function main(): Promise<void> {
  const skipOracle = args.includes('--skip-oracle');
  console.log(`load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  if (!skipOracle) {
    console.log('\nsplitter alone, in this process (scanner: best of 5 runs; regex: one run, only where it finishes):');
    console.table(splitterRows());
  }

  const child = fork(fileURLToPath(new URL('./concurrency-server.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const server = await new Promise<ServerReady>((ok, fail) => {
    child.once('message', (m) => ok(m as ServerReady));
    child.once('exit', (code) => fail(new Error(`the service exited (${code}) before it was ready`)));
  });
  try {
    const warm = await postInference(server, { model_id: MODEL, text: 'Tim Cook met Satya Nadella in Paris.', schema: SCHEMA, store: false });
    if (warm.status !== 200) throw new Error(`warm-up answered ${warm.status}: ${warm.body}`);
    const idle = await underPolling(server, { model_id: MODEL, text: 'Tim Cook met Satya Nadella in Paris.', schema: SCHEMA, store: false });
    const cases: Array<[key: string, name: string, text: string | string[]]> = [
      ['dots', '100,000 dots', '.'.repeat(N)],
      ['a.', '100,000 chars of a.', 'a.'.repeat(N / 2)],
      ['word', 'one 100,000-char word', 'a'.repeat(N)],
      ['4x', '4 × 100,000 dots', Array.from({ length: 4 }, () => '.'.repeat(N))],
    ];
    const only = args.includes('--only') ? args[args.indexOf('--only') + 1]!.split(',') : undefined;
    const rows: Array<Record<string, string | number>> = [{ text: 'one short text (baseline)', schema: 'plain', ...idle }];
    for (const [, name, text] of cases.filter(([key]) => !only || only.includes(key)))
      for (const [schemaName, schema] of [['refused after splitting', REFUSED_SCHEMA], ['plain', SCHEMA]] as const) {
        if (schemaName === 'plain' && args.includes('--split-only')) continue;
        rows.push({ text: name, schema: schemaName, ...(await underPolling(server, { model_id: MODEL, text, schema, store: false })) });
        console.log(JSON.stringify(rows.at(-1)));
      }
    console.log(`\nPOST /inference (mini encoder, ORT ${process.env['SIFT_ORT_WORKER'] === '1' ? 'in a worker thread' : 'on the main thread'}, store: false) with GET /health polled every ${POLL_MS} ms meanwhile:`);
    console.table(rows);
    console.log(`load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  } finally {
    child.send('close');
    await new Promise((r) => child.once('exit', r));
  }
}

await main();

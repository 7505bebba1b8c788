/**
 * Encoder serving under concurrent load, side by side in one run on this machine (issue #16 item 2,
 * docs/reference/encoder.md "Batching across requests"): autocannon closed-loop clients, each sending one short
 * text + 6 entity types per request (`store: false`), at 1, 8, 32 and 64 connections, against
 *   1. the local Sift service's `POST /inference`, which batches across requests (batcher.ts);
 *   2. the same service with batching off (each request its own engine call, all at once: the
 *      behaviour before the batcher), unless `--skip-unbatched`;
 *   3. the same model served by the Python `gliner2` library behind a minimal HTTP server
 *      (bench/serving/gliner2_server.py, the set-up's venv), unless `--skip-python`;
 *   4. the engine's best in-process batch throughput (EncoderModel.infer on batches of 1, 8, 32 of
 *      the same text, no HTTP): the ceiling the service should approach.
 * On a shared machine the load from others drifts over minutes, so each concurrency level runs all
 * four back to back (servers that are not under load sit idle) and ratios compare rows of one level.
 * Each server runs in its own process (the Sift one: bench/serving/concurrency-server.ts), so the load
 * generator in this process shares no event loop with either; the Sift rows add the server's CPU
 * time per request (all its threads), the number that moves least with other jobs' load.
 *
 *   npm run bench:concurrency [-- --seconds 20] [--clients 1,8,32,64] [--skip-python] [--skip-unbatched]
 *   SIFT_ENCODER_BATCH_WAIT_MS / _MAX_TEXTS / _MAX_CHARS / _IN_FLIGHT / _PASS_TEXTS tune the batched
 *   service; SIFT_ORT_WORKER=1 runs every engine's sessions in a worker thread.
 */
import autocannon from 'autocannon';
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { EncoderModel } from '../../src/encoder/engine';
import { createLogger } from '../../src/http/logger';
import type { BatchStats } from '../../src/encoder/batcher';
import type { EncoderSchema } from '../../src/encoder/schema';
import { DEFAULT_MODELS_DIR, DEFAULT_PYTHON } from '../../src/paths';
import type { ServerReady } from './concurrency-server';

const args = process.argv.slice(2);
const opt = (n: string, d: string) => (args.includes(n) ? args[args.indexOf(n) + 1]! : d);
const SECONDS = Number(opt('--seconds', '20'));
const CLIENTS = opt('--clients', '1,8,32,64').split(',').map(Number);
const MODEL = 'sift/gliner2-mini-v1';
const DIR = join(DEFAULT_MODELS_DIR, 'sift--gliner2-mini-v1');
const TEXT = 'Tim Cook met Satya Nadella at the Microsoft campus in Redmond on Tuesday.';
const LABELS = ['person', 'group', 'location', 'creative work', 'product', 'corporation'];
const BODY = JSON.stringify({ model_id: MODEL, text: TEXT, schema: { entities: LABELS }, store: false });
const ENGINE_BATCHES = [1, 8, 32];
/** /proc/<pid>/stat counts CPU time in these (USER_HZ, 100 on Linux). */
const CLOCK_TICKS = 100;

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** What the server did during a run (batch sizes), read after it. */
  note?: () => Promise<string>;
  /** CPU time the server process has used so far, all threads (ms). */
  cpuMs?: () => Promise<number>;
  close(): Promise<void>;
}

interface Row {
  server: string;
  clients: number;
  rps: number;
  p50: number;
  p99: number;
  errors: number;
  /** CPU ms per request (servers) or per text (engine); NaN where unknown. */
  cpu: number;
  note: string;
}

/** Sends one request and waits for it: the server has worked through what the last run left queued. */
async function drain(t: Target): Promise<void> {
  const res = await fetch(t.url, { method: 'POST', headers: t.headers, body: BODY });
  if (res.status !== 200) throw new Error(`${t.name} answered ${res.status}: ${await res.text()}`);
}

/** Closed loop: each connection sends its next request when the previous answer arrives. */
async function load(t: Target, clients: number): Promise<Row> {
  await drain(t);
  // warm-up at this concurrency (connections open, batches settle), then the measured run
  await autocannon({ url: t.url, method: 'POST', headers: t.headers, body: BODY, connections: clients, duration: Math.min(5, SECONDS), timeout: 120 });
  await drain(t);
  await t.note?.();
  const cpu0 = (await t.cpuMs?.()) ?? NaN;
  const r = await autocannon({ url: t.url, method: 'POST', headers: t.headers, body: BODY, connections: clients, duration: SECONDS, timeout: 120 });
  const cpu = ((await t.cpuMs?.()) ?? NaN) - cpu0;
  const cpuPerReq = cpu / Math.max(1, r.requests.total);
  const note = [...(Number.isNaN(cpu) ? [] : [`server CPU ${cpuPerReq.toFixed(1)} ms/req`]), (await t.note?.()) ?? ''].join(', ');
  await drain(t);
  return { server: t.name, clients, rps: r.requests.total / SECONDS, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.timeouts + r.non2xx, cpu: cpuPerReq, note };
}

/**
 * A local Sift service in its own process (bench/serving/concurrency-server.ts); `batching` false: every
 * request its own engine call at once (no coalescing).
 */
async function siftTarget(name: string, batching: boolean): Promise<Target> {
  const env = { ...process.env, ...(batching ? {} : { SIFT_ENCODER_BATCH_WAIT_MS: '0', SIFT_ENCODER_BATCH_MAX_TEXTS: '1', SIFT_ENCODER_BATCH_IN_FLIGHT: '1000' }) };
  const child = fork(fileURLToPath(new URL('./concurrency-server.ts', import.meta.url)), [], { execArgv: ['--import', 'tsx'], env, stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const ready = await new Promise<ServerReady>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${name}: the server exited (${code}) before it was ready`)));
    child.once('message', (m) => resolve(m as ServerReady));
  });
  const stats = () =>
    new Promise<{ stats: BatchStats; cpuMs: number }>((resolve) => {
      child.once('message', (m) => resolve(m as { stats: BatchStats; cpuMs: number }));
      child.send('stats');
    });
  const t: Target = {
    name,
    url: `${ready.url}/inference`,
    headers: { 'x-api-key': ready.key, 'content-type': 'application/json' },
    close: async () => {
      const exited = new Promise((r) => child.once('exit', r));
      child.send('close');
      await exited;
    },
  };
  await drain(t);
  console.log(`${name}: ${ready.settings}`);
  let last = await stats();
  t.note = async () => {
    const now = await stats();
    const batches = now.stats.batches - last.stats.batches;
    const requests = now.stats.requests - last.stats.requests;
    const per = (x: number, n: number) => x / Math.max(1, n);
    const note = `${per(requests, batches).toFixed(1)} req/call, engine ${per(now.stats.runMs - last.stats.runMs, batches).toFixed(0)} ms/call, queued ${per(now.stats.queuedMs - last.stats.queuedMs, requests).toFixed(0)} ms/req`;
    last = now;
    return note;
  };
  t.cpuMs = async () => (await stats()).cpuMs;
  return t;
}

async function pythonTarget(): Promise<Target> {
  const child: ChildProcess = spawn(DEFAULT_PYTHON, ['bench/serving/gliner2_server.py', DIR, '0'], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, HF_HUB_OFFLINE: '1' } });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the Python server exited (${code}) before it was ready`)));
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^ready (\d+)/.exec(line);
      if (m) resolve(Number(m[1]));
    });
  });
  // CPU time of the server process (all its threads), from /proc (Linux); none elsewhere
  const cpuMs = async () => {
    const f = (await readFile(`/proc/${child.pid}/stat`, 'utf8').catch(() => '')).split(') ')[1]?.split(' ');
    return f ? ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS : NaN;
  };
  const t: Target = {
    name: 'Python gliner2 HTTP',
    url: `http://127.0.0.1:${port}/inference`,
    headers: { 'content-type': 'application/json' },
    note: async () => 'one request at a time',
    cpuMs,
    close: async () => {
      child.kill('SIGTERM');
    },
  };
  await drain(t);
  return t;
}

/** The ceiling: the engine in this process on batches of the same text, no HTTP. */
async function engineSweep(model: EncoderModel): Promise<Row[]> {
  const schema: EncoderSchema = { entities: LABELS.map((name) => ({ name })), classifications: [], structures: [], relations: [] };
  const rows: Row[] = [];
  for (const bs of ENGINE_BATCHES) {
    const texts = Array<string>(bs).fill(TEXT);
    await model.infer(texts, schema, { batchSize: bs });
    const lat: number[] = [];
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    while (performance.now() - t0 < (SECONDS * 1000) / 4 || lat.length < 2) {
      const t1 = performance.now();
      await model.infer(texts, schema, { batchSize: bs });
      lat.push(performance.now() - t1);
    }
    const tps = (lat.length * bs) / ((performance.now() - t0) / 1000);
    const cpu = process.cpuUsage(cpu0);
    const cpuPerText = (cpu.user + cpu.system) / 1000 / (lat.length * bs);
    lat.sort((a, b) => a - b);
    rows.push({ server: `engine in-process, batch ${bs}`, clients: 0, rps: tps, p50: Math.round(lat[Math.floor(lat.length / 2)]!), p99: Math.round(lat[Math.min(lat.length - 1, Math.ceil(lat.length * 0.99) - 1)]!), errors: 0, cpu: cpuPerText, note: `texts/s; ms per call; CPU ${cpuPerText.toFixed(1)} ms/text` });
  }
  return rows;
}

const print = (r: Row) =>
  console.log(`${r.server.padEnd(34)}${(r.clients ? String(r.clients) : '-').padStart(8)}${r.rps.toFixed(1).padStart(9)}${String(r.p50).padStart(9)}${String(r.p99).padStart(9)}${String(r.errors).padStart(7)}   ${r.note}`);

async function main(): Promise<void> {
  console.log(`model ${DIR}; one text (${TEXT.length} chars) + ${LABELS.length} entity types per request; ${SECONDS} s per run; ${cpus().length} CPU cores (${cpus()[0]?.model}); load average ${loadavg().map((x) => x.toFixed(1)).join(' ')}; node ${process.version}`);
  const targets: Target[] = [await siftTarget('Sift /inference, batched', true)];
  if (!args.includes('--skip-unbatched')) targets.push(await siftTarget('Sift /inference, unbatched', false));
  if (!args.includes('--skip-python')) targets.push(await pythonTarget());
  const engine = await EncoderModel.load(DIR, { logger: createLogger() });
  const summary: string[] = [];
  try {
    console.log(`\n${'server'.padEnd(34)}${'clients'.padStart(8)}${'req/s'.padStart(9)}${'p50 ms'.padStart(9)}${'p99 ms'.padStart(9)}${'errors'.padStart(7)}`);
    for (const c of CLIENTS) {
      const rows: Row[] = [];
      for (const t of targets) {
        rows.push(await load(t, c));
        print(rows.at(-1)!);
      }
      const sweep = await engineSweep(engine);
      sweep.forEach(print);
      const best = sweep.reduce((a, b) => (b.rps > a.rps ? b : a));
      const [batched, unbatched] = rows;
      const py = rows.find((r) => r.server.startsWith('Python'));
      summary.push(
        `  ${String(c).padStart(2)} clients: batched ${batched!.rps.toFixed(1)} req/s = ${(batched!.rps / best.rps).toFixed(2)}× engine best (${best.rps.toFixed(1)}, ${best.server.replace('engine in-process, ', '')}), p99/p50 ${(batched!.p99 / Math.max(1, batched!.p50)).toFixed(2)}` +
          (unbatched && !unbatched.server.startsWith('Python') ? `, ${(batched!.rps / unbatched.rps).toFixed(2)}× unbatched (p99/p50 ${(unbatched.p99 / Math.max(1, unbatched.p50)).toFixed(2)})` : '') +
          (py ? `, ${(batched!.rps / py.rps).toFixed(2)}× Python (p99/p50 ${(py.p99 / Math.max(1, py.p50)).toFixed(2)})` : ''),
      );
      // CPU time per request moves far less with other jobs' load than wall-clock throughput does
      const leanest = sweep.reduce((a, b) => (b.cpu < a.cpu ? b : a));
      summary.push(
        `      CPU per request: batched ${batched!.cpu.toFixed(1)} ms = ${(leanest.cpu / batched!.cpu).toFixed(2)}× the engine's leanest (${leanest.cpu.toFixed(1)} ms/text, ${leanest.server.replace('engine in-process, ', '')})` +
          (py && !Number.isNaN(py.cpu) ? `, ${(py.cpu / batched!.cpu).toFixed(2)}× Python's efficiency (${py.cpu.toFixed(1)} ms/req)` : ''),
      );
      console.log('');
    }
  } finally {
    await engine.release();
    for (const t of targets) await t.close();
  }
  console.log('goals at 32 clients: ≥ 0.8× engine best, p99 ≤ 3× p50, ≥ 2× the Python server (throughput; the CPU lines say the same per CPU ms)');
  summary.forEach((s) => console.log(s));
  console.log(`load average at the end ${loadavg().map((x) => x.toFixed(1)).join(' ')} (shared machine: other jobs' load moves every number here)`);
}

await main();

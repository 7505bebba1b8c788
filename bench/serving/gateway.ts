/**
 * Gateway overhead, isolated: the OpenAI-compatible route in front of a decoder backend that does no
 * work (answers at once), so everything measured is Sift's own path — HTTP, auth, limits, validation,
 * model resolution, spend check, SSE framing, usage billing, storing the inference. Side by side:
 * the same instant backend called directly (the floor), a bare node:http server doing the same SSE
 * (what any HTTP server costs), and the Sift route.
 *
 *   npm run bench:gateway            (RUNS=400 by default)
 */
import { createServer } from 'node:http';
import { Worker } from 'node:worker_threads';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configureDecoder } from '../../src/adapters/decoder';
import type { DecoderBackend, GenerateRequest, GenerationEvent } from '../../src/core/decoder/types';
import { silentLogger } from '../../src/http/logger';
import { startLocal } from '../../src/runtimes/local/main';

const RUNS = Number(process.env['RUNS'] ?? 400);
const OPERATOR = 'svc_sk_bench-gateway-operator-key-0123456789abcdefghij';
const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';

class InstantBackend implements DecoderBackend {
  readonly name = 'instant';
  readonly cachesAutomatically = true;
  async hasModel() {
    return true;
  }
  async contextSize() {
    return 8192;
  }
  async close() {}
  async *generate(_req: GenerateRequest): AsyncIterable<GenerationEvent> {
    const usage = { promptTokens: 12, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite5mTokens: 0, cacheWrite1hTokens: 0, engineReusedTokens: 0 };
    yield { type: 'start', usage };
    yield { type: 'text', text: 'ok' };
    yield { type: 'done', finishReason: 'stop', stopSequence: null, usage: { ...usage, completionTokens: 1 } };
  }
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const ms = (x: number) => Math.round(x * 1000) / 1000;

/**
 * The client runs on a worker thread: the servers (and, locally, the in-process store emulator)
 * keep the main thread, so work a server does after answering does not delay reading the answer.
 * Locally the record store is an in-process emulator on the server's thread, so with `store` on,
 * the write a request makes after its answer still costs the next back-to-back request that CPU; on
 * AWS the store is remote and only the SDK's request building stays on the thread.
 */
const CLIENT = `
const { parentPort, workerData } = require('node:worker_threads');
(async () => {
  const { url, headers, body, runs } = workerData;
  const once = async () => { const r = await fetch(url, { method: 'POST', headers, body }); if (!r.ok) throw new Error(r.status + ' ' + await r.text()); await r.text(); };
  for (let i = 0; i < 30; i++) await once();
  const xs = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    await once();
    xs.push(performance.now() - t0);
  }
  parentPort.postMessage(xs);
})().catch((e) => { parentPort.postMessage({ error: String(e) }); });
`;

async function timeHttp(label: string, url: string, headers: Record<string, string>, body: string): Promise<Record<string, number | string>> {
  const xs = await new Promise<number[]>((ok, fail) => {
    const w = new Worker(CLIENT, { eval: true, workerData: { url, headers, body, runs: RUNS } });
    w.once('message', (m: number[] | { error: string }) => {
      void w.terminate();
      if (Array.isArray(m)) ok(m);
      else fail(new Error(m.error));
    });
    w.once('error', fail);
  });
  return { label, p50_ms: ms(pct(xs, 50)), p95_ms: ms(pct(xs, 95)), runs: RUNS };
}

async function main() {
  const backend = new InstantBackend();
  const floor: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    for await (const _ of backend.generate({} as GenerateRequest)) void _;
    floor.push(performance.now() - t0);
  }
  const direct = { label: 'backend called directly (floor)', p50_ms: ms(pct(floor, 50)), p95_ms: ms(pct(floor, 95)), runs: RUNS };

  // what an HTTP server with the same SSE answer costs, with no Sift code in it
  const bare = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: 'ok' } }] })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((ok) => bare.listen(0, '127.0.0.1', () => ok()));
  const bareUrl = `http://127.0.0.1:${(bare.address() as AddressInfo).port}/`;
  const body = JSON.stringify({ model: MODEL, max_tokens: 4, stream: true, messages: [{ role: 'user', content: 'Say ok' }] });
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${OPERATOR}` };
  const bareHttp = await timeHttp('bare node:http SSE server', bareUrl, headers, body);
  bare.close();

  const dir = await mkdtemp(join(tmpdir(), 'sift-bench-gateway-'));
  const service = await startLocal({ port: 0, dataDir: dir, adminKey: OPERATOR, logger: silentLogger });
  configureDecoder(service.svc, { backend });
  const url = `${service.url}/v1/chat/completions`;
  const stored = await timeHttp('sift /v1/chat/completions (stream, stored)', url, headers, body);
  const unstored = await timeHttp('sift /v1/chat/completions (stream, store:false)', url, headers, body.replace('"stream":true', '"stream":true,"store":false'));
  await service.close();
  await rm(dir, { recursive: true, force: true });

  const rows = [direct, bareHttp, stored, unstored];
  console.table(rows);
  const overhead = (r: Record<string, number | string>) => ms((r['p50_ms'] as number) - (bareHttp['p50_ms'] as number));
  console.log(JSON.stringify({ sift_overhead_over_bare_http_p50_ms: { stored: overhead(stored), store_false: overhead(unstored) }, node: process.version }));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});

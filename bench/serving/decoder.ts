/**
 * Decoder benchmark (not a timed test): `npm run bench:decoder` (tsx bench/serving/decoder.ts).
 *
 *   1. Local decoder vs llama-cpp-python's server on the same GGUF: time to first token and
 *      tokens/s, both streamed over HTTP with the same prompt, greedy, same thread count. The
 *      llama-cpp-python side runs when LLAMA_CPP_PYTHON points at a python with
 *      `llama_cpp[server]` installed (e.g. a venv; it builds from its sdist with cmake + a compiler).
 *   2. Time to first token with a ~4,000-token cached prefix vs the same prompt uncached (goal ≤ 0.2×).
 *   3. The gateway's added latency: client-observed time minus the time spent inside the backend,
 *      per request (HTTP + auth + limits + validation + SSE framing + billing), p50/p95.
 *
 * Env: BENCH_RUNS (default 5), BENCH_MAX_TOKENS (default 64), BENCH_PREFIX_TOKENS (default 4000),
 * SIFT_DECODER_THREADS (default: cores − 1). Results go to stdout as a table and as JSON.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { configureDecoder, defaultThreads, LlamaCppDecoder, modelDirs } from '../../src/adapters/decoder';
import type { DecoderBackend, GenerateRequest, GenerationEvent } from '../../src/core/decoder/types';
import { silentLogger } from '../../src/http/logger';
import { startLocal } from '../../src/runtimes/local/main';

const OPERATOR = 'svc_sk_bench-operator-key-0123456789abcdefghijklm';
const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const RUNS = Number(process.env['BENCH_RUNS'] ?? 5);
const MAX_TOKENS = Number(process.env['BENCH_MAX_TOKENS'] ?? 64);
const PREFIX_TOKENS = Number(process.env['BENCH_PREFIX_TOKENS'] ?? 4000);
const QUESTION = 'Write a short paragraph about why the sky is blue.';

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};
const r1 = (x: number) => Math.round(x * 10) / 10;

/** Times spent inside the backend per request, keyed by request order. */
class TimedBackend implements DecoderBackend {
  readonly name: string;
  readonly cachesAutomatically: boolean;
  readonly spans: number[] = [];
  /** Milliseconds from the backend call to its first text event. */
  readonly firstText: number[] = [];
  constructor(private readonly inner: DecoderBackend) {
    this.name = inner.name;
    this.cachesAutomatically = inner.cachesAutomatically;
  }
  hasModel(m: string) {
    return this.inner.hasModel(m);
  }
  contextSize(m: string) {
    return this.inner.contextSize(m);
  }
  close() {
    return this.inner.close();
  }
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    const t0 = performance.now();
    let seen = false;
    try {
      for await (const ev of this.inner.generate(req, signal)) {
        if (ev.type === 'text' && !seen) {
          seen = true;
          this.firstText.push(performance.now() - t0);
        }
        yield ev;
      }
    } finally {
      this.spans.push(performance.now() - t0);
    }
  }
}

interface StreamStats {
  ttftMs: number;
  totalMs: number;
  tokens: number;
  tokPerS: number;
}

/** Streams an OpenAI chat completion and measures TTFT (first content delta) and decode speed. */
async function streamChat(url: string, headers: Record<string, string>, body: Record<string, unknown>): Promise<StreamStats> {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok || !res.body) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  let first = 0;
  let tokens = 0;
  let deltas = 0;
  let buf = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 2);
      if (!line.startsWith('data:')) continue;
      const data = line.slice(5).trim();
      if (data === '[DONE]') continue;
      const obj = JSON.parse(data) as { choices?: { delta?: { content?: string } }[]; usage?: { completion_tokens?: number } | null };
      if (obj.choices?.[0]?.delta?.content) {
        deltas++;
        if (!first) first = performance.now() - t0;
      }
      if (obj.usage?.completion_tokens) tokens = obj.usage.completion_tokens;
    }
  }
  const total = performance.now() - t0;
  tokens ||= deltas;
  return { ttftMs: first, totalMs: total, tokens, tokPerS: tokens > 1 ? (tokens - 1) / ((total - first) / 1000) : NaN };
}

async function freePort(): Promise<number> {
  return new Promise((ok) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => ok(port));
    });
  });
}

async function startLlamaCppPython(python: string, gguf: string, threads: number): Promise<{ url: string; proc: ChildProcess } | undefined> {
  const port = await freePort();
  const proc = spawn(python, ['-m', 'llama_cpp.server', '--model', gguf, '--n_ctx', '8192', '--n_threads', String(threads), '--host', '127.0.0.1', '--port', String(port)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let err = '';
  proc.stderr?.on('data', (d) => (err = (err + d).slice(-2000)));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (proc.exitCode !== null) {
      console.error(`llama-cpp-python server exited: ${err}`);
      return undefined;
    }
    try {
      if ((await fetch(`${url}/v1/models`)).ok) return { url, proc };
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  proc.kill();
  return undefined;
}

async function main() {
  const threads = defaultThreads();
  const dir = await mkdtemp(join(tmpdir(), 'sift-bench-decoder-'));
  const local = new LlamaCppDecoder({ modelDirs: modelDirs(), threads });
  const gguf = local.ggufPath(MODEL);
  if (!gguf) throw new Error('GGUF missing: run node scripts/fetch-decoder.mjs');
  const timed = new TimedBackend(local);
  const service = await startLocal({ port: 0, dataDir: dir, adminKey: OPERATOR, logger: silentLogger });
  configureDecoder(service.svc, { backend: timed });
  const auth = { authorization: `Bearer ${OPERATOR}` };
  const chat = (content: string, extra: Record<string, unknown> = {}) => ({
    model: MODEL,
    max_tokens: MAX_TOKENS,
    temperature: 0,
    messages: [{ role: 'user', content }],
    ...extra,
  });
  const results: Record<string, unknown> = { threads, runs: RUNS, max_tokens: MAX_TOKENS, node: process.version };

  // Warm-up (model load).
  await streamChat(service.url, auth, chat('Hello', { max_tokens: 2 }));

  // 1. Sift local decoder (HTTP) and gateway overhead.
  const sift: StreamStats[] = [];
  const overhead: number[] = [];
  const ttftOverhead: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const before = timed.spans.length;
    const beforeFirst = timed.firstText.length;
    // A distinct first word per run, so no slot's KV prefix helps: every run pays full prefill.
    const s = await streamChat(service.url, auth, chat(`(${i}) ${QUESTION}`));
    sift.push(s);
    const span = timed.spans[before];
    if (span !== undefined) overhead.push(s.totalMs - span);
    const first = timed.firstText[beforeFirst];
    if (first !== undefined) ttftOverhead.push(s.ttftMs - first);
  }
  results['sift'] = summarize(sift);
  const ms2 = (x: number) => Math.round(x * 100) / 100;
  results['gateway_overhead_ms'] = {
    // Client TTFT minus the backend's own time to first token: HTTP, auth, limits, validation,
    // model resolution, spend check, SSE framing.
    ttft_p50: ms2(pct(ttftOverhead, 50)),
    ttft_p95: ms2(pct(ttftOverhead, 95)),
    // Whole request minus time inside the backend: adds usage billing and storing the inference.
    total_p50: ms2(pct(overhead, 50)),
    runs: overhead.length,
  };

  // 2. llama-cpp-python server on the same GGUF.
  const python = process.env['LLAMA_CPP_PYTHON'];
  if (python) {
    const server = await startLlamaCppPython(python, gguf, threads);
    if (server) {
      try {
        await streamChat(server.url, {}, chat('Hello', { max_tokens: 2 }));
        const lcp: StreamStats[] = [];
        for (let i = 0; i < RUNS; i++) lcp.push(await streamChat(server.url, {}, chat(`(${i}) ${QUESTION}`)));
        results['llama_cpp_python'] = summarize(lcp);
      } finally {
        server.proc.kill();
      }
    } else results['llama_cpp_python'] = 'failed to start';
  } else results['llama_cpp_python'] = 'skipped (set LLAMA_CPP_PYTHON)';

  // 3. Cached prefix vs uncached, ~PREFIX_TOKENS tokens of system prompt.
  const sentence = 'The archive stores records of ships, cargo, ports and weather for every voyage since 1850. ';
  const prefix = (tag: string) => `${tag} ${sentence.repeat(Math.ceil(PREFIX_TOKENS / 18))}`;
  const cached = (tag: string, q: string) => ({
    model: MODEL,
    max_tokens: 1,
    temperature: 0,
    messages: [
      { role: 'system', content: [{ type: 'text', text: prefix(tag), cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: q },
    ],
  });
  const uncachedTtft: number[] = [];
  const cachedTtft: number[] = [];
  let prefixTokens = 0;
  const cacheRuns = Math.max(1, Math.min(RUNS, 3));
  for (let i = 0; i < cacheRuns; i++) {
    // Uncached: a new prefix each time (first word differs), so neither the ledger nor a slot has it.
    const u = await streamChat(service.url, auth, { ...cached(`Uncached-${i}`, 'How many ships?'), messages: [{ role: 'system', content: prefix(`Uncached-${i}`) }, { role: 'user', content: 'How many ships?' }] });
    uncachedTtft.push(u.ttftMs);
  }
  const write = await fetch(`${service.url}/v1/chat/completions`, { method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(cached('Cached', 'Warm up.')) });
  prefixTokens = ((await write.json()) as { usage: { prompt_tokens_details: { cache_write_tokens: number } } }).usage.prompt_tokens_details.cache_write_tokens;
  for (let i = 0; i < cacheRuns; i++) cachedTtft.push((await streamChat(service.url, auth, cached('Cached', `Question ${i}: how many ports?`))).ttftMs);
  results['cached_prefix'] = {
    prefix_tokens: prefixTokens,
    uncached_ttft_ms_p50: r1(pct(uncachedTtft, 50)),
    cached_ttft_ms_p50: r1(pct(cachedTtft, 50)),
    ratio: Math.round((pct(cachedTtft, 50) / pct(uncachedTtft, 50)) * 1000) / 1000,
  };

  await service.close();
  await rm(dir, { recursive: true, force: true });
  console.log(JSON.stringify(results, null, 2));
}

function summarize(xs: StreamStats[]) {
  return {
    ttft_ms_p50: r1(pct(xs.map((x) => x.ttftMs), 50)),
    tok_per_s_p50: r1(pct(xs.map((x) => x.tokPerS), 50)),
    tokens_p50: pct(xs.map((x) => x.tokens), 50),
  };
}

await main();

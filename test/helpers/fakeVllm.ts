/**
 * A stand-in for vLLM's OpenAI-compatible server (the decoder upstream on ECS, which needs a GPU and
 * cannot run here). It speaks the wire protocol OpenAiUpstreamDecoder relies on — one table of rules,
 * from https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html :
 *  - GET  /v1/models → `{data: [{id, max_model_len}]}`
 *  - POST /tokenize  → `{count}` (vLLM's tokenizer endpoint)
 *  - POST /v1/chat/completions, /v1/completions with `stream: true` → SSE `data:` chunks, the last one
 *    carrying `usage` (with `stream_options.include_usage`), then `data: [DONE]`.
 * Every request reports the same token counts, so a test knows each request's exact price. The
 * subject under test is Sift's billing, never this server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { configureDecoder, OpenAiUpstreamDecoder } from '../../src/adapters/decoder';
import { decoderProfile } from '../../src/core/decoder/models';
import type { TestStack } from './localStack';

export const FAKE_MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';

export interface FakeVllm {
  url: string;
  /** Tokens every request reports. */
  promptTokens: number;
  completionTokens: number;
  /** Delay between streamed pieces, ms (a slow stream lets a test cancel mid-way). */
  pieceDelayMs: number;
  close(): Promise<void>;
}

export async function startFakeVllm(
  opts: { promptTokens?: number; completionTokens?: number } = {},
): Promise<FakeVllm> {
  const state = {
    promptTokens: opts.promptTokens ?? 1000,
    completionTokens: opts.completionTokens ?? 100,
    pieceDelayMs: 0,
  };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      void (async () => {
        if (req.method === 'GET' && req.url === '/v1/models') {
          res
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ data: [{ id: FAKE_MODEL, max_model_len: 8192 }] }));
          return;
        }
        if (req.method === 'POST' && req.url === '/tokenize') {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: state.promptTokens }));
          return;
        }
        if (req.method === 'POST' && (req.url === '/v1/chat/completions' || req.url === '/v1/completions')) {
          const chat = req.url === '/v1/chat/completions';
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const pieces = Math.min(5, state.completionTokens);
          for (let i = 0; i < pieces && !res.destroyed; i++) {
            const choice = chat ? { index: 0, delta: { content: `w${i} ` } } : { index: 0, text: `w${i} ` };
            res.write(`data: ${JSON.stringify({ choices: [choice] })}\n\n`);
            if (state.pieceDelayMs) await new Promise((r) => setTimeout(r, state.pieceDelayMs));
          }
          const last = chat
            ? { index: 0, delta: {}, finish_reason: 'stop' }
            : { index: 0, text: '', finish_reason: 'stop' };
          res.write(
            `data: ${JSON.stringify({ choices: [last], usage: { prompt_tokens: state.promptTokens, completion_tokens: state.completionTokens } })}\n\n`,
          );
          res.end('data: [DONE]\n\n');
          return;
        }
        res.writeHead(404).end();
      })();
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return Object.assign(state, {
    url,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  });
}

/** Points a stack's decoder at the fake upstream (before its first decoder request). */
export function useFakeVllm(stack: TestStack, vllm: FakeVllm): void {
  configureDecoder(stack.svc, { backend: new OpenAiUpstreamDecoder({ baseUrl: vllm.url }) });
}

/**
 * What one request should cost, in micro-USD, worked out here from the catalog's list prices (USD
 * per million tokens) rather than by the code under test: vLLM reports no cache tokens.
 */
export function expectedCostMicros(vllm: FakeVllm): number {
  const p = decoderProfile(FAKE_MODEL);
  return Math.round(vllm.promptTokens * p.inputPrice + vllm.completionTokens * p.outputPrice);
}

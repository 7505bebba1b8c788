/**
 * A stand-in for vLLM's OpenAI-compatible server (the decoder upstream on ECS, which needs a GPU and
 * cannot run here). It speaks the wire protocol OpenAiUpstreamDecoder relies on — one table of rules,
 * from https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html :
 *  - GET  /v1/models → `{data: [{id, max_model_len}]}`
 *  - POST /tokenize  → `{count}` (vLLM's tokenizer endpoint)
 *  - POST /v1/chat/completions, /v1/completions with `stream: true` → SSE `data:` chunks, the last one
 *    carrying `usage` (with `stream_options.include_usage`), then `data: [DONE]`.
 *  - Structured outputs (https://docs.vllm.ai/en/latest/features/structured_outputs/): only
 *    `response_format: {type: "json_schema", json_schema: {name, schema}}` or `{type: "json_object"}`
 *    constrains the output (here: a value valid against the schema, `schemaExample`); without one
 *    the output is free text. `response_format.type` json_schema without `json_schema.schema` is a 400;
 *    extras vLLM removed (`guided_json`, removed in v0.12) or never had are ignored, as its
 *    request models ignore unknown fields.
 *  - Logprobs (openai_compatible_server page, Chat API / Completions API extras): chat takes
 *    `logprobs: true` and `top_logprobs` (0–20; `top_logprobs` without `logprobs: true` is a 400) and
 *    puts `choices[].logprobs.content[]` on each chunk; completions take `logprobs: n` and put
 *    `choices[].logprobs.{tokens, token_logprobs, top_logprobs}` on each chunk.
 * Every request reports the same token counts, so a test knows each request's exact price. The
 * subject under test is Sift's billing and what Sift sends (`requests`), never this server.
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
  /** Generation requests as received (path and JSON body), oldest first. */
  requests: { path: string; body: Record<string, any> }[];
  close(): Promise<void>;
}

export async function startFakeVllm(
  opts: { promptTokens?: number; completionTokens?: number } = {},
): Promise<FakeVllm> {
  const state = {
    promptTokens: opts.promptTokens ?? 1000,
    completionTokens: opts.completionTokens ?? 100,
    pieceDelayMs: 0,
    requests: [] as FakeVllm['requests'],
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
          const sent = JSON.parse(body) as Record<string, any>;
          state.requests.push({ path: req.url, body: sent });
          const refusal = refuse(sent, chat);
          if (refusal) {
            res
              .writeHead(400, { 'content-type': 'application/json' })
              .end(JSON.stringify({ object: 'error', message: refusal, type: 'BadRequestError', code: 400 }));
            return;
          }
          res.writeHead(200, { 'content-type': 'text/event-stream' });
          const format = sent.response_format as { type?: string; json_schema?: { schema?: unknown } } | undefined;
          const output =
            format?.type === 'json_schema'
              ? JSON.stringify(schemaExample(format.json_schema!.schema))
              : format?.type === 'json_object'
                ? '{}'
                : undefined;
          const count = Math.min(5, state.completionTokens);
          const pieces =
            output === undefined ? Array.from({ length: count }, (_, i) => `w${i} `) : split(output, count);
          const top = chat ? (sent.logprobs === true ? (sent.top_logprobs ?? 0) : undefined) : sent.logprobs;
          for (let i = 0; i < pieces.length && !res.destroyed; i++) {
            const piece = pieces[i]!;
            const logprobs = top === undefined ? undefined : pieceLogprobs(piece, top as number, chat);
            const choice = chat
              ? { index: 0, delta: { content: piece }, ...(logprobs ? { logprobs } : {}) }
              : { index: 0, text: piece, ...(logprobs ? { logprobs } : {}) };
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

/** What vLLM answers with a 400 among the structured-output and logprob fields (see the table above). */
function refuse(body: Record<string, any>, chat: boolean): string | undefined {
  const format = body.response_format;
  if (format?.type === 'json_schema' && typeof format.json_schema?.schema !== 'object')
    return 'response_format.json_schema.schema is required';
  if (chat && body.top_logprobs !== undefined && body.logprobs !== true)
    return 'when using `top_logprobs`, `logprobs` must be set to true';
  const n = chat ? body.top_logprobs : body.logprobs;
  if (n !== undefined && (typeof n !== 'number' || n < 0 || n > 20)) return `logprobs ${String(n)} is outside 0..20`;
  return undefined;
}

/** One value valid against a JSON Schema of the kinds Sift forwards (what a grammar would allow). */
export function schemaExample(schema: any, root: any = schema): unknown {
  if (schema.$ref) return schemaExample(root.$defs?.[String(schema.$ref).split('/').pop()!], root);
  if ('const' in schema) return schema.const;
  if (schema.enum) return schema.enum[0];
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return schemaExample(alternatives[0], root);
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object':
      return Object.fromEntries(Object.entries(schema.properties ?? {}).map(([k, v]) => [k, schemaExample(v, root)]));
    case 'array':
      return Array.from({ length: schema.minItems ?? 1 }, () => (schema.items ? schemaExample(schema.items, root) : 0));
    case 'string':
      return 'x'.repeat(schema.minLength ?? 1);
    case 'number':
    case 'integer':
      return 1;
    case 'boolean':
      return true;
    default:
      return null;
  }
}

/** `text` in `n` consecutive pieces (fewer when shorter). */
function split(text: string, n: number): string[] {
  const size = Math.ceil(text.length / n);
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/** One token per piece: logprob -0.5, alternatives below it. */
function pieceLogprobs(piece: string, top: number, chat: boolean) {
  const alternatives = Array.from({ length: top }, (_, i) => ({
    token: i === 0 ? piece : `alt${i}`,
    logprob: -0.5 - i,
  }));
  return chat
    ? { content: [{ token: piece, logprob: -0.5, top_logprobs: alternatives }] }
    : {
        tokens: [piece],
        token_logprobs: [-0.5],
        top_logprobs: [Object.fromEntries(alternatives.map((a) => [a.token, a.logprob]))],
      };
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

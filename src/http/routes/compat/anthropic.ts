import { z } from 'zod';
import { modelRunErrors } from '../errorDocs';
import type { Generation, GenerationResult } from '../../../core/decoder/service';
import type {
  CacheMarker,
  DecoderMessage,
  FinishReason,
  GenerationUsage,
  PromptPart,
} from '../../../core/decoder/types';
import { BadRequestError } from '../../../core/errors';
import { resolveServable, type ServableEncoder } from '../../../core/models';
import { json, route, type ApiResponse, type HandlerContext } from '../../types';
import {
  extractThroughCompat,
  normalizeStop,
  requireTextOnly,
  resolveCompatModel,
  genHeaders,
  streamResponse,
  anthropicStreamError,
  sseEvent,
  SSE_HEADERS,
  AnthropicErrorBody,
} from './common';
import { generate, parseCacheControl, respondWith, withHints } from '../generation';
import { checkTools } from './openai';

const Block = z.looseObject({ type: z.string() });
const Content = z.union([z.string(), z.array(Block).min(1)]);

export const MessagesBody = z.looseObject({
  model: z.string().min(1),
  max_tokens: z.number().int().min(1),
  messages: z
    .array(
      z.looseObject({
        role: z.enum(['user', 'assistant', 'system']),
        content: Content,
        cache_control: z.unknown().optional(),
      }),
    )
    .min(1),
  system: z.union([z.string(), z.array(Block)]).optional(),
  stop_sequences: z.array(z.string()).max(4).optional(),
  stream: z.boolean().optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  top_k: z.number().int().min(0).optional(),
  tools: z.array(z.looseObject({ cache_control: z.unknown().optional() })).optional(),
  tool_choice: z.looseObject({ type: z.string() }).optional(),
  cache_control: z.unknown().optional(),
  metadata: z.unknown().optional(),
  /** docs/reference/decisions.md#compatible-extras. */
  schema: z.record(z.string(), z.unknown()).optional(),
  threshold: z.number().min(0).max(1).optional(),
  store: z.boolean().optional(),
});
type Body = z.output<typeof MessagesBody>;

export const anthropicStop = (f: FinishReason): 'end_turn' | 'max_tokens' | 'stop_sequence' =>
  f === 'length' ? 'max_tokens' : f === 'stop_sequence' ? 'stop_sequence' : 'end_turn';

/** compat.md §5.5: input_tokens exclude cache reads and writes; writes split by TTL. */
export function anthropicUsage(
  u: Pick<
    GenerationUsage,
    'promptTokens' | 'cacheReadTokens' | 'cacheWriteTokens' | 'cacheWrite5mTokens' | 'cacheWrite1hTokens'
  >,
  outputTokens: number,
) {
  return {
    input_tokens: Math.max(0, u.promptTokens - u.cacheReadTokens - u.cacheWriteTokens),
    cache_creation_input_tokens: u.cacheWriteTokens,
    cache_read_input_tokens: u.cacheReadTokens,
    cache_creation: {
      ephemeral_5m_input_tokens: u.cacheWrite5mTokens,
      ephemeral_1h_input_tokens: u.cacheWrite1hTokens,
    },
    output_tokens: outputTokens,
    server_tool_use: null,
    service_tier: 'standard',
  };
}

function blockText(b: Record<string, unknown>, at: string): string {
  switch (b.type) {
    case 'text':
      if (typeof b.text !== 'string')
        throw withHints(new BadRequestError(`${at}: a text block needs a string 'text'`), at, 'invalid_value');
      return b.text;
    case 'tool_use':
      return JSON.stringify({ tool_use: b.name, input: b.input ?? {} });
    case 'tool_result': {
      const c = b.content;
      const text =
        typeof c === 'string'
          ? c
          : Array.isArray(c)
            ? c.map((x: Record<string, unknown>, k: number) => blockText(x, `${at}.content.${k}`)).join('\n')
            : '';
      return `Tool result${b.is_error ? ' (error)' : ''}: ${text}`;
    }
    case 'thinking':
    case 'redacted_thinking':
      return '';
    default:
      return requireTextOnly(String(b.type), at);
  }
}

/**
 * Anthropic content → decoder messages. Markers on system blocks, message blocks and tools
 * (docs/reference/decisions.md#prompt-caching rule 5), in the prefix order tools → system → messages; a top-level `cache_control`
 * (automatic mode) marks the last block.
 */
export function messagesToPrompt(body: Body): { messages: DecoderMessage[]; markerCount: number } {
  let markerCount = 0;
  const mark = (raw: unknown, at: string, text: string): CacheMarker | undefined => {
    if (raw === undefined) return undefined;
    const m = parseCacheControl(raw, at);
    if (text.length === 0)
      throw withHints(
        new BadRequestError(`${at}: an empty text block cannot carry cache_control`),
        at,
        'invalid_value',
      );
    markerCount++;
    return m;
  };
  const system: PromptPart[] = [];
  for (const [i, t] of (body.tools ?? []).entries()) {
    const text = JSON.stringify(t);
    const cache = mark(t.cache_control, `tools.${i}`, text);
    system.push(cache ? { text, cache } : { text });
  }
  if (typeof body.system === 'string') system.push({ text: body.system });
  else
    for (const [i, b] of (body.system ?? []).entries()) {
      const at = `system.${i}`;
      if (b.type !== 'text') requireTextOnly(b.type, at);
      const text = blockText(b, at);
      const cache = mark(b.cache_control, at, text);
      system.push(cache ? { text, cache } : { text });
    }
  const messages: DecoderMessage[] = system.length ? [{ role: 'system', parts: system }] : [];
  body.messages.forEach((m, i) => {
    const at = `messages.${i}`;
    if (m.cache_control !== undefined) {
      throw withHints(
        new BadRequestError(
          `${at}: cache_control must be on a content block; a plain string content cannot carry a cache marker`,
        ),
        at,
        'invalid_value',
      );
    }
    const parts: PromptPart[] =
      typeof m.content === 'string'
        ? [{ text: m.content }]
        : m.content.map((b, j) => {
            const text = blockText(b, `${at}.content.${j}`);
            const cache = mark(b.cache_control, `${at}.content.${j}`, text);
            return cache ? { text, cache } : { text };
          });
    const prev = messages.at(-1);
    // Consecutive turns of one role are merged, as the Messages API does.
    if (prev && prev.role === m.role && i > 0) prev.parts.push(...parts);
    else messages.push({ role: m.role, parts });
  });
  if (body.cache_control !== undefined) {
    const auto = parseCacheControl(body.cache_control, 'cache_control');
    const last = messages.at(-1)?.parts.at(-1);
    if (last?.cache && last.cache.ttlSeconds !== auto.ttlSeconds) {
      throw withHints(
        new BadRequestError('cache_control: the last block already has a cache_control with a different ttl'),
        'cache_control',
        'invalid_value',
      );
    }
    if (last && !last.cache) {
      if (markerCount >= 4)
        throw withHints(
          new BadRequestError(
            'cache_control: automatic caching needs a free breakpoint slot, but 4 blocks already carry cache_control',
          ),
          'cache_control',
          'invalid_value',
        );
      last.cache = auto;
      markerCount++;
    }
  }
  return { messages, markerCount };
}

function messageBody(gen: Generation, r: GenerationResult) {
  return {
    id: `msg_${gen.inferenceId}`,
    type: 'message',
    role: 'assistant',
    model: gen.model.requested,
    content: [{ type: 'text', text: r.text, citations: null }],
    stop_reason: anthropicStop(r.finishReason),
    stop_sequence: r.stopSequence,
    usage: anthropicUsage(r.usage, r.usage.completionTokens),
    inference_id: gen.inferenceId,
  };
}

async function* messageStream(gen: Generation): AsyncGenerator<string> {
  yield sseEvent('message_start', {
    type: 'message_start',
    message: {
      id: `msg_${gen.inferenceId}`,
      type: 'message',
      role: 'assistant',
      model: gen.model.requested,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: anthropicUsage(gen.start, 0),
    },
  });
  yield sseEvent('content_block_start', {
    type: 'content_block_start',
    index: 0,
    content_block: { type: 'text', text: '' },
  });
  yield sseEvent('ping', { type: 'ping' });
  let r: GenerationResult;
  for (;;) {
    const next = await gen.stream.next();
    if (next.done) {
      r = next.value;
      break;
    }
    yield sseEvent('content_block_delta', {
      type: 'content_block_delta',
      index: 0,
      delta: { type: 'text_delta', text: next.value },
    });
  }
  yield sseEvent('content_block_stop', { type: 'content_block_stop', index: 0 });
  yield sseEvent('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: anthropicStop(r.finishReason), stop_sequence: r.stopSequence },
    usage: anthropicUsage(r.usage, r.usage.completionTokens),
  });
  yield sseEvent('message_stop', { type: 'message_stop' });
}

async function encoderMessages(
  ctx: HandlerContext<Body, unknown, unknown>,
  servable: ServableEncoder,
): Promise<ApiResponse> {
  const { body } = ctx;
  if (!body.schema) throw new BadRequestError('schema extraction is not available');
  if (body.stream)
    throw withHints(new BadRequestError('schema extraction does not stream; send stream: false'), 'stream');
  const user = [...body.messages].reverse().find((m) => m.role === 'user');
  const text =
    typeof user?.content === 'string'
      ? user.content
      : (user?.content ?? []).map((b) => String(b.text ?? '')).join('\n');
  const out = await extractThroughCompat({
    svc: ctx.svc,
    principal: ctx.principal,
    servable,
    text,
    schema: body.schema,
    threshold: body.threshold,
    store: body.store ?? true,
    endpoint: '/v1/messages',
  });
  return json(200, {
    id: `msg_${out.inference_id}`,
    type: 'message',
    role: 'assistant',
    model: body.model,
    content: [{ type: 'text', text: JSON.stringify(out.result), citations: null }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: anthropicUsage(
      {
        promptTokens: out.input_tokens,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        cacheWrite5mTokens: 0,
        cacheWrite1hTokens: 0,
      },
      0,
    ),
    inference_id: out.inference_id,
    // Sift's own, beside inference_id: the content stays the result object alone
    windows: out.windows,
  });
}

export const anthropicRoutes = [
  route({
    method: 'POST',
    path: '/v1/messages',
    tag: 'compatible',
    summary:
      'Anthropic-compatible messages (streaming, stop sequences, cache_control prompt caching, `schema` extraction)',
    description:
      'Authenticate with `x-api-key` (SDK 0.x) or `Authorization: Bearer` (SDK 1.x); any `anthropic-version` is accepted.',
    errorFormat: 'anthropic',
    body: MessagesBody,
    responses: {
      200: {
        description:
          'A message object, or a named-event SSE stream; Sift adds `inference_id` and, with `schema`, `windows` (encoder passes over the text: 1 = at once)',
      },
      ...modelRunErrors,
      400: { description: 'Invalid request (Anthropic error envelope)', schema: AnthropicErrorBody },
    },
    handler: async (ctx) => {
      const { svc, principal, body, req } = ctx;
      const servable = await resolveCompatModel(svc, principal, body.model, body.schema !== undefined);
      if (servable.kind === 'encoder') return encoderMessages(ctx, servable);
      const { runtime, model: resolved } = servable;
      checkTools(resolved, body.tools, body.tool_choice?.type === 'none' ? 'none' : body.tool_choice);
      const { messages } = messagesToPrompt(body);
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'chat', messages, continueFinal: true },
        strictMarkers: true,
        params: {
          maxTokens: body.max_tokens,
          temperature: body.temperature,
          topP: body.top_p,
          topK: body.top_k,
          stop: normalizeStop(body.stop_sequences),
        },
        endpoint: '/v1/messages',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { messages: body.messages, ...(body.system !== undefined ? { system: body.system } : {}) },
        signal: req.signal,
      });
      return respondWith(gen, async () =>
        body.stream
          ? streamResponse(gen, { ...SSE_HEADERS, ...genHeaders(gen) }, messageStream(gen), anthropicStreamError)
          : json(200, messageBody(gen, await gen.collect()), genHeaders(gen)),
      );
    },
  }),
];

anthropicRoutes.push(
  route({
    method: 'POST',
    path: '/v1/messages/count_tokens',
    tag: 'compatible',
    summary: 'Anthropic-compatible token count of a messages request (no generation, not billed)',
    errorFormat: 'anthropic',
    body: MessagesBody.extend({ max_tokens: z.number().int().min(1).optional() }),
    responses: {
      200: { description: '{input_tokens}' },
      404: modelRunErrors[404]!,
      409: modelRunErrors[409]!,
      503: modelRunErrors[503]!,
    },
    handler: async ({ svc, principal, body }) => {
      const { runtime, model: resolved } = await resolveServable(svc, principal, body.model, { want: 'decoder' });
      if (!runtime.backend.countTokens)
        throw new BadRequestError(`Token counting is not available for '${body.model}'`);
      const { messages } = messagesToPrompt(body as Body);
      return json(200, {
        input_tokens: await runtime.backend.countTokens(resolved.backendModel, {
          kind: 'chat',
          messages,
          continueFinal: true,
        }),
      });
    },
  }),
);

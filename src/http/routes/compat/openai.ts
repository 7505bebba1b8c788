import { z } from 'zod';
import { modelRunErrors } from '../errorDocs';
import type { Generation, GenerationResult } from '../../../core/decoder/service';
import type {
  DecoderMessage,
  DecoderRole,
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
  openAiStreamError,
  streamResponse,
  sseData,
  SSE_HEADERS,
  OpenAiErrorBody,
} from './common';
import { defaultMaxTokens, generate, parseCacheControl, respondWith, withHints, type Decoder } from '../generation';

const Part = z.looseObject({ type: z.string() });
const ChatMessage = z.looseObject({
  role: z.enum(['system', 'developer', 'user', 'assistant', 'tool', 'function']),
  content: z
    .union([z.string(), z.array(Part).min(1)])
    .nullable()
    .optional(),
  name: z.string().optional(),
  tool_calls: z
    .array(
      z.looseObject({
        id: z.string().optional(),
        function: z.looseObject({ name: z.string(), arguments: z.string() }).optional(),
      }),
    )
    .nullable()
    .optional(),
  tool_call_id: z.string().optional(),
  cache_control: z.unknown().optional(),
});

const common = {
  model: z.string().min(1),
  stream: z.boolean().nullable().optional(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullable().optional() }).nullable().optional(),
  max_tokens: z.number().int().min(1).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  top_k: z.number().int().min(0).nullable().optional(),
  stop: z
    .union([z.string(), z.array(z.string())])
    .nullable()
    .optional(),
  n: z.number().int().min(1).nullable().optional(),
  seed: z.number().int().nullable().optional(),
  store: z.boolean().nullable().optional(),
};

export const ChatCompletionBody = z.looseObject({
  ...common,
  messages: z.array(ChatMessage).min(1),
  max_completion_tokens: z.number().int().min(1).nullable().optional(),
  tools: z.array(z.unknown()).nullable().optional(),
  tool_choice: z.unknown().optional(),
  response_format: z.looseObject({ type: z.string() }).nullable().optional(),
  logprobs: z.boolean().nullable().optional(),
  /** docs/reference/decisions.md#compatible-extras: encoder extraction schema. */
  schema: z.record(z.string(), z.unknown()).optional(),
  threshold: z.number().min(0).max(1).optional(),
});
type ChatBody = z.output<typeof ChatCompletionBody>;

export const CompletionBody = z.looseObject({
  ...common,
  prompt: z.union([z.string(), z.array(z.string()).length(1)]),
  echo: z.boolean().nullable().optional(),
  suffix: z.string().nullable().optional(),
  logprobs: z.number().int().nullable().optional(),
  best_of: z.number().int().nullable().optional(),
});

const FINGERPRINT = 'fp_sift_1';

export const openAiFinish = (f: FinishReason): 'stop' | 'length' => (f === 'length' ? 'length' : 'stop');

/** compat.md §5.5: prompt_tokens includes cached tokens (OpenAI semantics); reads/writes in the details. */
export function openAiUsage(
  u: Pick<GenerationUsage, 'promptTokens' | 'completionTokens' | 'cacheReadTokens' | 'cacheWriteTokens'>,
) {
  return {
    prompt_tokens: u.promptTokens,
    completion_tokens: u.completionTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    prompt_tokens_details: {
      cached_tokens: u.cacheReadTokens,
      cache_write_tokens: u.cacheWriteTokens,
      audio_tokens: 0,
    },
    completion_tokens_details: {
      reasoning_tokens: 0,
      audio_tokens: 0,
      accepted_prediction_tokens: 0,
      rejected_prediction_tokens: 0,
    },
  };
}

const MARKABLE: ReadonlySet<string> = new Set(['system', 'developer', 'user']);

/** OpenAI chat messages → decoder messages; markers on system/developer/user text parts (docs/reference/decisions.md#prompt-caching rule 5). */
export function chatToPrompt(messages: ChatBody['messages']): DecoderMessage[] {
  return messages.map((m, i) => {
    const where = `messages.${i}`;
    if (m.cache_control !== undefined) {
      throw withHints(
        new BadRequestError(
          `${where}: cache_control must be on a content block; a plain string content cannot carry a cache marker`,
        ),
        where,
        'invalid_value',
      );
    }
    const role: DecoderRole = m.role === 'developer' ? 'system' : m.role === 'function' ? 'tool' : m.role;
    const parts: PromptPart[] = [];
    if (typeof m.content === 'string') parts.push({ text: m.content });
    else if (Array.isArray(m.content)) {
      m.content.forEach((p, j) => {
        const at = `${where}.content.${j}`;
        const part = p as Record<string, unknown>;
        if (p.type !== 'text' && p.type !== 'refusal') requireTextOnly(p.type, at);
        const text = p.type === 'text' ? part.text : part.refusal;
        if (typeof text !== 'string')
          throw withHints(
            new BadRequestError(`${at}: a '${p.type}' part needs a string '${p.type}' field`),
            at,
            'invalid_value',
          );
        let marker = part.cache_control !== undefined ? parseCacheControl(part.cache_control, at) : undefined;
        if (!marker && part.prompt_cache_breakpoint !== undefined && part.prompt_cache_breakpoint !== null)
          marker = { ttlSeconds: 300 };
        if (marker && text.length === 0)
          throw withHints(
            new BadRequestError(`${at}: an empty text block cannot carry a cache marker`),
            at,
            'invalid_value',
          );
        parts.push(marker && MARKABLE.has(m.role) ? { text, cache: marker } : { text });
      });
    }
    for (const call of m.tool_calls ?? []) {
      if (call.function)
        parts.push({ text: JSON.stringify({ tool_call: call.function.name, arguments: call.function.arguments }) });
    }
    if (parts.length === 0) parts.push({ text: '' });
    return { role, parts };
  });
}

/** Models without tool support get a clear 400 instead of silently ignored tools. */
export function checkTools(model: Decoder, tools: unknown[] | null | undefined, toolChoice: unknown): void {
  if (!tools || tools.length === 0 || toolChoice === 'none' || model.profile.tools) return;
  throw withHints(
    new BadRequestError(
      `'${model.requested}' does not support tool calling; remove 'tools' (or set tool_choice to "none")`,
    ),
    'tools',
    'unsupported_parameter',
  );
}

function chatResponse(gen: Generation, r: GenerationResult) {
  return {
    id: `chatcmpl-${gen.inferenceId}`,
    object: 'chat.completion',
    created: gen.created,
    model: gen.model.requested,
    system_fingerprint: FINGERPRINT,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: r.text, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: openAiFinish(r.finishReason),
      },
    ],
    usage: openAiUsage(r.usage),
    inference_id: gen.inferenceId,
  };
}

async function* chatStream(gen: Generation, includeUsage: boolean): AsyncGenerator<string> {
  const base = {
    id: `chatcmpl-${gen.inferenceId}`,
    object: 'chat.completion.chunk',
    created: gen.created,
    model: gen.model.requested,
    system_fingerprint: FINGERPRINT,
  };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunk = (delta: Record<string, unknown>, finish: string | null) =>
    sseData({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...usageNull });
  yield chunk({ role: 'assistant', content: '', refusal: null }, null);
  for (;;) {
    const next = await gen.stream.next();
    if (next.done) {
      yield chunk({}, openAiFinish(next.value.finishReason));
      if (includeUsage) yield sseData({ ...base, choices: [], usage: openAiUsage(next.value.usage) });
      break;
    }
    yield chunk({ content: next.value }, null);
  }
  yield 'data: [DONE]\n\n';
}

function streamHeaders(gen: Generation): Record<string, string> {
  return { ...SSE_HEADERS, ...genHeaders(gen) };
}

/** Extraction through chat: the encoder runs `schema` on the last user message; the result is JSON content. */
async function encoderChat(
  ctx: HandlerContext<ChatBody, unknown, unknown>,
  servable: ServableEncoder,
): Promise<ApiResponse> {
  const body = ctx.body;
  if (!body.schema) throw new BadRequestError('schema extraction is not available');
  if (body.stream)
    throw withHints(
      new BadRequestError('schema extraction does not stream; send stream: false'),
      'stream',
      'unsupported_parameter',
    );
  const user = [...body.messages].reverse().find((m) => m.role === 'user');
  const text =
    typeof user?.content === 'string'
      ? user.content
      : (user?.content ?? []).map((p) => String((p as { text?: unknown }).text ?? '')).join('\n');
  const out = await extractThroughCompat({
    svc: ctx.svc,
    principal: ctx.principal,
    servable,
    text,
    schema: body.schema,
    threshold: body.threshold,
    store: body.store ?? true,
    endpoint: '/v1/chat/completions',
  });
  const content = JSON.stringify(out.result);
  return json(200, {
    id: `chatcmpl-${out.inference_id}`,
    object: 'chat.completion',
    created: Math.floor(ctx.svc.now().getTime() / 1000),
    model: body.model,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content, refusal: null, annotations: [] },
        logprobs: null,
        finish_reason: 'stop',
      },
    ],
    usage: openAiUsage({
      promptTokens: out.input_tokens,
      completionTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
    }),
    inference_id: out.inference_id,
    // Sift's own, beside inference_id: the content stays the result object alone
    windows: out.windows,
  });
}

export const openAiRoutes = [
  route({
    method: 'POST',
    path: '/v1/chat/completions',
    tag: 'compatible',
    summary: 'OpenAI-compatible chat completions (streaming, stop sequences, prompt caching, `schema` extraction)',
    errorFormat: 'openai',
    body: ChatCompletionBody,
    responses: {
      200: {
        description:
          'A chat.completion object, or an SSE stream of chat.completion.chunk; Sift adds `inference_id` and, with `schema`, `windows` (encoder passes over the text: 1 = at once)',
      },
      ...modelRunErrors,
      400: { description: 'Invalid request (OpenAI error envelope)', schema: OpenAiErrorBody },
    },
    handler: async (ctx) => {
      const { svc, principal, body, req } = ctx;
      const servable = await resolveCompatModel(svc, principal, body.model, body.schema !== undefined);
      if (servable.kind === 'encoder') return encoderChat(ctx, servable);
      const { runtime, model: resolved } = servable;
      if ((body.n ?? 1) > 1)
        throw withHints(
          new BadRequestError('n > 1 is not supported; send one request per choice'),
          'n',
          'unsupported_parameter',
        );
      if (body.logprobs)
        throw withHints(
          new BadRequestError('logprobs are not supported by this model'),
          'logprobs',
          'unsupported_parameter',
        );
      if (body.response_format && body.response_format.type !== 'text') {
        throw withHints(
          new BadRequestError(`response_format '${body.response_format.type}' is not supported by '${body.model}'`),
          'response_format',
          'unsupported_parameter',
        );
      }
      checkTools(resolved, body.tools, body.tool_choice);
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'chat', messages: chatToPrompt(body.messages) },
        strictMarkers: false,
        params: {
          maxTokens: body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens(resolved),
          temperature: body.temperature ?? undefined,
          topP: body.top_p ?? undefined,
          topK: body.top_k ?? undefined,
          seed: body.seed ?? undefined,
          stop: normalizeStop(body.stop),
        },
        endpoint: '/v1/chat/completions',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { messages: body.messages },
        signal: req.signal,
      });
      return respondWith(gen, async () =>
        body.stream
          ? streamResponse(
              gen,
              streamHeaders(gen),
              chatStream(gen, body.stream_options?.include_usage === true),
              openAiStreamError,
            )
          : json(200, chatResponse(gen, await gen.collect()), genHeaders(gen)),
      );
    },
  }),
  route({
    method: 'POST',
    path: '/v1/completions',
    tag: 'compatible',
    summary: 'OpenAI-compatible legacy text completion (one prompt string; no cache markers)',
    errorFormat: 'openai',
    body: CompletionBody,
    responses: {
      200: { description: 'A text_completion object, or an SSE stream of them' },
      ...modelRunErrors,
      400: { description: 'Invalid request (OpenAI error envelope)', schema: OpenAiErrorBody },
    },
    handler: async ({ svc, principal, body, req }) => {
      const { runtime, model: resolved } = await resolveServable(svc, principal, body.model, { want: 'decoder' });
      if ((body.n ?? 1) > 1 || (body.best_of ?? 1) > 1)
        throw withHints(new BadRequestError('n and best_of > 1 are not supported'), 'n', 'unsupported_parameter');
      if (body.logprobs !== undefined && body.logprobs !== null)
        throw withHints(
          new BadRequestError('logprobs are not supported by this model'),
          'logprobs',
          'unsupported_parameter',
        );
      if (body.suffix)
        throw withHints(
          new BadRequestError('suffix (insertion) is not supported by this model'),
          'suffix',
          'unsupported_parameter',
        );
      const promptText = Array.isArray(body.prompt) ? (body.prompt[0] as string) : body.prompt;
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'text', text: promptText },
        strictMarkers: false,
        params: {
          maxTokens: body.max_tokens ?? 16,
          temperature: body.temperature ?? undefined,
          topP: body.top_p ?? undefined,
          topK: body.top_k ?? undefined,
          seed: body.seed ?? undefined,
          stop: normalizeStop(body.stop),
        },
        endpoint: '/v1/completions',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { prompt: promptText },
        signal: req.signal,
      });
      return respondWith(gen, async () => {
        const base = {
          id: `cmpl-${gen.inferenceId}`,
          object: 'text_completion',
          created: gen.created,
          model: gen.model.requested,
          system_fingerprint: FINGERPRINT,
        };
        const echo = body.echo ? promptText : '';
        if (!body.stream) {
          const r = await gen.collect();
          return json(
            200,
            {
              ...base,
              choices: [{ text: echo + r.text, index: 0, logprobs: null, finish_reason: openAiFinish(r.finishReason) }],
              usage: openAiUsage(r.usage),
              inference_id: gen.inferenceId,
            },
            genHeaders(gen),
          );
        }
        const includeUsage = body.stream_options?.include_usage === true;
        async function* events(): AsyncGenerator<string> {
          const usageNull = includeUsage ? { usage: null } : {};
          if (echo)
            yield sseData({
              ...base,
              choices: [{ text: echo, index: 0, logprobs: null, finish_reason: null }],
              ...usageNull,
            });
          for (;;) {
            const next = await gen.stream.next();
            if (next.done) {
              yield sseData({
                ...base,
                choices: [{ text: '', index: 0, logprobs: null, finish_reason: openAiFinish(next.value.finishReason) }],
                ...usageNull,
              });
              if (includeUsage) yield sseData({ ...base, choices: [], usage: openAiUsage(next.value.usage) });
              break;
            }
            yield sseData({
              ...base,
              choices: [{ text: next.value, index: 0, logprobs: null, finish_reason: null }],
              ...usageNull,
            });
          }
          yield 'data: [DONE]\n\n';
        }
        return streamResponse(gen, streamHeaders(gen), events(), openAiStreamError);
      });
    },
  }),
];

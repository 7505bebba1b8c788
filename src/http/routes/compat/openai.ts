import { z } from 'zod';
import { modelRunErrors } from '../errorDocs';
import type { Generation, GenerationResult } from '../../../core/decoder/service';
import { toolCallsText, toolResultText } from '../../../core/decoder/tools';
import type {
  DecoderMessage,
  DecoderRole,
  FinishReason,
  GenerationUsage,
  PromptPart,
  TokenLogprob,
  ToolCall,
} from '../../../core/decoder/types';
import { BadRequestError } from '../../../core/errors';
import { resolveServable, type ServableEncoder } from '../../../core/models';
import {
  ChatResponseFormat,
  ChatTool,
  ChatToolChoice,
  chatLogprobs,
  extractForOpenAi,
  toAsync,
  newCallId,
  planDecoder,
  readOutput,
  resolveOpenAiModel,
  toolChoiceOf,
  toolSpec,
  type DecoderPlan,
  type OutputRequest,
} from './openaiOutput';
import { json, route, type ApiResponse, type HandlerContext } from '../../types';
import {
  normalizeStop,
  requireTextOnly,
  genHeaders,
  openAiStreamError,
  streamResponse,
  sseData,
  SSE_HEADERS,
  OpenAiErrorBody,
} from './common';
import {
  defaultMaxTokens,
  effectiveConstraint,
  generate,
  parseCacheControl,
  respondWith,
  withHints,
  type Decoder,
} from '../generation';

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
  tools: z.array(ChatTool).nullable().optional(),
  tool_choice: ChatToolChoice.nullable().optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  response_format: ChatResponseFormat.nullable().optional(),
  logprobs: z.boolean().nullable().optional(),
  top_logprobs: z.number().int().min(0).max(20).nullable().optional(),
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
  logprobs: z.number().int().min(0).max(5).nullable().optional(),
  best_of: z.number().int().nullable().optional(),
});

const FINGERPRINT = 'fp_sift_1';

/** The legacy completions' logprobs: parallel arrays; `text_offset` counts characters of the returned text. */
function legacyLogprobs(lps: TokenLogprob[], offset: number) {
  const text_offset: number[] = [];
  for (const l of lps) {
    text_offset.push(offset);
    offset += l.token.length;
  }
  return {
    tokens: lps.map((l) => l.token),
    token_logprobs: lps.map((l) => l.logprob),
    top_logprobs: lps.map((l) => Object.fromEntries(l.top.map((t) => [t.token, t.logprob]))),
    text_offset,
  };
}

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

/**
 * OpenAI chat messages → decoder messages; markers on system/developer/user text parts (docs/reference/decisions.md#prompt-caching
 * rule 5). An assistant turn's `tool_calls` and a `tool` turn's result are written back as the core writes them.
 */
export function chatToPrompt(messages: ChatBody['messages']): DecoderMessage[] {
  const callNames = new Map<string, string>();
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
    if (role === 'tool') {
      const id = m.tool_call_id;
      const name = (id !== undefined ? callNames.get(id) : undefined) ?? m.name;
      const call = { ...(id !== undefined ? { id } : {}), ...(name !== undefined ? { name } : {}) };
      return { role, parts: [{ text: toolResultText(call, parts.map((p) => p.text).join('')) }] };
    }
    const calls: ToolCall[] = (m.tool_calls ?? []).flatMap((c, j) =>
      c.function ? [{ id: c.id ?? `call_${i}_${j}`, name: c.function.name, arguments: c.function.arguments }] : [],
    );
    for (const c of calls) callNames.set(c.id, c.name);
    if (calls.length > 0) parts.push({ text: toolCallsText(calls) });
    if (parts.length === 0) parts.push({ text: '' });
    return { role, parts };
  });
}

/** The request's response_format, tools and tool_choice in the core's words. */
function chatOutput(body: ChatBody): OutputRequest {
  const tools = (body.tools ?? []).map((t) => toolSpec(t.function));
  const choice = body.tool_choice;
  const rf = body.response_format;
  return {
    format:
      rf?.type === 'json_object'
        ? { type: 'json_object' }
        : rf?.type === 'json_schema'
          ? {
              type: 'json_schema',
              name: rf.json_schema.name,
              schema: rf.json_schema.schema ?? {},
              field: 'response_format.json_schema.schema',
            }
          : undefined,
    tools,
    choice: toolChoiceOf(typeof choice === 'object' && choice !== null ? choice.function : choice, tools),
  };
}

const wireCall = (c: ToolCall) => ({
  id: c.id,
  type: 'function' as const,
  function: { name: c.name, arguments: c.arguments },
});

/** An answer's message: the calls (content null), or the text. */
function chatMessage(out: { text: string | null; calls: ToolCall[] }) {
  return {
    role: 'assistant' as const,
    content: out.calls.length > 0 ? null : (out.text ?? ''),
    refusal: null,
    annotations: [],
    ...(out.calls.length > 0 ? { tool_calls: out.calls.map(wireCall) } : {}),
  };
}

const chatFinish = (calls: ToolCall[], f: FinishReason) => (calls.length > 0 ? 'tool_calls' : openAiFinish(f));
const logprobsBlock = (lps: TokenLogprob[] | null) => (lps ? { content: chatLogprobs(lps), refusal: null } : null);

function chatResponse(gen: Generation, plan: DecoderPlan, r: GenerationResult, wantLogprobs: boolean) {
  const out = readOutput(plan, r.text);
  return {
    id: `chatcmpl-${gen.inferenceId}`,
    object: 'chat.completion',
    created: gen.created,
    model: gen.model.requested,
    system_fingerprint: FINGERPRINT,
    choices: [
      {
        index: 0,
        message: chatMessage(out),
        logprobs: logprobsBlock(wantLogprobs ? gen.logprobs : null),
        finish_reason: chatFinish(out.calls, r.finishReason),
      },
    ],
    usage: openAiUsage(r.usage),
    inference_id: gen.inferenceId,
  };
}

/**
 * Free text streams as it comes. Under tools the output is the tools' grammar, read back once complete: then the
 * calls go out as OpenAI sends them (per call: `index`, `id`, `type`, name and empty arguments, then the arguments),
 * or the answer as one content delta.
 */
async function* chatStream(
  gen: Generation,
  plan: DecoderPlan,
  includeUsage: boolean,
  wantLogprobs: boolean,
): AsyncGenerator<string> {
  const base = {
    id: `chatcmpl-${gen.inferenceId}`,
    object: 'chat.completion.chunk',
    created: gen.created,
    model: gen.model.requested,
    system_fingerprint: FINGERPRINT,
  };
  const usageNull = includeUsage ? { usage: null } : {};
  const chunk = (delta: Record<string, unknown>, finish: string | null, lps: TokenLogprob[] | null = null) =>
    sseData({
      ...base,
      choices: [{ index: 0, delta, logprobs: logprobsBlock(lps), finish_reason: finish }],
      ...usageNull,
    });
  const opening = { role: 'assistant', content: '', refusal: null };
  if (!plan.tools) yield chunk(opening, null);
  let seen = 0;
  let result: GenerationResult;
  for (;;) {
    const next = await gen.stream.next();
    if (next.done) {
      result = next.value;
      break;
    }
    if (plan.tools) continue;
    const lps = wantLogprobs ? gen.logprobs.slice(seen) : null;
    seen = gen.logprobs.length;
    yield chunk({ content: next.value }, null, lps);
  }
  let calls: ToolCall[] = [];
  if (plan.tools) {
    const out = readOutput(plan, result.text);
    calls = out.calls;
    if (calls.length === 0)
      yield chunk({ ...opening, content: out.text ?? '' }, null, wantLogprobs ? gen.logprobs : null);
    for (const [index, c] of calls.entries()) {
      const head = { index, id: c.id, type: 'function', function: { name: c.name, arguments: '' } };
      yield chunk({ ...(index === 0 ? { role: 'assistant', content: null } : {}), tool_calls: [head] }, null);
      yield chunk({ tool_calls: [{ index, function: { arguments: c.arguments } }] }, null);
    }
  }
  yield chunk({}, chatFinish(calls, result.finishReason));
  if (includeUsage) yield sseData({ ...base, choices: [], usage: openAiUsage(result.usage) });
  yield 'data: [DONE]\n\n';
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

function streamHeaders(gen: Generation): Record<string, string> {
  return { ...SSE_HEADERS, ...genHeaders(gen) };
}

/**
 * Extraction through chat: the encoder reads the last user message with the `schema` extra, or with the GLiNER2
 * structure a JSON schema (response_format, or the one tool it must call) maps onto; the answer is the JSON object,
 * as content or as that tool's call. Streamed, it is one delta.
 */
async function encoderChat(
  ctx: HandlerContext<ChatBody, unknown, unknown>,
  servable: ServableEncoder,
  output: OutputRequest,
): Promise<ApiResponse> {
  const body = ctx.body;
  const user = [...body.messages].reverse().find((m) => m.role === 'user');
  const text =
    typeof user?.content === 'string'
      ? user.content
      : (user?.content ?? []).map((p) => String((p as { text?: unknown }).text ?? '')).join('\n');
  const out = await extractForOpenAi({
    svc: ctx.svc,
    principal: ctx.principal,
    servable,
    model: body.model,
    schemaExtra: body.schema,
    output,
    text,
    threshold: body.threshold,
    store: body.store ?? true,
    endpoint: '/v1/chat/completions',
  });
  const content = JSON.stringify(out.answer);
  const calls: ToolCall[] = out.tool ? [{ id: newCallId(), name: out.tool, arguments: content }] : [];
  const message = chatMessage({ text: content, calls });
  const finish = chatFinish(calls, 'stop');
  const usage = openAiUsage({
    promptTokens: out.input_tokens,
    completionTokens: 0,
    cacheReadTokens: 0,
    cacheWriteTokens: 0,
  });
  const base = {
    id: `chatcmpl-${out.inference_id}`,
    created: Math.floor(ctx.svc.now().getTime() / 1000),
    model: body.model,
  };
  const headers = { 'x-inference-id': out.inference_id };
  if (body.stream) {
    const includeUsage = body.stream_options?.include_usage === true;
    const usageNull = includeUsage ? { usage: null } : {};
    const chunk = (delta: Record<string, unknown>, finish: string | null) =>
      sseData({
        ...base,
        object: 'chat.completion.chunk',
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
        ...usageNull,
      });
    const delta =
      calls.length > 0 ? { ...message, tool_calls: calls.map((c, index) => ({ index, ...wireCall(c) })) } : message;
    const events = [chunk(delta, null), chunk({}, finish)];
    if (includeUsage) events.push(sseData({ ...base, object: 'chat.completion.chunk', choices: [], usage }));
    events.push('data: [DONE]\n\n');
    return { status: 200, headers: { ...SSE_HEADERS, ...headers }, stream: toAsync(events) };
  }
  return json(
    200,
    {
      ...base,
      object: 'chat.completion',
      choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
      usage,
      inference_id: out.inference_id,
      // Sift's own, beside inference_id: the content stays the result object alone
      windows: out.windows,
    },
    headers,
  );
}

export const openAiRoutes = [
  route({
    method: 'POST',
    path: '/v1/chat/completions',
    tag: 'compatible',
    summary:
      'OpenAI-compatible chat completions (streaming, stop sequences, prompt caching, structured outputs, tools, logprobs, `schema` extraction)',
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
      const output = chatOutput(body);
      const servable = await resolveOpenAiModel(svc, principal, body.model, output, body.schema !== undefined);
      if (servable.kind === 'encoder') return encoderChat(ctx, servable, output);
      const { runtime, model: resolved } = servable;
      if ((body.n ?? 1) > 1)
        throw withHints(
          new BadRequestError('n > 1 is not supported; send one request per choice'),
          'n',
          'unsupported_parameter',
        );
      if (body.top_logprobs !== undefined && body.top_logprobs !== null && !body.logprobs)
        throw withHints(new BadRequestError('top_logprobs needs logprobs: true'), 'top_logprobs', 'invalid_value');
      // the core refuses logprobs a backend cannot give (400 naming logprobs)
      const logprobs = body.logprobs ? (body.top_logprobs ?? 0) : undefined;
      const plan = planDecoder(chatToPrompt(body.messages), output);
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'chat', messages: plan.messages },
        strictMarkers: false,
        params: {
          maxTokens: body.max_completion_tokens ?? body.max_tokens ?? defaultMaxTokens(resolved),
          temperature: body.temperature ?? undefined,
          topP: body.top_p ?? undefined,
          topK: body.top_k ?? undefined,
          seed: body.seed ?? undefined,
          stop: normalizeStop(body.stop),
          logprobs,
        },
        constraint: effectiveConstraint(ctx, plan.constraint),
        endpoint: '/v1/chat/completions',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { messages: body.messages },
        signal: req.signal,
      });
      const wantLogprobs = logprobs !== undefined;
      return respondWith(gen, async () =>
        body.stream
          ? streamResponse(
              gen,
              streamHeaders(gen),
              chatStream(gen, plan, body.stream_options?.include_usage === true, wantLogprobs),
              openAiStreamError,
            )
          : json(200, chatResponse(gen, plan, await gen.collect(), wantLogprobs), genHeaders(gen)),
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
      const logprobs = body.logprobs ?? undefined;
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
          logprobs,
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
        const legacy = (lps: TokenLogprob[], offset: number) =>
          logprobs === undefined ? null : legacyLogprobs(lps, offset);
        if (!body.stream) {
          const r = await gen.collect();
          return json(
            200,
            {
              ...base,
              choices: [
                {
                  text: echo + r.text,
                  index: 0,
                  logprobs: legacy(gen.logprobs, echo.length),
                  finish_reason: openAiFinish(r.finishReason),
                },
              ],
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
          let seen = 0;
          let offset = echo.length;
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
            const lps = legacy(gen.logprobs.slice(seen), offset);
            seen = gen.logprobs.length;
            offset += next.value.length;
            yield sseData({
              ...base,
              choices: [{ text: next.value, index: 0, logprobs: lps, finish_reason: null }],
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

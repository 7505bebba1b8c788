import { z } from 'zod';
import { modelRunErrors } from '../errorDocs';
import type { Generation, GenerationResult } from '../../../core/decoder/service';
import type {
  CacheMarker,
  DecoderMessage,
  FinishReason,
  GenerationUsage,
  OutputConstraint,
  PromptPart,
  ToolChoice,
  ToolSpec,
} from '../../../core/decoder/types';
import { checkJsonSchema, structuredOutputMessages } from '../../../core/decoder/structured';
import { planToolUse, readToolOutput, toolCallsText, toolResultText } from '../../../core/decoder/tools';
import { BadRequestError } from '../../../core/errors';
import { jsonSchemaToGliner } from '../../../core/extraction/jsonSchemaMapping';
import { newInferenceId } from '../../../core/inferences';
import { resolveServable, type ServableEncoder } from '../../../core/models';
import { json, route, type ApiResponse, type HandlerContext } from '../../types';
import {
  extractJsonThroughCompat,
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
import { effectiveConstraint, generate, parseCacheControl, respondWith, withHints } from '../generation';

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
  tools: z
    .array(
      z.looseObject({
        name: z.string().min(1),
        type: z.string().optional(),
        description: z.string().optional(),
        input_schema: z.unknown().optional(),
        cache_control: z.unknown().optional(),
      }),
    )
    .optional(),
  tool_choice: z
    .looseObject({
      type: z.enum(['auto', 'any', 'none', 'tool']),
      name: z.string().min(1).optional(),
      disable_parallel_tool_use: z.boolean().optional(),
    })
    .optional(),
  /** Structured outputs as `messages.parse` sends them (`output_config.format`). */
  output_config: z
    .looseObject({
      format: z
        .strictObject({ type: z.literal('json_schema'), schema: z.unknown() })
        .nullable()
        .optional(),
    })
    .optional(),
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

/** Client tools → the core's tools; a server tool (a versioned `type` that Anthropic runs) is refused by name. */
export function clientTools(body: Pick<Body, 'tools'>): ToolSpec[] {
  return (body.tools ?? []).map((t, i) => {
    const at = `tools.${i}`;
    if (t.type !== undefined && t.type !== 'custom')
      throw withHints(
        new BadRequestError(
          `${at}: '${t.name}' is a server tool (type '${t.type}'), which only Anthropic runs; Sift runs client tools ({name, description, input_schema})`,
        ),
        at,
        'unsupported_tool',
      );
    if (typeof t.input_schema !== 'object' || t.input_schema === null || Array.isArray(t.input_schema))
      throw withHints(new BadRequestError(`${at}.input_schema: a JSON schema object is required`), at, 'invalid_value');
    return { name: t.name, description: t.description, parameters: t.input_schema as Record<string, unknown> };
  });
}

/** `any` is the core's `required`; a `tool` choice names its tool. */
export function toolChoiceOf(body: Pick<Body, 'tool_choice'>): ToolChoice {
  const c = body.tool_choice;
  if (!c || c.type === 'auto') return { type: 'auto' };
  if (c.type === 'any') return { type: 'required' };
  if (c.type === 'none') return { type: 'none' };
  if (!c.name)
    throw withHints(
      new BadRequestError("tool_choice: type 'tool' needs the tool's name"),
      'tool_choice',
      'invalid_value',
    );
  return { type: 'tool', name: c.name };
}

const toolUseId = () => `toolu_${newInferenceId().replaceAll('-', '')}`;

/** Tool calls of earlier turns and their results, written back as the model was asked to write them (core/decoder/tools.ts). */
function blockText(b: Record<string, unknown>, at: string, callNames: Map<string, string>): string {
  switch (b.type) {
    case 'text':
      if (typeof b.text !== 'string')
        throw withHints(new BadRequestError(`${at}: a text block needs a string 'text'`), at, 'invalid_value');
      return b.text;
    case 'tool_use': {
      if (typeof b.name !== 'string')
        throw withHints(new BadRequestError(`${at}: a tool_use block needs a string 'name'`), at, 'invalid_value');
      if (typeof b.id === 'string') callNames.set(b.id, b.name);
      return toolCallsText([{ id: String(b.id ?? ''), name: b.name, arguments: JSON.stringify(b.input ?? {}) }]);
    }
    case 'tool_result': {
      const c = b.content;
      const text =
        typeof c === 'string'
          ? c
          : Array.isArray(c)
            ? c.map((x: Record<string, unknown>, k: number) => blockText(x, `${at}.content.${k}`, callNames)).join('\n')
            : '';
      const id = typeof b.tool_use_id === 'string' ? b.tool_use_id : undefined;
      const name = id === undefined ? undefined : callNames.get(id);
      return toolResultText(
        { ...(id !== undefined ? { id } : {}), ...(name !== undefined ? { name } : {}) },
        b.is_error ? `(error) ${text}` : text,
      );
    }
    case 'thinking':
    case 'redacted_thinking':
      return '';
    default:
      return requireTextOnly(String(b.type), at);
  }
}

/** The request's decoder prompt: messages (tools and the structured-output instruction included) and the output constraint. */
export interface AnthropicPrompt {
  messages: DecoderMessage[];
  markerCount: number;
  /** The tools offered (empty with tool_choice none), to read calls back from the output. */
  tools: ToolSpec[];
  choice: ToolChoice;
  constraint?: OutputConstraint | undefined;
}

/**
 * Anthropic content → decoder messages. Markers on system blocks, message blocks and tools
 * (docs/reference/decisions.md#prompt-caching rule 5), in the prefix order tools → system → messages; a top-level `cache_control`
 * (automatic mode) marks the last block. Offered tools are one rendered block (planToolUse) carrying
 * the last tool marker; `output_config.format` adds its instruction and constraint.
 */
export function messagesToPrompt(body: Body): AnthropicPrompt {
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
  const choice = toolChoiceOf(body);
  const declared = clientTools(body);
  const tools = choice.type === 'none' ? [] : declared;
  const format = body.output_config?.format ?? undefined;
  if (format && tools.length)
    throw withHints(
      new BadRequestError(
        'output_config.format: give either output_config.format or tools (a forced tool is the other way to get JSON), not both',
      ),
      'output_config.format',
      'invalid_value',
    );
  const plan = planToolUse([], tools, choice, 'tools');
  const system: PromptPart[] = [];
  const rendered = plan.messages[0]?.parts.map((p) => p.text).join('') ?? '';
  let toolsMarker: CacheMarker | undefined;
  for (const [i, t] of (body.tools ?? []).entries())
    toolsMarker = mark(t.cache_control, `tools.${i}`, t.name) ?? toolsMarker;
  if (rendered) system.push(toolsMarker ? { text: rendered, cache: toolsMarker } : { text: rendered });
  if (typeof body.system === 'string') system.push({ text: body.system });
  else
    for (const [i, b] of (body.system ?? []).entries()) {
      const at = `system.${i}`;
      if (b.type !== 'text') requireTextOnly(b.type, at);
      const text = blockText(b, at, new Map());
      const cache = mark(b.cache_control, at, text);
      system.push(cache ? { text, cache } : { text });
    }
  const messages: DecoderMessage[] = system.length ? [{ role: 'system', parts: system }] : [];
  const callNames = new Map<string, string>();
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
            const text = blockText(b, `${at}.content.${j}`, callNames);
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
  if (format) {
    const constraint: OutputConstraint = {
      kind: 'json_schema',
      schema: checkJsonSchema(format.schema, 'output_config.format.schema'),
    };
    return { messages: structuredOutputMessages(messages, constraint), markerCount, tools, choice, constraint };
  }
  return { messages, markerCount, tools, choice, constraint: plan.constraint };
}

type ContentBlock =
  | { type: 'text'; text: string; citations: null }
  | { type: 'tool_use'; id: string; name: string; input: unknown };

type Message = ReturnType<typeof message>;

function message(
  id: string,
  model: string,
  content: ContentBlock[],
  stop: { stop_reason: string; stop_sequence: string | null },
  usage: ReturnType<typeof anthropicUsage>,
) {
  return { id: `msg_${id}`, type: 'message', role: 'assistant', model, content, ...stop, usage, inference_id: id };
}

const textBlock = (text: string): ContentBlock => ({ type: 'text', text, citations: null });

/** A generation's message: its text, or (with tools offered) the calls read from the constrained output. */
function messageBody(gen: Generation, r: GenerationResult, prompt: AnthropicPrompt): Message {
  const stop: { stop_reason: string; stop_sequence: string | null } = {
    stop_reason: anthropicStop(r.finishReason),
    stop_sequence: r.stopSequence,
  };
  let content = [textBlock(r.text)];
  if (prompt.tools.length) {
    const out = readToolOutput(r.text, prompt.tools, prompt.choice, toolUseId);
    content = [
      ...(out.text !== null ? [textBlock(out.text)] : []),
      ...out.calls.map(
        (c): ContentBlock => ({ type: 'tool_use', id: c.id, name: c.name, input: JSON.parse(c.arguments) }),
      ),
    ];
    if (out.calls.length) stop.stop_reason = 'tool_use';
  }
  return message(
    gen.inferenceId,
    gen.model.requested,
    content,
    stop,
    anthropicUsage(r.usage, r.usage.completionTokens),
  );
}

const messageStart = (m: Pick<Message, 'id' | 'model' | 'usage'>) =>
  sseEvent('message_start', {
    type: 'message_start',
    message: {
      id: m.id,
      type: 'message',
      role: 'assistant',
      model: m.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: m.usage,
    },
  });

const messageEnd = (m: Pick<Message, 'stop_reason' | 'stop_sequence' | 'usage'>) => [
  sseEvent('message_delta', {
    type: 'message_delta',
    delta: { stop_reason: m.stop_reason, stop_sequence: m.stop_sequence },
    usage: m.usage,
  }),
  sseEvent('message_stop', { type: 'message_stop' }),
];

/**
 * A finished message's content blocks as events (compat.md §4.4): tool calls and extraction results
 * are known only once complete (the constrained JSON is read whole), so each block is one delta.
 */
function* blockEvents(content: ContentBlock[]): Generator<string> {
  for (const [index, b] of content.entries()) {
    const [start, delta] =
      b.type === 'text'
        ? [
            { ...b, text: '' },
            { type: 'text_delta', text: b.text },
          ]
        : [
            { ...b, input: {} },
            { type: 'input_json_delta', partial_json: JSON.stringify(b.input) },
          ];
    yield sseEvent('content_block_start', { type: 'content_block_start', index, content_block: start });
    yield sseEvent('content_block_delta', { type: 'content_block_delta', index, delta });
    yield sseEvent('content_block_stop', { type: 'content_block_stop', index });
  }
}

const ping = sseEvent('ping', { type: 'ping' });

/**
 * Text streams piece by piece. With tools offered, the calls are read once the output is complete:
 * meanwhile a ping per piece, so a client that leaves stops the generation at once.
 */
async function* messageStream(gen: Generation, prompt: AnthropicPrompt): AsyncGenerator<string> {
  if (prompt.tools.length) {
    yield messageStart({
      id: `msg_${gen.inferenceId}`,
      model: gen.model.requested,
      usage: anthropicUsage(gen.start, 0),
    });
    let next = await gen.stream.next();
    for (; !next.done; next = await gen.stream.next()) yield ping;
    const m = messageBody(gen, next.value, prompt);
    yield* blockEvents(m.content);
    yield* messageEnd(m);
    return;
  }
  yield messageStart({ id: `msg_${gen.inferenceId}`, model: gen.model.requested, usage: anthropicUsage(gen.start, 0) });
  yield sseEvent('content_block_start', {
    type: 'content_block_start',
    index: 0,
    content_block: { type: 'text', text: '' },
  });
  yield ping;
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
  yield* messageEnd({
    stop_reason: anthropicStop(r.finishReason),
    stop_sequence: r.stopSequence,
    usage: anthropicUsage(r.usage, r.usage.completionTokens),
  });
}

/**
 * JSON an encoder can answer by extraction (core/extraction/jsonSchemaMapping.ts): `output_config.format`,
 * or a forced single tool (`tool_choice` tool, or `any` with one tool) whose input schema maps.
 */
function extractionTarget(body: Body): { schema: unknown; field: string; tool?: string } | undefined {
  const format = body.output_config?.format;
  if (format) return { schema: format.schema, field: 'output_config.format.schema' };
  const tools = body.tools ?? [];
  const c = body.tool_choice;
  const i =
    c?.type === 'tool' ? tools.findIndex((t) => t.name === c.name) : c?.type === 'any' && tools.length === 1 ? 0 : -1;
  const tool = tools[i];
  return tool && { schema: tool.input_schema, field: `tools.${i}.input_schema`, tool: tool.name };
}

/** Text for an encoder: the last user message's text blocks. */
function lastUserText(body: Body): string {
  const user = [...body.messages].reverse().find((m) => m.role === 'user');
  return typeof user?.content === 'string'
    ? user.content
    : (user?.content ?? []).map((b) => String(b.text ?? '')).join('\n');
}

const encoderUsage = (inputTokens: number) =>
  anthropicUsage(
    {
      promptTokens: inputTokens,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
    },
    0,
  );

async function encoderMessages(
  ctx: HandlerContext<Body, unknown, unknown>,
  servable: ServableEncoder,
): Promise<ApiResponse> {
  const { body } = ctx;
  const target = body.schema === undefined ? extractionTarget(body) : undefined;
  if (!body.schema && !target) throw new BadRequestError('schema extraction is not available');
  const common = {
    svc: ctx.svc,
    principal: ctx.principal,
    servable,
    text: lastUserText(body),
    threshold: body.threshold,
    store: body.store ?? true,
    endpoint: '/v1/messages',
  };
  if (body.schema) {
    if (body.stream)
      throw withHints(new BadRequestError('schema extraction does not stream; send stream: false'), 'stream');
    const out = await extractThroughCompat({ ...common, schema: body.schema });
    // Sift's own `windows`, beside inference_id: the content stays the result object alone
    return json(200, {
      ...message(
        out.inference_id,
        body.model,
        [textBlock(JSON.stringify(out.result))],
        { stop_reason: 'end_turn', stop_sequence: null },
        encoderUsage(out.input_tokens),
      ),
      windows: out.windows,
    });
  }
  const { schema, field, tool } = target!;
  const title = (schema as { title?: unknown } | undefined)?.title;
  const mapping = jsonSchemaToGliner(schema, field, typeof title === 'string' ? undefined : tool);
  const out = await extractJsonThroughCompat({ ...common, mapping, jsonSchema: schema });
  const m = message(
    out.inferenceId,
    body.model,
    [
      tool
        ? { type: 'tool_use', id: toolUseId(), name: tool, input: out.object }
        : textBlock(JSON.stringify(out.object)),
    ],
    { stop_reason: tool ? 'tool_use' : 'end_turn', stop_sequence: null },
    encoderUsage(out.usage.input_tokens),
  );
  if (!body.stream) return json(200, { ...m, windows: out.windows });
  const events = async function* () {
    yield messageStart({ ...m, usage: { ...m.usage, output_tokens: 0 } });
    yield* blockEvents(m.content);
    yield* messageEnd(m);
  };
  return { status: 200, headers: SSE_HEADERS, stream: events() };
}

export const anthropicRoutes = [
  route({
    method: 'POST',
    path: '/v1/messages',
    tag: 'compatible',
    summary:
      'Anthropic-compatible messages (streaming, stop sequences, cache_control prompt caching, tools, structured outputs, `schema` extraction)',
    description:
      'Authenticate with `x-api-key` (SDK 0.x) or `Authorization: Bearer` (SDK 1.x); any `anthropic-version` is accepted. ' +
      'Tools and `output_config.format` are held by grammar-constrained decoding; on an encoder model, `output_config.format` or a forced tool whose schema is strings, string arrays and string enums answers by extraction.',
    errorFormat: 'anthropic',
    body: MessagesBody,
    responses: {
      200: {
        description:
          'A message object, or a named-event SSE stream; Sift adds `inference_id` and, on an encoder, `windows` (encoder passes over the text: 1 = at once)',
      },
      ...modelRunErrors,
      400: { description: 'Invalid request (Anthropic error envelope)', schema: AnthropicErrorBody },
    },
    handler: async (ctx) => {
      const { svc, principal, body, req } = ctx;
      // JSON an encoder could answer: either kind serves it; otherwise `schema` picks the kind
      const servable =
        body.schema === undefined && extractionTarget(body)
          ? await resolveServable(svc, principal, body.model)
          : await resolveCompatModel(svc, principal, body.model, body.schema !== undefined);
      if (servable.kind === 'encoder') return encoderMessages(ctx, servable);
      const { runtime, model: resolved } = servable;
      const prompt = messagesToPrompt(body);
      if (prompt.tools.length && !resolved.profile.tools)
        throw withHints(
          new BadRequestError(
            `'${resolved.requested}' does not support tool calling; remove 'tools' (or set tool_choice to {"type": "none"})`,
          ),
          'tools',
          'unsupported_parameter',
        );
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'chat', messages: prompt.messages, continueFinal: true },
        strictMarkers: true,
        params: {
          maxTokens: body.max_tokens,
          temperature: body.temperature,
          topP: body.top_p,
          topK: body.top_k,
          stop: normalizeStop(body.stop_sequences),
        },
        constraint: effectiveConstraint(ctx, prompt.constraint),
        endpoint: '/v1/messages',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { messages: body.messages, ...(body.system !== undefined ? { system: body.system } : {}) },
        signal: req.signal,
      });
      return respondWith(gen, async () =>
        body.stream
          ? streamResponse(
              gen,
              { ...SSE_HEADERS, ...genHeaders(gen) },
              messageStream(gen, prompt),
              anthropicStreamError,
            )
          : json(200, messageBody(gen, await gen.collect(), prompt), genHeaders(gen)),
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

import { z } from 'zod';
import { modelRunErrors } from '../errorDocs';
import type { Generation, GenerationResult } from '../../../core/decoder/service';
import { toolCallsText, toolResultText } from '../../../core/decoder/tools';
import type { DecoderMessage, FinishReason, GenerationUsage, PromptPart, ToolCall } from '../../../core/decoder/types';
import { BadRequestError } from '../../../core/errors';
import { json, route } from '../../types';
import { requireTextOnly, genHeaders, streamResponse, sseEvent, SSE_HEADERS, OpenAiErrorBody } from './common';
import {
  defaultMaxTokens,
  effectiveConstraint,
  generate,
  parseCacheControl,
  respondWith,
  withHints,
} from '../generation';
import {
  extractForOpenAi,
  newCallId,
  toAsync,
  planDecoder,
  readOutput,
  resolveOpenAiModel,
  ResponsesTextFormat,
  ResponsesTool,
  ResponsesToolChoice,
  toolChoiceOf,
  toolSpec,
  type DecoderPlan,
  type OutputRequest,
} from './openaiOutput';

const Item = z.looseObject({
  type: z.string().optional(),
  role: z.string().optional(),
  content: z.unknown().optional(),
});

export const ResponsesBody = z.looseObject({
  model: z.string().min(1),
  input: z.union([z.string(), z.array(Item).min(1)]),
  instructions: z.string().nullable().optional(),
  max_output_tokens: z.number().int().min(1).nullable().optional(),
  temperature: z.number().min(0).max(2).nullable().optional(),
  top_p: z.number().min(0).max(1).nullable().optional(),
  stream: z.boolean().nullable().optional(),
  store: z.boolean().nullable().optional(),
  previous_response_id: z.string().nullable().optional(),
  conversation: z.unknown().optional(),
  tools: z.array(ResponsesTool).nullable().optional(),
  tool_choice: ResponsesToolChoice.nullable().optional(),
  parallel_tool_calls: z.boolean().nullable().optional(),
  text: z.looseObject({ format: ResponsesTextFormat.optional() }).nullable().optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  background: z.boolean().nullable().optional(),
});
type Body = z.output<typeof ResponsesBody>;

/** compat.md §5.5: input_tokens include cached ones; reads and writes in the details (both required). */
type ResponsesUsage = Pick<
  GenerationUsage,
  'promptTokens' | 'completionTokens' | 'cacheReadTokens' | 'cacheWriteTokens'
>;
export function responsesUsage(u: ResponsesUsage) {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cacheReadTokens, cache_write_tokens: u.cacheWriteTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

const MARKABLE = new Set(['system', 'developer']);

/**
 * Input items → decoder messages; markers on content blocks of system/developer messages (docs/reference/decisions.md#prompt-caching
 * rule 5). `function_call` and `function_call_output` items are written back as the core writes calls and results.
 */
export function responsesToPrompt(body: Body): DecoderMessage[] {
  const messages: DecoderMessage[] = [];
  const callNames = new Map<string, string>();
  if (body.instructions) messages.push({ role: 'system', parts: [{ text: body.instructions }] });
  if (typeof body.input === 'string') {
    messages.push({ role: 'user', parts: [{ text: body.input }] });
    return messages;
  }
  body.input.forEach((item, i) => {
    const at = `input.${i}`;
    const type = item.type ?? 'message';
    const raw = item as Record<string, unknown>;
    if (type === 'function_call') {
      if (typeof raw.name !== 'string' || typeof raw.arguments !== 'string' || typeof raw.call_id !== 'string')
        throw withHints(
          new BadRequestError(`${at}: a function_call item needs string call_id, name and arguments`),
          at,
          'invalid_value',
        );
      callNames.set(raw.call_id, raw.name);
      messages.push({
        role: 'assistant',
        parts: [{ text: toolCallsText([{ id: raw.call_id, name: raw.name, arguments: raw.arguments }]) }],
      });
      return;
    }
    if (type === 'function_call_output') {
      const id = typeof raw.call_id === 'string' ? raw.call_id : undefined;
      const name = id !== undefined ? callNames.get(id) : undefined;
      const output = typeof raw.output === 'string' ? raw.output : JSON.stringify(raw.output);
      const call = { ...(id !== undefined ? { id } : {}), ...(name !== undefined ? { name } : {}) };
      messages.push({ role: 'tool', parts: [{ text: toolResultText(call, output) }] });
      return;
    }
    if (type === 'reasoning') return;
    if (type !== 'message') requireTextOnly(type, at);
    const role = item.role;
    if (role !== 'user' && role !== 'assistant' && role !== 'system' && role !== 'developer') {
      throw withHints(
        new BadRequestError(`${at}.role must be user, assistant, system or developer`),
        `${at}.role`,
        'invalid_value',
      );
    }
    if (raw.cache_control !== undefined) {
      throw withHints(
        new BadRequestError(
          `${at}: cache_control must be on a content block; a plain string content cannot carry a cache marker`,
        ),
        at,
        'invalid_value',
      );
    }
    const parts: PromptPart[] = [];
    if (typeof item.content === 'string') parts.push({ text: item.content });
    else if (Array.isArray(item.content) && item.content.length > 0) {
      item.content.forEach((b: Record<string, unknown>, j: number) => {
        const bat = `${at}.content.${j}`;
        const t = String(b?.type);
        if (t !== 'input_text' && t !== 'output_text' && t !== 'text') requireTextOnly(t, bat);
        if (typeof b.text !== 'string')
          throw withHints(new BadRequestError(`${bat}: a '${t}' block needs a string 'text'`), bat, 'invalid_value');
        let cache = b.cache_control !== undefined ? parseCacheControl(b.cache_control, bat) : undefined;
        if (!cache && b.prompt_cache_breakpoint) cache = { ttlSeconds: 300 };
        parts.push(cache && MARKABLE.has(role) ? { text: b.text, cache } : { text: b.text });
      });
    } else
      throw withHints(
        new BadRequestError(`${at}.content must be a string or a non-empty array of content blocks`),
        `${at}.content`,
        'invalid_value',
      );
    messages.push({ role: role === 'developer' ? 'system' : role, parts });
  });
  return messages;
}

/** Who answered: a generation, or an extraction. */
interface Meta {
  inferenceId: string;
  created: number;
  model: string;
}

/** A finished answer: the text (null when it only called) or the calls. */
interface Answer {
  text: string | null;
  calls: ToolCall[];
  finishReason: FinishReason;
  usage: ResponsesUsage;
}

function outputItems(meta: Meta, a: Answer, incomplete: boolean) {
  const status = incomplete ? 'incomplete' : 'completed';
  if (a.calls.length === 0)
    return [
      {
        id: `msg_${meta.inferenceId}`,
        type: 'message' as const,
        role: 'assistant',
        status,
        content: [{ type: 'output_text', text: a.text ?? '', annotations: [], logprobs: [] }],
      },
    ];
  return a.calls.map((c, i) => ({
    id: `fc_${meta.inferenceId}_${i}`,
    type: 'function_call' as const,
    call_id: c.id,
    name: c.name,
    arguments: c.arguments,
    status,
  }));
}

function responseObject(meta: Meta, body: Body, a: Answer | undefined) {
  const incomplete = a?.finishReason === 'length';
  return {
    id: `resp_${meta.inferenceId}`,
    object: 'response',
    created_at: meta.created,
    ...(a ? { completed_at: Math.floor(Date.now() / 1000) } : {}),
    status: !a ? 'in_progress' : incomplete ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: meta.model,
    output: a ? outputItems(meta, a, incomplete) : [],
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: null,
    store: body.store ?? true,
    // Sampling is greedy unless a temperature is sent (small models answer better that way).
    temperature: body.temperature ?? 0,
    text: { format: body.text?.format ?? { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    metadata: body.metadata ?? {},
    usage: a ? responsesUsage(a.usage) : null,
    inference_id: meta.inferenceId,
  };
}

type Emit = (type: string, data: Record<string, unknown>) => string;
type OutputItem = ReturnType<typeof outputItems>[number];

/** An output item's events: a message with its text as `deltas`, or a function call with its arguments at once. */
function* itemEvents(ev: Emit, item: OutputItem, index: number, deltas: Iterable<string> | null): Generator<string> {
  if (item.type === 'function_call') {
    const loc = { item_id: item.id, output_index: index };
    yield ev('response.output_item.added', {
      output_index: index,
      item: { ...item, arguments: '', status: 'in_progress' },
    });
    yield ev('response.function_call_arguments.delta', { ...loc, delta: item.arguments });
    yield ev('response.function_call_arguments.done', { ...loc, name: item.name, arguments: item.arguments });
  } else {
    const text = item.content[0]!.text;
    if (deltas) yield* messageDeltas(ev, item.id, index, deltas);
    const loc = { item_id: item.id, output_index: index, content_index: 0 };
    yield ev('response.output_text.done', { ...loc, text, logprobs: [] });
    yield ev('response.content_part.done', { ...loc, part: item.content[0] });
  }
  yield ev('response.output_item.done', { output_index: index, item });
}

/** A message item opened, then its text deltas. */
function* messageDeltas(ev: Emit, itemId: string, index: number, deltas: Iterable<string>): Generator<string> {
  const loc = { item_id: itemId, output_index: index, content_index: 0 };
  yield ev('response.output_item.added', {
    output_index: index,
    item: { id: itemId, type: 'message', role: 'assistant', status: 'in_progress', content: [] },
  });
  yield ev('response.content_part.added', {
    ...loc,
    part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
  });
  for (const delta of deltas) yield ev('response.output_text.delta', { ...loc, delta, logprobs: [] });
}

function eventWriter(): Emit {
  let seq = 0;
  return (type, data) => sseEvent(type, { type, sequence_number: seq++, ...data });
}

const finalEvent = (ev: Emit, final: ReturnType<typeof responseObject>) =>
  ev(final.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: final });

/** A finished answer as a stream (buffered tool output, an extraction): every item at once. */
function* answerStream(meta: Meta, body: Body, a: Answer): Generator<string> {
  const ev = eventWriter();
  yield ev('response.created', { response: responseObject(meta, body, undefined) });
  yield ev('response.in_progress', { response: responseObject(meta, body, undefined) });
  const final = responseObject(meta, body, a);
  for (const [i, item] of final.output.entries())
    yield* itemEvents(ev, item, i, item.type === 'message' ? [item.content[0]!.text] : null);
  yield finalEvent(ev, final);
}

const metaOf = (gen: Generation): Meta => ({
  inferenceId: gen.inferenceId,
  created: gen.created,
  model: gen.model.requested,
});

function answerOf(plan: DecoderPlan, r: GenerationResult): Answer {
  return { ...readOutput(plan, r.text), finishReason: r.finishReason, usage: r.usage };
}

/** Free text streams as it comes; under tools the output is read back whole, then sent as its items. */
async function* responseStream(gen: Generation, body: Body, plan: DecoderPlan): AsyncGenerator<string> {
  const meta = metaOf(gen);
  if (plan.tools) {
    yield* answerStream(meta, body, answerOf(plan, await gen.collect()));
    return;
  }
  const ev = eventWriter();
  yield ev('response.created', { response: responseObject(meta, body, undefined) });
  yield ev('response.in_progress', { response: responseObject(meta, body, undefined) });
  yield* messageDeltas(ev, `msg_${meta.inferenceId}`, 0, []);
  let r: GenerationResult;
  for (;;) {
    const next = await gen.stream.next();
    if (next.done) {
      r = next.value;
      break;
    }
    yield ev('response.output_text.delta', {
      item_id: `msg_${meta.inferenceId}`,
      output_index: 0,
      content_index: 0,
      delta: next.value,
      logprobs: [],
    });
  }
  const final = responseObject(meta, body, answerOf(plan, r));
  yield* itemEvents(ev, final.output[0]!, 0, null);
  yield finalEvent(ev, final);
}

/** The request's text.format, tools and tool_choice in the core's words. */
function responsesOutput(body: Body): OutputRequest {
  const tools = (body.tools ?? []).map(toolSpec);
  const f = body.text?.format;
  return {
    format:
      f?.type === 'json_object'
        ? { type: 'json_object' }
        : f?.type === 'json_schema'
          ? { type: 'json_schema', name: f.name, schema: f.schema, field: 'text.format.schema' }
          : undefined,
    tools,
    choice: toolChoiceOf(body.tool_choice, tools),
  };
}

/** The text an encoder reads: the last user input. */
function lastUserText(body: Body): string {
  if (typeof body.input === 'string') return body.input;
  const item = [...body.input].reverse().find((i) => (i.type ?? 'message') === 'message' && i.role === 'user');
  const content = item?.content;
  if (typeof content === 'string') return content;
  return Array.isArray(content) ? content.map((b: { text?: unknown }) => String(b?.text ?? '')).join('\n') : '';
}

export const responsesRoutes = [
  route({
    method: 'POST',
    path: '/v1/responses',
    tag: 'compatible',
    summary:
      'OpenAI-compatible Responses API (stateless: store only feeds inference history; no previous_response_id; structured outputs and function tools)',
    errorFormat: 'openai',
    body: ResponsesBody,
    responses: {
      200: { description: 'A response object, or a named-event SSE stream' },
      ...modelRunErrors,
      400: { description: 'Invalid request (OpenAI error envelope)', schema: OpenAiErrorBody },
    },
    handler: async (ctx) => {
      const { svc, principal, body, req } = ctx;
      if (body.previous_response_id) {
        throw withHints(
          new BadRequestError(
            'previous_response_id is not supported: this Responses API is stateless; send the whole conversation in input',
          ),
          'previous_response_id',
          'unsupported_parameter',
        );
      }
      if (body.conversation)
        throw withHints(
          new BadRequestError('conversation is not supported (stateless API)'),
          'conversation',
          'unsupported_parameter',
        );
      if (body.background)
        throw withHints(
          new BadRequestError('background responses are not supported'),
          'background',
          'unsupported_parameter',
        );
      const output = responsesOutput(body);
      const servable = await resolveOpenAiModel(svc, principal, body.model, output, false);
      if (servable.kind === 'encoder') {
        const out = await extractForOpenAi({
          svc,
          principal,
          servable,
          model: body.model,
          schemaExtra: undefined,
          output,
          text: lastUserText(body),
          store: body.store ?? true,
          endpoint: '/v1/responses',
        });
        const content = JSON.stringify(out.answer);
        const meta: Meta = {
          inferenceId: out.inference_id,
          created: Math.floor(svc.now().getTime() / 1000),
          model: body.model,
        };
        const answer: Answer = {
          text: content,
          calls: out.tool ? [{ id: newCallId(), name: out.tool, arguments: content }] : [],
          finishReason: 'stop',
          usage: { promptTokens: out.input_tokens, completionTokens: 0, cacheReadTokens: 0, cacheWriteTokens: 0 },
        };
        const headers = { 'x-inference-id': out.inference_id };
        return body.stream
          ? { status: 200, headers: { ...SSE_HEADERS, ...headers }, stream: toAsync(answerStream(meta, body, answer)) }
          : json(200, responseObject(meta, body, answer), headers);
      }
      const { runtime, model: resolved } = servable;
      const plan = planDecoder(responsesToPrompt(body), output);
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'chat', messages: plan.messages },
        strictMarkers: false,
        params: {
          maxTokens: body.max_output_tokens ?? defaultMaxTokens(resolved),
          temperature: body.temperature ?? undefined,
          topP: body.top_p ?? undefined,
          stop: [],
        },
        constraint: effectiveConstraint(ctx, plan.constraint),
        endpoint: '/v1/responses',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { input: body.input, ...(body.instructions ? { instructions: body.instructions } : {}) },
        signal: req.signal,
      });
      return respondWith(gen, async () =>
        body.stream
          ? streamResponse(gen, { ...SSE_HEADERS, ...genHeaders(gen) }, responseStream(gen, body, plan), (message) =>
              sseEvent('error', { type: 'error', code: 'server_error', message, param: null, sequence_number: 0 }),
            )
          : json(200, responseObject(metaOf(gen), body, answerOf(plan, await gen.collect())), genHeaders(gen)),
      );
    },
  }),
];

import { z } from 'zod';
import { resolveServable } from '../../../core/models';
import { modelRunErrors } from '../errorDocs';
import type { Generation, GenerationResult } from '../../../core/decoder/service';
import type { DecoderMessage, GenerationUsage, PromptPart } from '../../../core/decoder/types';
import { BadRequestError } from '../../../core/errors';
import { json, route } from '../../types';
import { requireTextOnly, genHeaders, streamResponse, sseEvent, SSE_HEADERS, OpenAiErrorBody } from './common';
import { defaultMaxTokens, generate, parseCacheControl, respondWith, withHints } from '../generation';
import { checkTools } from './openai';

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
  tools: z.array(z.unknown()).nullable().optional(),
  tool_choice: z.unknown().optional(),
  text: z
    .looseObject({ format: z.looseObject({ type: z.string() }).optional() })
    .nullable()
    .optional(),
  metadata: z.record(z.string(), z.string()).nullable().optional(),
  background: z.boolean().nullable().optional(),
});
type Body = z.output<typeof ResponsesBody>;

/** compat.md §5.5: input_tokens include cached ones; reads and writes in the details (both required). */
export function responsesUsage(u: GenerationUsage) {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cacheReadTokens, cache_write_tokens: u.cacheWriteTokens },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.promptTokens + u.completionTokens,
  };
}

const MARKABLE = new Set(['system', 'developer']);

/** Input items → decoder messages; markers on content blocks of system/developer messages (docs/reference/decisions.md#prompt-caching rule 5). */
export function responsesToPrompt(body: Body): DecoderMessage[] {
  const messages: DecoderMessage[] = [];
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
      messages.push({
        role: 'assistant',
        parts: [{ text: JSON.stringify({ tool_call: raw.name, arguments: raw.arguments }) }],
      });
      return;
    }
    if (type === 'function_call_output') {
      messages.push({
        role: 'tool',
        parts: [{ text: typeof raw.output === 'string' ? raw.output : JSON.stringify(raw.output) }],
      });
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

function responseObject(gen: Generation, body: Body, r: GenerationResult | undefined) {
  const msgId = `msg_${gen.inferenceId}`;
  const incomplete = r?.finishReason === 'length';
  return {
    id: `resp_${gen.inferenceId}`,
    object: 'response',
    created_at: gen.created,
    ...(r ? { completed_at: Math.floor(Date.now() / 1000) } : {}),
    status: !r ? 'in_progress' : incomplete ? 'incomplete' : 'completed',
    error: null,
    incomplete_details: incomplete ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: gen.model.requested,
    output: r
      ? [
          {
            id: msgId,
            type: 'message',
            role: 'assistant',
            status: incomplete ? 'incomplete' : 'completed',
            content: [{ type: 'output_text', text: r.text, annotations: [], logprobs: [] }],
          },
        ]
      : [],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: null,
    store: body.store ?? true,
    // Sampling is greedy unless a temperature is sent (small models answer better that way).
    temperature: body.temperature ?? 0,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: body.top_p ?? 1,
    truncation: 'disabled',
    metadata: body.metadata ?? {},
    usage: r ? responsesUsage(r.usage) : null,
    inference_id: gen.inferenceId,
  };
}

async function* responseStream(gen: Generation, body: Body): AsyncGenerator<string> {
  let seq = 0;
  const ev = (type: string, data: Record<string, unknown>) => sseEvent(type, { type, sequence_number: seq++, ...data });
  const itemId = `msg_${gen.inferenceId}`;
  const loc = { item_id: itemId, output_index: 0, content_index: 0 };
  yield ev('response.created', { response: responseObject(gen, body, undefined) });
  yield ev('response.in_progress', { response: responseObject(gen, body, undefined) });
  yield ev('response.output_item.added', {
    output_index: 0,
    item: { id: itemId, type: 'message', role: 'assistant', status: 'in_progress', content: [] },
  });
  yield ev('response.content_part.added', {
    ...loc,
    part: { type: 'output_text', text: '', annotations: [], logprobs: [] },
  });
  let r: GenerationResult;
  for (;;) {
    const next = await gen.stream.next();
    if (next.done) {
      r = next.value;
      break;
    }
    yield ev('response.output_text.delta', { ...loc, delta: next.value, logprobs: [] });
  }
  const final = responseObject(gen, body, r);
  const part = { type: 'output_text', text: r.text, annotations: [], logprobs: [] };
  yield ev('response.output_text.done', { ...loc, text: r.text, logprobs: [] });
  yield ev('response.content_part.done', { ...loc, part });
  yield ev('response.output_item.done', { output_index: 0, item: final.output[0] });
  yield ev(final.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: final });
}

export const responsesRoutes = [
  route({
    method: 'POST',
    path: '/v1/responses',
    tag: 'compatible',
    summary: 'OpenAI-compatible Responses API (stateless: store only feeds inference history; no previous_response_id)',
    errorFormat: 'openai',
    body: ResponsesBody,
    responses: {
      200: { description: 'A response object, or a named-event SSE stream' },
      ...modelRunErrors,
      400: { description: 'Invalid request (OpenAI error envelope)', schema: OpenAiErrorBody },
    },
    handler: async ({ svc, principal, body, req }) => {
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
      const format = body.text?.format?.type;
      if (format && format !== 'text')
        throw withHints(
          new BadRequestError(`text.format '${format}' is not supported by '${body.model}'`),
          'text.format',
          'unsupported_parameter',
        );
      const { runtime, model: resolved } = await resolveServable(svc, principal, body.model, { want: 'decoder' });
      checkTools(resolved, body.tools, body.tool_choice);
      const gen = await generate({
        svc,
        runtime,
        principal,
        model: resolved,
        prompt: { kind: 'chat', messages: responsesToPrompt(body) },
        strictMarkers: false,
        params: {
          maxTokens: body.max_output_tokens ?? defaultMaxTokens(resolved),
          temperature: body.temperature ?? undefined,
          topP: body.top_p ?? undefined,
          stop: [],
        },
        endpoint: '/v1/responses',
        limitClass: 'compat',
        store: body.store ?? true,
        recordInput: { input: body.input, ...(body.instructions ? { instructions: body.instructions } : {}) },
        signal: req.signal,
      });
      return respondWith(gen, async () =>
        body.stream
          ? streamResponse(gen, { ...SSE_HEADERS, ...genHeaders(gen) }, responseStream(gen, body), (message) =>
              sseEvent('error', { type: 'error', code: 'server_error', message, param: null, sequence_number: 0 }),
            )
          : json(200, responseObject(gen, body, await gen.collect()), genHeaders(gen)),
      );
    },
  }),
];

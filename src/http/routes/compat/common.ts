import { z } from 'zod';
import type { Principal, Services } from '../../../core/context';
import { checkTexts, runExtraction, SchemaBody, toEncoderSchema } from '../../../core/extraction/api';
import { glinerToJsonObject, type GlinerMapping } from '../../../core/extraction/jsonSchemaMapping';
import { resolveServable, type ServableDecoder, type ServableEncoder } from '../../../core/models';
import type { Generation } from '../../../core/decoder/service';
import { BadRequestError } from '../../../core/errors';
import type { ApiRequest, ApiResponse } from '../../types';
import { parseWith } from '../../validation';
import { withHints } from '../generation';

interface CompatExtraction {
  svc: Services;
  principal: Principal;
  servable: ServableEncoder;
  text: string;
  threshold?: number | undefined;
  store: boolean;
  endpoint: string;
}

/**
 * Extraction through the compatible routes (`schema` extra field on chat/messages,
 * docs/reference/decisions.md#compatible-extras): the encoder runs the schema on the text; the result object is sent
 * back as JSON content.
 */
export async function extractThroughCompat(
  args: CompatExtraction & { schema: Record<string, unknown> },
): Promise<{ inference_id: string; result: unknown; input_tokens: number; windows: number }> {
  const out = await runCompatExtraction(args, args.schema, { schema: args.schema });
  return {
    inference_id: out.inference_id,
    result: out.result,
    input_tokens: out.usage.input_tokens,
    windows: out.windows as number,
  };
}

/**
 * A JSON schema answered by an encoder (structured outputs, core/extraction/jsonSchemaMapping.ts):
 * the same extraction as the `schema` extra, its result turned into the object the schema describes.
 */
export async function extractJsonThroughCompat(
  args: CompatExtraction & { mapping: GlinerMapping; jsonSchema: unknown },
): Promise<{ object: Record<string, unknown>; inferenceId: string; windows: number; usage: { input_tokens: number } }> {
  const out = await runCompatExtraction(args, args.mapping.schema, { json_schema: args.jsonSchema });
  return {
    object: glinerToJsonObject(out.result, args.mapping),
    inferenceId: out.inference_id,
    windows: out.windows as number,
    usage: out.usage,
  };
}

function runCompatExtraction(args: CompatExtraction, schema: Record<string, unknown>, asked: Record<string, unknown>) {
  const { svc, principal, servable, text, threshold, store, endpoint } = args;
  return runExtraction({
    svc,
    principal,
    servable,
    texts: checkTexts(text, ['body', 'messages']),
    batch: false,
    schema: toEncoderSchema(parseWith(SchemaBody, schema, 'schema'), ['body', 'schema']),
    rawInput: { text, ...asked, ...(threshold !== undefined ? { threshold } : {}) },
    threshold,
    store,
    endpoint,
    limitClass: 'inference',
  });
}

/**
 * The model of a chat/messages request, resolved once (core/models.ts resolveServable): with a `schema` field an
 * encoder extracts, without one a decoder generates; the other kind is a 400 with the vendor hints.
 */
export function resolveCompatModel(
  svc: Services,
  principal: Principal,
  model: string,
  hasSchema: boolean,
): Promise<ServableEncoder | ServableDecoder> {
  return hasSchema
    ? resolveServable(svc, principal, model, { want: 'encoder' })
    : resolveServable(svc, principal, model, { want: 'decoder' });
}

export function normalizeStop(stop: string | string[] | null | undefined): string[] {
  const list = stop === null || stop === undefined ? [] : Array.isArray(stop) ? stop : [stop];
  if (list.length > 4)
    throw withHints(new BadRequestError('stop accepts at most 4 sequences'), 'stop', 'invalid_value');
  return list.filter((s) => s.length > 0);
}

export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache',
  'x-accel-buffering': 'no',
  'content-encoding': 'identity',
};

export const sseData = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
export const sseEvent = (event: string, obj: unknown): string => `event: ${event}\ndata: ${JSON.stringify(obj)}\n\n`;

export function requireTextOnly(type: string, where: string): never {
  throw withHints(
    new BadRequestError(`${where}: content of type '${type}' is not supported by this text-only model`),
    where,
    'unsupported_content_type',
  );
}

export const signalOf = (req: ApiRequest): AbortSignal | undefined => req.signal;

/** `x-inference-id`, plus how many prompt tokens the engine really reused from its KV cache. */
export function genHeaders(gen: {
  inferenceId: string;
  start: { engineReusedTokens: number };
}): Record<string, string> {
  return { 'x-inference-id': gen.inferenceId, 'x-sift-prefix-reused-tokens': String(gen.start.engineReusedTokens) };
}

/** Error bodies of the compatible routes, for the API document. */
const FieldErrors = z.array(
  z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() }),
);
export const OpenAiErrorBody = z
  .object({
    error: z.object({
      message: z.string(),
      type: z.string(),
      param: z.string().nullable(),
      code: z.string().nullable(),
    }),
    detail: z.string(),
    errors: FieldErrors.optional(),
  })
  .meta({ id: 'OpenAiError' });
export const AnthropicErrorBody = z
  .object({
    type: z.literal('error'),
    error: z.object({ type: z.string(), message: z.string() }),
    request_id: z.string(),
    detail: z.string(),
    errors: FieldErrors.optional(),
  })
  .meta({ id: 'AnthropicError' });

/**
 * After a 200 and the first SSE bytes, a failure can only be reported in-stream: the vendor's error
 * event (which makes both SDKs throw an APIError) and then the end of the stream.
 */
export async function* guardStream(
  events: AsyncGenerator<string>,
  onError: (message: string) => string,
): AsyncGenerator<string> {
  try {
    yield* events;
  } catch (err) {
    yield onError(err instanceof Error ? err.message : 'generation failed');
  }
}
export const openAiStreamError = (message: string) =>
  sseData({ error: { message, type: 'server_error', param: null, code: null } });
export const anthropicStreamError = (message: string) =>
  sseEvent('error', { type: 'error', error: { type: 'api_error', message } });

/**
 * A 200 SSE response of `events` (the route's rendering of `gen.stream`, failures reported
 * in-stream). Its iterator closes the generation when it ends, fails, or is stopped by `return()`
 * — also before its first `next()`: a client that leaves before the first chunk never starts the
 * route's generator, whose own `finally` would then never run.
 */
export function streamResponse(
  gen: Generation,
  headers: Record<string, string>,
  events: AsyncGenerator<string>,
  onError: (message: string) => string,
): ApiResponse {
  return { status: 200, headers, stream: closingStream(guardStream(events, onError), gen) };
}

function closingStream(source: AsyncGenerator<string>, gen: Generation): AsyncIterableIterator<string> {
  const iterator: AsyncIterableIterator<string> = {
    async next() {
      let step: IteratorResult<string>;
      try {
        step = await source.next();
      } catch (err) {
        await gen.close();
        throw err;
      }
      if (step.done) await gen.close();
      return step;
    },
    async return() {
      try {
        await source.return(undefined);
      } finally {
        await gen.close();
      }
      return { done: true, value: undefined };
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

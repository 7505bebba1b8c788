import { z } from 'zod';
import { decoderRuntime } from '../../../core/decoder/service';
import type { Principal, Services } from '../../../core/context';
import { checkTexts, runExtraction, SchemaBody, toEncoderSchema } from '../../../core/extraction/api';
import { resolveModel, type ResolvedEncoder, type ResolvedModel } from '../../../core/models';
import { MAX_CACHE_MARKERS, DEFAULT_CACHE_TTL_SECONDS, parseTtl } from '../../../core/decoder/promptCache';
import {
  startGeneration,
  type DecoderRuntime,
  type Generation,
  type GenerationInput,
} from '../../../core/decoder/service';
import type { CacheMarker, DecoderMessage, DecoderPrompt } from '../../../core/decoder/types';
import { BadRequestError, ServiceUnavailableError, type ApiError } from '../../../core/errors';
import type { ApiRequest, ApiResponse } from '../../types';
import { parseWith } from '../../validation';

export type Decoder = Extract<ResolvedModel, { type: 'decoder' }>;

/**
 * Extraction through the compatible routes (`schema` extra field on chat/messages,
 * docs/reference/decisions.md#compatible-extras): the encoder runs the schema on the text; the result object is sent
 * back as JSON content.
 */
export async function extractThroughCompat(args: {
  svc: Services;
  principal: Principal;
  model: ResolvedEncoder;
  text: string;
  schema: Record<string, unknown>;
  threshold?: number | undefined;
  store: boolean;
  endpoint: string;
}): Promise<{ inference_id: string; result: unknown; input_tokens: number }> {
  const { svc, principal, model, text, schema, threshold, store, endpoint } = args;
  const parsed = toEncoderSchema(parseWith(SchemaBody, schema, 'schema'), ['body', 'schema']);
  const out = await runExtraction({
    svc,
    principal,
    model,
    texts: checkTexts(text, ['body', 'messages']),
    batch: false,
    schema: parsed,
    rawInput: { text, schema, ...(threshold !== undefined ? { threshold } : {}) },
    threshold,
    store,
    endpoint,
    limitClass: 'inference',
  });
  return { inference_id: out.inference_id, result: out.result, input_tokens: out.usage.input_tokens };
}

export function withHints<E extends ApiError>(err: E, param?: string, code?: string): E {
  if (param) err.param = param;
  if (code) err.code = code;
  return err;
}

/** Resolves `model` once for a generation route; encoders need `schema` (and the encoder runtime). */
export async function resolveForRoute(
  svc: Services,
  principal: Principal,
  model: string,
  hasSchema: boolean,
): Promise<{ runtime: DecoderRuntime; resolved: ResolvedModel }> {
  const runtime = decoderRuntime(svc);
  let resolved: ResolvedModel;
  try {
    resolved = await resolveModel(svc, principal, model);
  } catch (err) {
    if ((err as ApiError).status === 404) throw withHints(err as ApiError, 'model', 'model_not_found');
    throw err;
  }
  if (resolved.type === 'encoder') {
    if (!hasSchema) {
      throw withHints(
        new BadRequestError(
          `'${model}' is an encoder (extraction) model: send a 'schema' field to extract, or use a decoder model to generate text`,
        ),
        'model',
        'model_not_generative',
      );
    }
    if (!svc.encoder) throw new ServiceUnavailableError('The encoder runtime is not available on this deployment');
  } else if (hasSchema) {
    throw withHints(
      new BadRequestError(`'schema' extraction needs an encoder model; '${model}' is a decoder`),
      'schema',
      'invalid_value',
    );
  }
  return { runtime, resolved };
}

/** `{type:"ephemeral", ttl?}` → marker; anything else is a clear 400. */
export function parseCacheControl(value: unknown, where: string): CacheMarker {
  if (typeof value !== 'object' || value === null || (value as { type?: unknown }).type !== 'ephemeral') {
    throw withHints(
      new BadRequestError(`${where}.cache_control must be {"type": "ephemeral", "ttl"?: "5m" | "1h" | "<n>s|m|h"}`),
      where,
      'invalid_value',
    );
  }
  const ttl = (value as { ttl?: unknown }).ttl;
  if (ttl === undefined || ttl === null) return { ttlSeconds: DEFAULT_CACHE_TTL_SECONDS };
  const seconds = typeof ttl === 'string' ? parseTtl(ttl) : undefined;
  if (seconds === undefined) {
    throw withHints(
      new BadRequestError(
        `${where}.cache_control.ttl '${String(ttl)}' is not a duration like "5m", "1h" or "300s" (at most 24h)`,
      ),
      where,
      'invalid_value',
    );
  }
  return { ttlSeconds: seconds };
}

/**
 * docs/reference/decisions.md#prompt-caching applied to a prompt's markers: GPT-family models reject markers,
 * automatically-caching backends ignore them, otherwise at most 4 are applied (`strict`: more is a
 * 400, as on Anthropic's API; otherwise the extra ones are ignored, as docs/reference/decisions.md#prompt-caching rule 7 says).
 */
export function applyMarkerRules(
  prompt: DecoderPrompt,
  model: Decoder,
  runtime: DecoderRuntime,
  strict: boolean,
): DecoderPrompt {
  if (prompt.kind === 'text') return prompt;
  const count = prompt.messages.reduce((n, m) => n + m.parts.filter((p) => p.cache).length, 0);
  if (count === 0) return prompt;
  if (model.profile.family === 'gpt-4' || model.profile.family === 'gpt-5') {
    throw withHints(
      new BadRequestError(
        `'${model.requested}' caches prompts automatically and rejects explicit cache markers; remove cache_control`,
      ),
      'messages',
      'unsupported_parameter',
    );
  }
  if (strict && count > MAX_CACHE_MARKERS) {
    throw withHints(
      new BadRequestError(
        `A maximum of ${MAX_CACHE_MARKERS} blocks with cache_control may be provided; found ${count}`,
      ),
      'messages',
      'too_many_cache_markers',
    );
  }
  let left = runtime.backend.cachesAutomatically ? 0 : MAX_CACHE_MARKERS;
  const messages: DecoderMessage[] = prompt.messages.map((m) => ({
    role: m.role,
    parts: m.parts.map((p) => {
      if (!p.cache) return p;
      if (left > 0) {
        left--;
        return p;
      }
      return { text: p.text };
    }),
  }));
  return { kind: 'chat', messages };
}

/**
 * The generation call of every decoder route (native `POST /inference` and the compatible ones):
 * the prompt-caching marker rules on the prompt, then the generation (spend check, billing, storage).
 */
export function generate(input: GenerationInput & { strictMarkers: boolean }): Promise<Generation> {
  const { strictMarkers, ...rest } = input;
  return startGeneration({
    ...rest,
    prompt: applyMarkerRules(input.prompt, input.model, input.runtime, strictMarkers),
  });
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

/** Default `max_tokens` when a route makes it optional: what is left of the context, capped by the model's limit. */
export function defaultMaxTokens(model: Decoder): number {
  return Math.min(model.profile.maxOutputTokens, 1024);
}

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
 * The response of a generation route, built so that the generation always ends — slot freed, usage
 * billed once, inference stored — whatever happens after `generate` returned: a failure while
 * building the response closes it before the error answers; a streamed response owns it.
 */
export async function respondWith(
  gen: Generation,
  build: () => ApiResponse | Promise<ApiResponse>,
): Promise<ApiResponse> {
  let response: ApiResponse;
  try {
    response = await build();
  } catch (err) {
    // A failure to close (billing or storage) replaces this error: it is the one that loses data.
    await gen.close();
    throw err;
  }
  // A response without a stream is complete, and so is its generation (a no-op after collect()).
  if (!response.stream) await gen.close();
  return response;
}

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

/**
 * The generation helpers of every decoder route, native (`POST /inference` with `task: "generate"`, textGeneration.ts)
 * and compatible (compat/): cache markers, the generation call, the response that always ends its generation. The
 * model comes from the one resolver (core/models.ts resolveServable).
 */
import { MAX_CACHE_MARKERS, DEFAULT_CACHE_TTL_SECONDS, parseTtl } from '../../core/decoder/promptCache';
import {
  startGeneration,
  type DecoderRuntime,
  type Generation,
  type GenerationInput,
} from '../../core/decoder/service';
import type { CacheMarker, DecoderMessage, DecoderPrompt, OutputConstraint } from '../../core/decoder/types';
import { BadRequestError, type ApiError } from '../../core/errors';
import type { ResolvedDecoder } from '../../core/models';
import type { ApiResponse, HandlerContext } from '../types';

export type Decoder = ResolvedDecoder;

export function withHints<E extends ApiError>(err: E, param?: string, code?: string): E {
  if (param) err.param = param;
  if (code) err.code = code;
  return err;
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

/**
 * The constraint a generation runs with. Test-only: on a server started with `SIFT_TEST_SWITCHES=1`
 * (`svc.config.testSwitches`), the header `x-sift-test-unconstrained: 1` drops it (a tools prompt
 * stays), so each client test can show that it fails without constrained decoding.
 */
export function effectiveConstraint(
  ctx: Pick<HandlerContext<unknown, unknown, unknown>, 'svc' | 'req'>,
  constraint: OutputConstraint | undefined,
): OutputConstraint | undefined {
  if (ctx.svc.config.testSwitches && ctx.req.headers['x-sift-test-unconstrained'] === '1') return undefined;
  return constraint;
}

/** Default `max_tokens` when a route makes it optional: what is left of the context, capped by the model's limit. */
export function defaultMaxTokens(model: Decoder): number {
  return Math.min(model.profile.maxOutputTokens, 1024);
}

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

import { z } from 'zod';
import { usageFields } from '../../core/decoder/service';
import type { DecoderMessage, PromptPart } from '../../core/decoder/types';
import { BadRequestError, ValidationError } from '../../core/errors';
import { json, type ApiResponse, type HandlerContext } from '../types';
import { resolveServable } from '../../core/models';
import { defaultMaxTokens, generate, parseCacheControl, respondWith } from './generation';

const TextBlock = z.strictObject({ type: z.literal('text'), text: z.string(), cache_control: z.unknown().optional() });

/** Native decoder generation (docs/reference/decisions.md#inference-request, `task: "generate"`; #decoder-response). */
export const GenerateInferenceBody = z.strictObject({
  model_id: z.string().min(1),
  task: z.literal('generate'),
  messages: z
    .array(
      z.strictObject({
        role: z.enum(['system', 'user', 'assistant']),
        content: z.union([z.string(), z.array(TextBlock).min(1)]),
      }),
    )
    .min(1),
  store: z.boolean().optional(),
  max_tokens: z.number().int().min(1).optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  stop: z.array(z.string().min(1)).max(4).optional(),
});
export type GenerateInferenceInput = z.output<typeof GenerateInferenceBody>;

/** Markers go on blocks of a message `content` array (docs/reference/decisions.md#prompt-caching rules 5, 6); ≤4 applied, extras ignored. */
function toPrompt(body: GenerateInferenceInput): DecoderMessage[] {
  return body.messages.map((m, i) => ({
    role: m.role,
    parts:
      typeof m.content === 'string'
        ? [{ text: m.content }]
        : m.content.map((b, j): PromptPart => {
            if (b.cache_control === undefined) return { text: b.text };
            const loc = ['body', 'messages', i, 'content', j, 'cache_control'];
            try {
              const cache = parseCacheControl(b.cache_control, `messages.${i}.content.${j}`);
              if (!b.text) throw new BadRequestError('an empty text block cannot carry a cache marker');
              return { text: b.text, cache };
            } catch (err) {
              throw ValidationError.field(loc, (err as Error).message);
            }
          }),
  }));
}

/**
 * `POST /inference` with `task: "generate"`: the decoder branch of the native inference route
 * (routes/extraction.ts owns the route); the model comes from the one resolver (core/models.ts resolveServable).
 * Response: `{inference_id, model_id, type: "decoder", completion, finish_reason, stop_sequence,
 * latency_ms, usage: {prompt_tokens (non-cached), cache_read_tokens, cache_write_tokens,
 * completion_tokens, total_tokens}}`.
 */
export async function generateInference(
  ctx: Omit<HandlerContext<unknown, unknown, unknown>, 'body'> & { body: GenerateInferenceInput },
): Promise<ApiResponse> {
  const { svc, principal, body, req } = ctx;
  const started = performance.now();
  const { runtime, model: resolved } = await resolveServable(svc, principal, body.model_id, {
    want: 'decoder',
    field: ['body', 'model_id'],
  });
  const gen = await generate({
    svc,
    runtime,
    principal,
    model: resolved,
    prompt: { kind: 'chat', messages: toPrompt(body) },
    strictMarkers: false,
    params: {
      maxTokens: body.max_tokens ?? defaultMaxTokens(resolved),
      temperature: body.temperature,
      topP: body.top_p,
      stop: body.stop ?? [],
    },
    endpoint: '/inference',
    limitClass: 'inference',
    store: body.store ?? true,
    recordInput: { messages: body.messages },
    signal: req.signal,
  });
  return respondWith(gen, async () => {
    const r = await gen.collect();
    return json(200, {
      inference_id: gen.inferenceId,
      model_id: body.model_id,
      type: 'decoder',
      completion: r.text,
      finish_reason: r.finishReason === 'stop_sequence' ? 'stop' : r.finishReason,
      stop_sequence: r.stopSequence,
      latency_ms: Math.round(performance.now() - started),
      usage: usageFields(r.usage),
    });
  });
}

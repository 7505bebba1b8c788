import { z } from 'zod';
import { startGeneration, usageFields } from '../../core/decoder/service';
import type { DecoderMessage, PromptPart } from '../../core/decoder/types';
import { EncoderInferenceBody } from '../../core/encoder/api';
import { BadRequestError, ServiceUnavailableError, ValidationError } from '../../core/errors';
import { modelRunErrors } from './errorDocs';
import { json, route, type ApiResponse, type HandlerContext } from '../types';
import { documentedAs, nonBlank, parseWith } from '../validation';
import { applyMarkerRules, defaultMaxTokens, parseCacheControl, resolveForRoute } from './compat/common';

const TextBlock = z.strictObject({ type: z.literal('text'), text: z.string(), cache_control: z.unknown().optional() });

/** Native decoder generation (SPEC "Native inference request", `task: "generate"`; DESIGN §3). */
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

/** Markers go on blocks of a message `content` array (SPEC rule 5/6); ≤4 applied, extras ignored. */
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
 * `POST /inference` with `task: "generate"`: the decoder branch of the native inference route.
 * Response: `{inference_id, model_id, type: "decoder", completion, finish_reason, stop_sequence,
 * latency_ms, usage: {prompt_tokens (non-cached), cache_read_tokens, cache_write_tokens,
 * completion_tokens, total_tokens}}`.
 */
export async function generateInference(ctx: Omit<HandlerContext<unknown, unknown, unknown>, 'body'> & { body: GenerateInferenceInput }): Promise<ApiResponse> {
  const { svc, principal, body, req } = ctx;
  const started = performance.now();
  const { runtime, resolved } = await resolveForRoute(svc, principal, body.model_id, false).catch((err) => {
    if (err instanceof BadRequestError) throw ValidationError.field(['body', 'model_id'], err.message);
    throw err;
  });
  if (resolved.type !== 'decoder') throw ValidationError.field(['body', 'model_id'], 'not a decoder model');
  const prompt = applyMarkerRules({ kind: 'chat', messages: toPrompt(body) }, resolved, runtime, false);
  const gen = await startGeneration({
    svc,
    runtime,
    principal,
    model: resolved,
    prompt,
    params: { maxTokens: body.max_tokens ?? defaultMaxTokens(resolved), temperature: body.temperature, topP: body.top_p, stop: body.stop ?? [] },
    endpoint: '/inference',
    limitClass: 'inference',
    store: body.store ?? true,
    recordInput: { messages: body.messages },
    signal: req.signal,
  });
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
}

/**
 * Extension point for the encoder branch of `POST /inference` (owned by the encoder runtime): it
 * registers a handler for every body whose `task` is not "generate".
 */
export type EncoderInferenceHandler = (ctx: HandlerContext<Record<string, unknown>, unknown, unknown>) => Promise<ApiResponse>;
let encoderInference: EncoderInferenceHandler | undefined;
export function registerEncoderInference(handler: EncoderInferenceHandler | undefined): void {
  encoderInference = handler;
}

/** Routes on `task`; documented as the two bodies the branches accept (encoder: no task, texts not blank). */
const InferenceRouterBody = z.looseObject({ model_id: z.string().min(1), task: z.string().optional() });
const documentedText = nonBlank('text must not be empty');
const EncoderBranch: z.ZodType = EncoderInferenceBody.omit({ task: true }).extend({ text: z.union([documentedText, z.array(documentedText).min(1)]) });
documentedAs.set(InferenceRouterBody, z.union([EncoderBranch, GenerateInferenceBody]));

export const inferenceRoutes = [
  route({
    method: 'POST',
    path: '/inference',
    tag: 'inference',
    summary: 'Native inference: encoder extraction (`schema`) or decoder generation (`task: "generate"`, `messages`)',
    // Each branch validates strictly; this only routes on `task`.
    body: InferenceRouterBody,
    responses: {
      200: { description: 'Per-head results (encoder) or `{completion, usage}` (decoder), with inference_id' },
      ...modelRunErrors,
    },
    handler: async (ctx) => {
      if (ctx.body.task === 'generate') return generateInference({ ...ctx, body: parseWith(GenerateInferenceBody, ctx.body, 'body') });
      if (encoderInference) return encoderInference(ctx as HandlerContext<Record<string, unknown>, unknown, unknown>);
      if (ctx.body.task !== undefined) throw ValidationError.field(['body', 'task'], `unknown task '${ctx.body.task}'; the decoder task is "generate"`);
      throw new ServiceUnavailableError('Encoder extraction is not available on this deployment; send task: "generate" with messages for a decoder model');
    },
  }),
];

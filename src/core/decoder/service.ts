import type { Principal, Services } from '../context';
import type { DecoderRuntime } from './runtime';
import { BadRequestError } from '../errors';
import { newInferenceId, storeInference } from '../inferences';
import type { LimitClass } from '../rateLimits';
import { checkSpendAllowance, recordBilledUsage } from '../usage';
import type { ResolvedModel } from '../models';
import { CACHE_MULTIPLIERS } from './models';
import type { DecoderPrompt, FinishReason, GenerationEvent, GenerationUsage, SamplingParams } from './types';

/** A backend plus the prompt-cache ledger that goes with it (one per process). */
export type { DecoderRuntime } from './runtime';

export type StartUsage = Extract<GenerationEvent, { type: 'start' }>['usage'];

export interface GenerationResult {
  text: string;
  finishReason: FinishReason;
  stopSequence: string | null;
  usage: GenerationUsage;
}

export interface Generation {
  inferenceId: string;
  /** Unix seconds. */
  created: number;
  model: Extract<ResolvedModel, { type: 'decoder' }>;
  start: StartUsage;
  /** Text pieces as they come; the return value is the final result. Iterate once. */
  stream: AsyncGenerator<string, GenerationResult, void>;
  /** Runs the stream to the end and returns the result (non-streaming routes). */
  collect(): Promise<GenerationResult>;
}

export interface GenerationInput {
  svc: Services;
  runtime: DecoderRuntime;
  principal: Principal;
  model: Extract<ResolvedModel, { type: 'decoder' }>;
  prompt: DecoderPrompt;
  params: SamplingParams;
  /** For the inference record (`/v1/chat/completions`, `/inference`, …) and the usage counter. */
  endpoint: string;
  limitClass: LimitClass;
  store: boolean;
  /** What is stored as the inference's input (the caller's messages as sent). */
  recordInput: Record<string, unknown>;
  signal?: AbortSignal | undefined;
}

/** Cost in millionths of a USD: uncached input at the input price, cache reads/writes at the SPEC multipliers. */
export function costMicros(model: Extract<ResolvedModel, { type: 'decoder' }>, u: GenerationUsage): number {
  const m = CACHE_MULTIPLIERS[model.profile.family];
  const uncached = Math.max(0, u.promptTokens - u.cacheReadTokens - u.cacheWriteTokens);
  const usd =
    (model.profile.inputPrice * (uncached + u.cacheReadTokens * m.read + u.cacheWriteTokens * m.write) + model.profile.outputPrice * u.completionTokens) / 1e6;
  return Math.round(usd * 1e6);
}

/**
 * One generation through the decoder port, shared by every route: checks the spend allowance, runs
 * prefill (so every caller error surfaces before a stream starts), then streams. Usage is billed and
 * the inference stored (unless `store:false`) when the stream ends — also when the client went away
 * and the generation was cancelled.
 */
export async function startGeneration(input: GenerationInput): Promise<Generation> {
  const { svc, runtime, principal, model, prompt, params } = input;
  if (params.maxTokens < 0 || !Number.isInteger(params.maxTokens)) throw new BadRequestError('max_tokens must be a non-negative integer');
  if (params.maxTokens > model.profile.maxOutputTokens) {
    throw new BadRequestError(`max_tokens is ${params.maxTokens}, above this model's limit of ${model.profile.maxOutputTokens}`);
  }
  await checkSpendAllowance(svc, principal.team_id);
  if (model.adapter) await runtime.backend.ensureAdapter!(model.adapter, svc.blobs);
  const started = performance.now();
  const inferenceId = newInferenceId();
  const created = Math.floor(svc.now().getTime() / 1000);
  const scope = principal.team_id;
  const events = runtime.backend.generate(
    {
      model: model.backendModel,
      prompt,
      params,
      cache: { plan: (tokenized) => runtime.cache.plan(scope, model.backendModel, tokenized) },
    },
    input.signal,
  )[Symbol.asyncIterator]();
  const first = await events.next();
  if (first.done || first.value.type !== 'start') throw new Error('decoder backend ended before starting');
  const start = first.value.usage;

  let finished = false;
  const finish = async (text: string, done: Extract<GenerationEvent, { type: 'done' }>): Promise<GenerationResult> => {
    finished = true;
    const u = done.usage;
    const result: GenerationResult = { text, finishReason: done.finishReason, stopSequence: done.stopSequence, usage: u };
    await recordBilledUsage(svc, principal.team_id, input.limitClass, {
      inference_id: inferenceId,
      endpoint: input.endpoint,
      model: model.requested,
      base_model: model.baseModel,
      input_tokens: Math.max(0, u.promptTokens - u.cacheReadTokens - u.cacheWriteTokens),
      output_tokens: u.completionTokens,
      cache_read_tokens: u.cacheReadTokens,
      cache_write_tokens: u.cacheWriteTokens,
      cost_usd_micros: costMicros(model, u),
    });
    await storeInference(
      svc,
      principal.team_id,
      {
        inference_id: inferenceId,
        model_id: model.requested,
        type: 'decoder',
        tasks: ['generate'],
        project_id: model.projectId,
        training_job_id: model.trainingJobId,
        endpoint: input.endpoint,
        input: input.recordInput,
        output: { completion: text, finish_reason: done.finishReason, stop_sequence: done.stopSequence },
        usage: usageFields(u),
        latency_ms: Math.round(performance.now() - started),
      },
      input.store,
    );
    return result;
  };

  async function* stream(): AsyncGenerator<string, GenerationResult, void> {
    let text = '';
    let done: Extract<GenerationEvent, { type: 'done' }> | undefined;
    try {
      for (;;) {
        const next = await events.next();
        if (next.done) break;
        const ev = next.value;
        if (ev.type === 'text') {
          text += ev.text;
          yield ev.text;
        } else if (ev.type === 'done') done = ev;
      }
    } finally {
      // The consumer stopped early (client gone): let the backend see the abort and report usage.
      if (!done) {
        for (;;) {
          const next = await events.next().catch(() => ({ done: true as const, value: undefined }));
          if (next.done) break;
          if (next.value.type === 'done') done = next.value;
        }
      }
      if (!finished && done) await finish(text, done);
    }
    if (!done) throw new Error('decoder backend ended without a result');
    return { text, finishReason: done.finishReason, stopSequence: done.stopSequence, usage: done.usage };
  }

  const gen = stream();
  return {
    inferenceId,
    created,
    model,
    start,
    stream: gen,
    async collect() {
      for (;;) {
        const next = await gen.next();
        if (next.done) return next.value;
      }
    },
  };
}

/** SPEC "Token usage fields" (native shape): prompt_tokens are the non-cached input tokens. */
export function usageFields(u: GenerationUsage) {
  const prompt = Math.max(0, u.promptTokens - u.cacheReadTokens - u.cacheWriteTokens);
  return {
    prompt_tokens: prompt,
    cache_read_tokens: u.cacheReadTokens,
    cache_write_tokens: u.cacheWriteTokens,
    completion_tokens: u.completionTokens,
    total_tokens: prompt + u.cacheReadTokens + u.cacheWriteTokens + u.completionTokens,
  };
}

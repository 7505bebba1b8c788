import type { Principal, Services } from '../context';
import type { DecoderRuntime } from './runtime';
import { BadRequestError } from '../errors';
import { newInferenceId, storeInference } from '../inferences';
import type { LimitClass } from '../rateLimits';
import { billedModel, checkSpendAllowance, recordBilledUsage } from '../usage';
import type { ResolvedModel } from '../models';
import { CACHE_MULTIPLIERS } from './models';
import type {
  DecoderPrompt,
  FinishReason,
  GenerationEvent,
  GenerationUsage,
  OutputConstraint,
  SamplingParams,
  TokenLogprob,
} from './types';

/** A backend plus the prompt-cache ledger that goes with it (one per process). */
export type { DecoderRuntime } from './runtime';

export type StartUsage = Extract<GenerationEvent, { type: 'start' }>['usage'];

export interface GenerationResult {
  text: string;
  finishReason: FinishReason;
  stopSequence: string | null;
  usage: GenerationUsage;
}

/**
 * The text of a generation, piece by piece; the return value is the final result. Iterate once.
 * `return()` ends the generation (`Generation.close`), also before the first `next()`: unlike a
 * plain async generator's, it works on a stream that never started.
 */
export interface GenerationStream extends AsyncIterator<string, GenerationResult, undefined> {
  next(): Promise<IteratorResult<string, GenerationResult>>;
  return(): Promise<IteratorReturnResult<GenerationResult>>;
  [Symbol.asyncIterator](): GenerationStream;
}

export interface Generation {
  inferenceId: string;
  /** Unix seconds. */
  created: number;
  model: Extract<ResolvedModel, { type: 'decoder' }>;
  start: StartUsage;
  stream: GenerationStream;
  /**
   * Per-token log-probabilities of the text so far, when `params.logprobs` asked for them: appended
   * as pieces arrive (after each piece, `logprobs.slice(seen)` are that piece's tokens).
   */
  logprobs: TokenLogprob[];
  /** Runs the stream to the end and returns the result (non-streaming routes). */
  collect(): Promise<GenerationResult>;
  /**
   * Ends the generation; idempotent. A backend still running is cancelled and read to its end (so
   * it frees its slot and reports what it computed), then the request is billed and the inference
   * stored (unless `store:false`) — exactly once, whoever gets here first: the stream's end, its
   * `return()`, or a route's error path. Resolves to the final result.
   */
  close(): Promise<GenerationResult>;
}

export interface GenerationInput {
  svc: Services;
  runtime: DecoderRuntime;
  principal: Principal;
  model: Extract<ResolvedModel, { type: 'decoder' }>;
  prompt: DecoderPrompt;
  params: SamplingParams;
  /** What the whole output must be (structured outputs, tool calls); absent = free text. */
  constraint?: OutputConstraint | undefined;
  /** For the inference record (`/v1/chat/completions`, `/inference`, …) and the usage counter. */
  endpoint: string;
  limitClass: LimitClass;
  store: boolean;
  /** What is stored as the inference's input (the caller's messages as sent). */
  recordInput: Record<string, unknown>;
  signal?: AbortSignal | undefined;
}

/** Cost in millionths of a USD: uncached input at the input price, cache reads/writes at the multipliers of docs/reference/decisions.md#cache-billing. */
export function costMicros(model: Extract<ResolvedModel, { type: 'decoder' }>, u: GenerationUsage): number {
  const m = CACHE_MULTIPLIERS[model.profile.family];
  const uncached = Math.max(0, u.promptTokens - u.cacheReadTokens - u.cacheWriteTokens);
  const usd =
    (model.profile.inputPrice * (uncached + u.cacheReadTokens * m.read + u.cacheWriteTokens * m.write) +
      model.profile.outputPrice * u.completionTokens) /
    1e6;
  return Math.round(usd * 1e6);
}

type DoneEvent = Extract<GenerationEvent, { type: 'done' }>;

/**
 * One generation through the decoder port, shared by every route: checks the spend allowance, runs
 * prefill (so every caller error surfaces before a stream starts), then streams. The generation
 * always ends through `close()` — at the stream's end, on `stream.return()`, or when a route fails
 * after this returns — which cancels a backend still running, bills what was computed (a prefill
 * whose caller went away included) and stores the inference, once.
 */
export async function startGeneration(input: GenerationInput): Promise<Generation> {
  const { svc, runtime, principal, model, prompt, params } = input;
  if (params.maxTokens < 0 || !Number.isInteger(params.maxTokens))
    throw new BadRequestError('max_tokens must be a non-negative integer');
  if (params.maxTokens > model.profile.maxOutputTokens) {
    throw new BadRequestError(
      `max_tokens is ${params.maxTokens}, above this model's limit of ${model.profile.maxOutputTokens}`,
    );
  }
  if (
    params.logprobs !== undefined &&
    (!Number.isInteger(params.logprobs) || params.logprobs < 0 || params.logprobs > 20)
  )
    throw new BadRequestError(`logprobs asks for ${params.logprobs} alternatives; 0 to 20 are available`, {
      param: 'logprobs',
    });
  if (params.logprobs !== undefined && !runtime.backend.supportsLogprobs)
    throw new BadRequestError(`logprobs are not available from the ${runtime.backend.name} backend`, {
      param: 'logprobs',
    });
  if (input.constraint) checkConstrainable(prompt, params);
  await checkSpendAllowance(svc, principal.team_id);
  if (model.adapter) await runtime.backend.ensureAdapter!(model.adapter, svc.blobs);
  const started = performance.now();
  const inferenceId = newInferenceId();
  const created = Math.floor(svc.now().getTime() / 1000);
  const scope = principal.team_id;
  // The backend stops on the caller's signal, or on ours when the generation is closed early.
  const cancel = new AbortController();
  const signal = input.signal ? AbortSignal.any([input.signal, cancel.signal]) : cancel.signal;
  const events = runtime.backend
    .generate(
      {
        model: model.backendModel,
        scope,
        prompt,
        params,
        ...(input.constraint ? { constraint: input.constraint } : {}),
        cache: { plan: (tokenized) => runtime.cache.plan(scope, model.backendModel, tokenized) },
      },
      signal,
    )
    [Symbol.asyncIterator]();
  // A backend that fails before `start` has freed what it held and computed nothing billable.
  const first = await events.next();
  if (first.done || first.value.type !== 'start') {
    cancel.abort();
    await events.return?.(undefined);
    throw new Error('decoder backend ended before starting');
  }
  const start = first.value.usage;

  let text = '';
  const logprobs: TokenLogprob[] = [];
  /** Text events received, delivered or not: a lower bound on the tokens of a failed generation. */
  let pieces = 0;
  let done: DoneEvent | undefined;
  /** The backend's iteration is over (ended or failed): nothing more to read from it. */
  let ended = false;
  let failed = false;
  let step: Promise<unknown> | undefined;
  let closing: Promise<GenerationResult> | undefined;

  const bill = async (result: GenerationResult): Promise<void> => {
    const u = result.usage;
    await recordBilledUsage(svc, principal.team_id, input.limitClass, {
      inference_id: inferenceId,
      endpoint: input.endpoint,
      ...billedModel(model),
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
        output: {
          completion: result.text,
          finish_reason: result.finishReason,
          stop_sequence: result.stopSequence,
          // The kind only: a schema can be large, and the caller's request has it.
          ...(input.constraint ? { constraint: input.constraint.kind } : {}),
        },
        usage: usageFields(u),
        latency_ms: Math.round(performance.now() - started),
      },
      input.store,
    );
  };

  const settle = async (): Promise<GenerationResult> => {
    // A read in flight lands first (its outcome, error included, belongs to its own caller).
    if (step) await step.then(noop, noop);
    let windDownError: unknown;
    if (!ended) {
      // Closed early: the backend sees a cancellation at its next check and reports its usage.
      cancel.abort();
      try {
        for (;;) {
          const next = await events.next();
          if (next.done) break;
          if (next.value.type === 'done') done = next.value;
          else if (next.value.type === 'text') pieces++;
        }
      } catch (err) {
        // Billed and stored first (what it computed is owed all the same), then reported below.
        windDownError = err;
        failed = true;
      }
      ended = true;
    }
    const result: GenerationResult = done
      ? { text, finishReason: done.finishReason, stopSequence: done.stopSequence, usage: done.usage }
      : // No final usage from the backend (it failed): its prefill, and a token per text piece.
        {
          text,
          finishReason: failed ? 'error' : 'cancelled',
          stopSequence: null,
          usage: { ...start, completionTokens: pieces },
        };
    await bill(result);
    if (windDownError !== undefined) throw windDownError;
    return result;
  };
  const close = (): Promise<GenerationResult> => (closing ??= settle());

  /** The next text piece, or undefined once the backend's iteration is over. */
  const read = async (): Promise<string | undefined> => {
    for (;;) {
      const next = await events.next();
      if (next.done) return undefined;
      const ev = next.value;
      if (ev.type === 'text') {
        text += ev.text;
        if (ev.logprobs) logprobs.push(...ev.logprobs);
        pieces++;
        return ev.text;
      }
      if (ev.type === 'done') done = ev;
    }
  };

  const stream: GenerationStream = {
    async next() {
      if (closing) return { done: true, value: await closing };
      const pending = read();
      step = pending;
      let piece: string | undefined;
      try {
        piece = await pending;
      } catch (err) {
        ended = true;
        failed = true;
        await close();
        throw err;
      } finally {
        step = undefined;
      }
      if (piece !== undefined) return { done: false, value: piece };
      ended = true;
      const result = await close();
      if (!done) throw new Error('decoder backend ended without a result');
      return { done: true, value: result };
    },
    async return() {
      return { done: true, value: await close() };
    },
    [Symbol.asyncIterator]() {
      return stream;
    },
  };

  return {
    inferenceId,
    created,
    model,
    start,
    stream,
    logprobs,
    async collect() {
      for (;;) {
        const next = await stream.next();
        if (next.done) return next.value;
      }
    },
    close,
  };
}

const noop = () => undefined;

/**
 * A constraint holds the whole answer to a grammar, so nothing may end or start it part-way: a stop
 * sequence would cut the JSON, and a prefilled assistant turn would start it outside the grammar.
 */
function checkConstrainable(prompt: DecoderPrompt, params: SamplingParams): void {
  if (params.stop.length > 0)
    throw new BadRequestError(
      'stop sequences cannot be combined with tools or a JSON output format (a stop sequence would cut the JSON); remove `stop` / `stop_sequences`',
      { param: 'stop' },
    );
  if (prompt.kind === 'chat' && prompt.continueFinal && prompt.messages.at(-1)?.role === 'assistant')
    throw new BadRequestError(
      'a prefilled final assistant message cannot be combined with tools or a JSON output format: the answer must start inside the grammar; end `messages` with a user turn',
      { param: 'messages' },
    );
}

/** docs/reference/decisions.md#token-usage (native shape): prompt_tokens are the non-cached input tokens. */
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

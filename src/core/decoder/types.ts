import type { BlobStore } from '../ports';
/**
 * The decoder port: what every generation route needs from a backend (local llama.cpp, or an
 * OpenAI-compatible upstream such as vLLM). Routes never talk to a backend directly; they go through
 * `runGeneration` (service.ts), which resolves the model, applies the prompt-cache rules, bills and
 * stores.
 */

/** A cache marker, already validated: where the cached prefix ends and how long it lives idle. */
export interface CacheMarker {
  ttlSeconds: number;
}

/** One piece of text in a message. A marker on a part means "the prefix ends after this part". */
export interface PromptPart {
  text: string;
  cache?: CacheMarker;
}

export type DecoderRole = 'system' | 'user' | 'assistant' | 'tool';

export interface DecoderMessage {
  role: DecoderRole;
  parts: PromptPart[];
}

/**
 * Chat prompts are rendered with the model's chat template by the backend; a final assistant
 * message is a prefill (the answer continues it). Text prompts (`/v1/completions`) go in verbatim.
 */
export type DecoderPrompt =
  | {
      kind: 'chat';
      messages: DecoderMessage[];
      /** Anthropic prefill: a final assistant message is continued instead of answered. */
      continueFinal?: boolean;
    }
  | { kind: 'text'; text: string };

export interface SamplingParams {
  maxTokens: number;
  temperature?: number | undefined;
  topP?: number | undefined;
  topK?: number | undefined;
  seed?: number | undefined;
  /** Up to 4 strings; the output never contains a matched stop string. */
  stop: string[];
  /**
   * Log-probabilities wanted for each generated token: undefined = none, 0 = the chosen token's
   * only, n = also its n most likely alternatives (OpenAI `top_logprobs`, at most 20).
   */
  logprobs?: number | undefined;
}

/** A JSON Schema, already checked by structured.ts against what a grammar can express. */
export type JsonSchema = Record<string, unknown>;

/**
 * What the output must be (structured outputs and tool calls, docs/reference/decisions.md): any
 * JSON object, or JSON valid against a schema. A backend guarantees it by constrained decoding
 * (llama.cpp: a GBNF grammar built from the schema; vLLM: its structured outputs), never by
 * checking afterwards.
 */
export type OutputConstraint = { kind: 'json_object' } | { kind: 'json_schema'; schema: JsonSchema };

/** One generated token's log-probability (natural log), with its most likely alternatives. */
export interface TokenLogprob {
  token: string;
  logprob: number;
  top: { token: string; logprob: number }[];
}

/** Token positions (prefix lengths) of the applied markers, for the cache planner. */
export interface TokenizedPrompt {
  tokens: number[];
  /** One entry per applied marker, in prompt order: the number of tokens up to and including it. */
  breakpoints: { length: number; ttlSeconds: number }[];
}

/** What the cache planner decided for one request (see promptCache.ts). */
export interface CachePlan {
  /** Tokens served from an existing cache entry (0 = miss). */
  readTokens: number;
  /** The key of the entry that was hit, when readTokens > 0. */
  hitKey?: string;
  /** New entries to create, as prefix lengths with their keys (ascending). */
  writes: { length: number; key: string; ttlSeconds: number }[];
  writeTokens: number;
  write5mTokens: number;
  write1hTokens: number;
}

export interface CacheHooks {
  /** Called by a backend that tokenizes locally; returns what to read and write. */
  plan(prompt: TokenizedPrompt): CachePlan;
}

/**
 * `cancelled`: the caller went away (or the route ended the generation early). `error`: the backend
 * failed after it started; set by the core for the stored record, never sent by a backend.
 */
export type FinishReason = 'stop' | 'length' | 'stop_sequence' | 'cancelled' | 'error';

export interface GenerationUsage {
  promptTokens: number;
  completionTokens: number;
  /** Tokens read from cache as reported to the caller (planner or upstream). */
  cacheReadTokens: number;
  cacheWriteTokens: number;
  cacheWrite5mTokens: number;
  cacheWrite1hTokens: number;
  /** Tokens whose KV state the engine really reused (diagnostics; not billed). */
  engineReusedTokens: number;
}

export type GenerationEvent =
  | {
      type: 'start';
      usage: Pick<
        GenerationUsage,
        | 'promptTokens'
        | 'cacheReadTokens'
        | 'cacheWriteTokens'
        | 'cacheWrite5mTokens'
        | 'cacheWrite1hTokens'
        | 'engineReusedTokens'
      >;
    }
  | {
      type: 'text';
      text: string;
      /** The tokens behind this text, when `params.logprobs` asked for them. */
      logprobs?: TokenLogprob[];
    }
  | { type: 'done'; finishReason: FinishReason; stopSequence: string | null; usage: GenerationUsage };

export interface GenerateRequest {
  /** The backend's own model key (catalog id, or a served adapter name upstream). */
  model: string;
  /**
   * The tenant the request runs for (the team id). A backend reuses computed prompt state (KV
   * cache) only between requests of the same scope, and reports only that reuse: another team's
   * prompt must never make a request faster or change what it reports.
   */
  scope: string;
  prompt: DecoderPrompt;
  params: SamplingParams;
  cache: CacheHooks;
  /** Constrains the whole output (structured outputs, tool calls); absent = free text. */
  constraint?: OutputConstraint | undefined;
}

/**
 * A fine-tuned decoder served by a backend: the base catalog model plus the job's LoRA adapter,
 * whose files the training job wrote under `blobPrefix` (`adapter.gguf` for llama.cpp, `adapter/`
 * PEFT safetensors for vLLM). `id` is the backend's model key for it (the training job id).
 */
export interface DecoderAdapterSpec {
  id: string;
  baseModel: string;
  blobPrefix: string;
}

export interface DecoderBackend {
  readonly name: string;
  /** True when the backend caches prefixes by itself (vLLM APC): markers are ignored, reads reported. */
  readonly cachesAutomatically: boolean;
  /** Whether `params.logprobs` is honoured (otherwise a request for logprobs gets a 400). */
  readonly supportsLogprobs?: boolean;
  /** Whether this backend can serve the model now (weights present, upstream knows it). */
  hasModel(model: string): Promise<boolean>;
  /**
   * Makes a fine-tuned adapter servable under `spec.id` (fetching its files from the blob store
   * once); called on every request for a deployed decoder job, so it must be cheap when ready.
   */
  ensureAdapter?(spec: DecoderAdapterSpec, blobs: BlobStore): Promise<void>;
  /** Largest prompt + completion the model accepts. */
  contextSize(model: string): Promise<number>;
  /**
   * Streams one generation. The first event is `start` (after prefill, before the first token);
   * the last is `done`, also when `signal` aborts (finishReason `cancelled`, usage so far: a
   * prefill that ran is reported in `promptTokens`). Once `start` is out, a consumer that stops
   * must abort `signal` and read on to `done` (the core's `Generation.close` does): the backend
   * frees what it holds (a slot) and reports what was computed only there.
   */
  generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent>;
  /** Token count of a prompt (for `/v1/messages/count_tokens`-style checks and limits). */
  countTokens?(model: string, prompt: DecoderPrompt): Promise<number>;
  close(): Promise<void>;
}

/**
 * Tools, in one shape for the three compatible APIs (OpenAI `tools`/`tool_choice`, Anthropic
 * `tools`/`tool_choice`, Responses `tools`); each route converts its wire format to these.
 */
export interface ToolSpec {
  name: string;
  description?: string | undefined;
  /** JSON Schema of the arguments (an object schema). */
  parameters: JsonSchema;
}

/** `auto`: the model may answer or call; `required`: it must call one; `tool`: it must call `name`. */
export type ToolChoice = { type: 'auto' } | { type: 'none' } | { type: 'required' } | { type: 'tool'; name: string };

/** A call the model made: `arguments` is the JSON text of the arguments object. */
export interface ToolCall {
  id: string;
  name: string;
  arguments: string;
}

import { createHash } from 'node:crypto';
import { EventSourceParserStream } from 'eventsource-parser/stream';
import type { Logger } from '../../core/logger';
import type { BlobStore } from '../../core/ports';
import { createLogger } from '../../http/logger';
import { ApiError, BadRequestError, ServiceUnavailableError } from '../../core/errors';
import type {
  DecoderAdapterSpec,
  DecoderBackend,
  DecoderPrompt,
  FinishReason,
  GenerateRequest,
  GenerationEvent,
  GenerationUsage,
  OutputConstraint,
  TokenLogprob,
} from '../../core/decoder/types';

export interface OpenAiUpstreamOptions {
  /** e.g. http://vllm.internal:8000 (the adapter appends /v1/...). */
  baseUrl: string;
  apiKey?: string;
  /** Catalog id → the upstream's served model name (vLLM `--served-model-name`, LoRA adapter names). */
  modelNames?: Record<string, string>;
  contextSize?: number;
  fetch?: typeof fetch;
  /** Milliseconds to wait for response headers. */
  timeoutMs?: number;
  /**
   * The upstream model name of a fine-tuned adapter. Default: `loraName(spec)`, the job's blob
   * prefix, which the `sift_lora` resolver plugin of the decoder image (containers/decoder) syncs
   * from S3 and loads the first time a vLLM task sees it.
   */
  adapterName?: (spec: DecoderAdapterSpec) => string;
  logger?: Logger;
}

/**
 * vLLM's `cache_salt` for a scope (team): its automatic prefix cache reuses blocks only between
 * requests with the same salt, so neither reuse, its speed-up nor `cached_tokens` crosses teams.
 * Hashed, so the upstream's logs never carry team ids.
 */
export function cacheSalt(scope: string): string {
  return createHash('sha256').update(`sift-prefix-cache\u0000${scope}`).digest('base64url');
}

/**
 * The vLLM model name of a job's adapter: its model prefix in the artifacts bucket without the
 * trailing slash (`jobs/<team>/<job>/model`). The decoder image's LoRA resolver maps the name back
 * to `s3://$SIFT_BUCKET/<name>/adapter/`; the name never reaches callers (responses echo the
 * model they asked for).
 */
export function loraName(spec: DecoderAdapterSpec): string {
  return spec.blobPrefix.replace(/\/+$/, '');
}

/** An upstream failure relayed with its status (4xx stay the caller's problem, 5xx become 503). */
class UpstreamError extends ApiError {
  readonly kind: string;
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.kind = status === 429 ? 'rate_limit_error' : status < 500 ? 'invalid_request_error' : 'api_error';
  }
}

/** A token's logprob as the chat API writes it (`choices[].logprobs.content[]`). */
interface ChatLogprob {
  token: string;
  logprob: number;
  top_logprobs?: { token: string; logprob: number }[];
}

/** The completions API's logprobs: parallel lists, alternatives as `{token: logprob}` maps. */
interface CompletionLogprobs {
  tokens?: string[];
  token_logprobs?: (number | null)[];
  top_logprobs?: (Record<string, number> | null)[] | null;
}

interface Chunk {
  choices?: {
    index: number;
    text?: string;
    delta?: { content?: string | null };
    finish_reason?: string | null;
    logprobs?: ({ content?: ChatLogprob[] | null } & CompletionLogprobs) | null;
  }[];
  usage?: {
    prompt_tokens?: number;
    completion_tokens?: number;
    prompt_tokens_details?: { cached_tokens?: number } | null;
  } | null;
  error?: { message?: string };
}

/**
 * Decoder on an OpenAI-compatible server (vLLM on ECS). vLLM caches prefixes automatically (APC),
 * so markers are not forwarded; cache reads are what the upstream reports in
 * `prompt_tokens_details.cached_tokens` (start vLLM with `--enable-prompt-tokens-details`), and
 * writes are 0. Streams with SSE parsed by `eventsource-parser`; aborting the caller's signal aborts
 * the upstream request, which makes vLLM cancel the generation.
 */
export class OpenAiUpstreamDecoder implements DecoderBackend {
  readonly name = 'openai-upstream';
  readonly cachesAutomatically = true;
  readonly supportsLogprobs = true;
  private readonly fetch: typeof fetch;
  private modelList?: { at: number; ids: Set<string>; maxLen: Map<string, number> };
  /** Adapters checked by `ensureAdapter`: job id → upstream name and base model. */
  private readonly adapters = new Map<string, { name: string; baseModel: string }>();
  private readonly ensuring = new Map<string, Promise<void>>();
  private readonly logger: Logger;

  constructor(private readonly opts: OpenAiUpstreamOptions) {
    this.fetch = opts.fetch ?? fetch;
    this.logger = opts.logger ?? createLogger();
  }

  private upstreamModel(model: string): string {
    return this.adapters.get(model)?.name ?? this.opts.modelNames?.[model] ?? model;
  }

  /** The model whose tokenizer and context length apply: an adapter's base model. */
  private baseOf(model: string): string {
    return this.adapters.get(model)?.baseModel ?? model;
  }

  /**
   * Makes a fine-tuned decoder job servable upstream. vLLM loads LoRA adapters by name at request
   * time (`--enable-lora`, VLLM_ALLOW_RUNTIME_LORA_UPDATING and the image's `sift_lora` resolver
   * plugin, which syncs `<blobPrefix>adapter/` from S3 into a local directory on the task that
   * receives the request), so every task behind the load balancer loads it on its own first use
   * and nothing here has to reach a particular task. What is checked here, once per job: the
   * upstream serves the adapter's base model, and the job's PEFT adapter is in the blob store.
   */
  async ensureAdapter(spec: DecoderAdapterSpec, blobs: BlobStore): Promise<void> {
    if (this.adapters.has(spec.id)) return;
    let p = this.ensuring.get(spec.id);
    if (!p) {
      p = (async () => {
        if (!(await this.hasModel(spec.baseModel))) {
          throw new ServiceUnavailableError(
            `Base model '${spec.baseModel}' of training job '${spec.id}' is not served by the decoder upstream`,
          );
        }
        if (!(await blobs.head(`${spec.blobPrefix}adapter/adapter_config.json`))) {
          throw new ServiceUnavailableError(
            `Training job '${spec.id}' has no PEFT adapter (adapter/adapter_config.json) among its model files, so vLLM cannot serve it`,
          );
        }
        this.adapters.set(spec.id, { name: (this.opts.adapterName ?? loraName)(spec), baseModel: spec.baseModel });
      })().finally(() => this.ensuring.delete(spec.id));
      this.ensuring.set(spec.id, p);
    }
    return p;
  }

  private headers(): Record<string, string> {
    return {
      'content-type': 'application/json',
      ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
    };
  }

  private async models() {
    if (this.modelList && Date.now() - this.modelList.at < 30_000) return this.modelList;
    let res: Response;
    try {
      res = await this.fetch(`${this.opts.baseUrl}/v1/models`, { headers: this.headers() });
    } catch (err) {
      throw new ServiceUnavailableError(`Decoder upstream unreachable: ${(err as Error).message}`);
    }
    if (!res.ok) throw new ServiceUnavailableError(`Decoder upstream answered ${res.status} on /v1/models`);
    const body = (await res.json()) as { data?: { id: string; max_model_len?: number }[] };
    const ids = new Set((body.data ?? []).map((m) => m.id));
    const maxLen = new Map(
      (body.data ?? []).filter((m) => m.max_model_len).map((m) => [m.id, m.max_model_len as number]),
    );
    this.modelList = { at: Date.now(), ids, maxLen };
    return this.modelList;
  }

  /** An upstream that cannot be asked is a 503, never "this model is not installed". */
  async hasModel(model: string): Promise<boolean> {
    // An adapter is listed by vLLM only on tasks that have loaded it; ensureAdapter vouched for it.
    if (this.adapters.has(model)) return true;
    return (await this.models()).ids.has(this.upstreamModel(model));
  }

  async contextSize(model: string): Promise<number> {
    const fromServer = (await this.models()).maxLen.get(this.upstreamModel(this.baseOf(model)));
    return fromServer ?? this.opts.contextSize ?? 8192;
  }

  private body(req: GenerateRequest): Record<string, unknown> {
    const p = req.params;
    return {
      model: this.upstreamModel(req.model),
      ...(req.prompt.kind === 'text' ? { prompt: req.prompt.text } : { messages: renderMessages(req.prompt) }),
      max_tokens: p.maxTokens,
      ...(p.temperature !== undefined ? { temperature: p.temperature } : {}),
      ...(p.topP !== undefined ? { top_p: p.topP } : {}),
      ...(p.topK !== undefined ? { top_k: p.topK } : {}),
      ...(p.seed !== undefined ? { seed: p.seed } : {}),
      ...(p.stop.length ? { stop: p.stop } : {}),
      cache_salt: cacheSalt(req.scope),
      ...(req.prompt.kind === 'chat' && req.prompt.continueFinal && req.prompt.messages.at(-1)?.role === 'assistant'
        ? { add_generation_prompt: false, continue_final_message: true }
        : {}),
      ...(req.constraint ? { response_format: responseFormat(req.constraint) } : {}),
      ...(p.logprobs === undefined
        ? {}
        : req.prompt.kind === 'text'
          ? { logprobs: p.logprobs }
          : { logprobs: true, ...(p.logprobs > 0 ? { top_logprobs: p.logprobs } : {}) }),
      stream: true,
      stream_options: { include_usage: true },
    };
  }

  /**
   * vLLM's `/tokenize`, so the prompt size is known before the first token (Anthropic
   * message_start). An adapter counts with its base model: same tokenizer, and no adapter load.
   */
  async countTokens(model: string, prompt: DecoderPrompt): Promise<number> {
    const res = await this.fetch(`${this.opts.baseUrl}/tokenize`, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({
        model: this.upstreamModel(this.baseOf(model)),
        ...(prompt.kind === 'text' ? { prompt: prompt.text } : { messages: renderMessages(prompt) }),
      }),
    });
    if (!res.ok) throw new ServiceUnavailableError(`Decoder upstream has no /tokenize (${res.status})`);
    return ((await res.json()) as { count: number }).count;
  }

  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    const path = req.prompt.kind === 'text' ? '/v1/completions' : '/v1/chat/completions';
    // Gone before anything was sent: nothing computed, nothing billed.
    if (signal?.aborted)
      throw new ServiceUnavailableError('The request was cancelled before it reached the decoder upstream');
    const controller = new AbortController();
    const onAbort = () => controller.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => controller.abort(), this.opts.timeoutMs ?? 60_000);
    let res: Response;
    try {
      res = await this.fetch(`${this.opts.baseUrl}${path}`, {
        method: 'POST',
        headers: { ...this.headers(), accept: 'text/event-stream' },
        body: JSON.stringify(this.body(req)),
        signal: controller.signal,
      });
    } catch (err) {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (!signal?.aborted)
        throw new ServiceUnavailableError(`Decoder upstream unreachable: ${(err as Error).message}`);
      // The caller left while the upstream had the request (its prefill runs before any header):
      // that prompt is billed, as the local engine bills a prefill whose caller left.
      const promptTokens = await this.promptTokensOfCancelled(req);
      const usage: GenerationUsage = {
        promptTokens,
        completionTokens: 0,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        cacheWrite5mTokens: 0,
        cacheWrite1hTokens: 0,
        engineReusedTokens: 0,
      };
      yield { type: 'start', usage };
      yield { type: 'done', finishReason: 'cancelled', stopSequence: null, usage };
      return;
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok || !res.body) {
      signal?.removeEventListener('abort', onAbort);
      // The status is the failure reported; an unreadable error body only loses its detail.
      const text = await res.text().catch(() => '');
      let message = text.slice(0, 500);
      try {
        message = (JSON.parse(text) as { error?: { message?: string }; message?: string }).error?.message ?? message;
      } catch {
        /* not JSON */
      }
      const adapter = this.adapters.get(req.model);
      // 404: the resolver found no adapter files (or the plugin is not installed); 400 naming the
      // LoRA: vLLM found them but could not load them (another base model, rank above --max-lora-rank).
      if (adapter && (res.status === 404 || (res.status === 400 && /lora|adapter/i.test(message)))) {
        this.adapters.delete(req.model);
        throw new ServiceUnavailableError(
          `The decoder upstream could not load the adapter of training job '${req.model}': ${message}`,
        );
      }
      if (res.status === 400) throw new BadRequestError(`Upstream rejected the request: ${message}`);
      throw new UpstreamError(
        res.status >= 500 ? 503 : res.status,
        `Decoder upstream answered ${res.status}: ${message}`,
      );
    }
    let promptTokens = 0;
    try {
      promptTokens = await this.countTokens(req.model, req.prompt);
    } catch {
      /* reported at the end instead (a cancelled stream asks again: promptTokensOfCancelled) */
    }
    yield {
      type: 'start',
      usage: {
        promptTokens,
        cacheReadTokens: 0,
        cacheWriteTokens: 0,
        cacheWrite5mTokens: 0,
        cacheWrite1hTokens: 0,
        engineReusedTokens: 0,
      },
    };
    const usage: GenerationUsage = {
      promptTokens,
      completionTokens: 0,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
      engineReusedTokens: 0,
    };
    let finish: FinishReason = 'stop';
    const stopSequence: string | null = null;
    let chunks = 0;
    try {
      const events = res.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
      for await (const ev of events as unknown as AsyncIterable<{ data: string; event?: string }>) {
        if (ev.data === '[DONE]') break;
        const chunk = JSON.parse(ev.data) as Chunk;
        if (chunk.error)
          throw new ServiceUnavailableError(`Decoder upstream failed mid-stream: ${chunk.error.message ?? 'error'}`);
        for (const c of chunk.choices ?? []) {
          const text = c.text ?? c.delta?.content ?? '';
          if (text) {
            chunks++;
            const logprobs = req.params.logprobs === undefined ? undefined : chunkLogprobs(c.logprobs);
            yield { type: 'text', text, ...(logprobs ? { logprobs } : {}) };
          }
          if (c.finish_reason) finish = c.finish_reason === 'length' ? 'length' : 'stop';
        }
        if (chunk.usage) {
          usage.promptTokens = chunk.usage.prompt_tokens ?? usage.promptTokens;
          usage.completionTokens = chunk.usage.completion_tokens ?? usage.completionTokens;
          usage.cacheReadTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
        }
      }
    } catch (err) {
      if (!signal?.aborted) throw err;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (signal?.aborted) {
      finish = 'cancelled';
      usage.completionTokens ||= chunks;
      // No final usage chunk came: the prompt as counted at the start, or counted now.
      if (usage.promptTokens === 0) usage.promptTokens = await this.promptTokensOfCancelled(req);
    }
    // vLLM does not say which stop string matched, so `stop_sequence` stays null upstream.
    yield { type: 'done', finishReason: finish, stopSequence, usage };
  }

  /** The prompt size of a request whose caller left before the upstream reported usage. */
  private async promptTokensOfCancelled(req: GenerateRequest): Promise<number> {
    try {
      return await this.countTokens(req.model, req.prompt);
    } catch (error) {
      this.logger.warn(
        'could not count the prompt of a cancelled upstream generation; it is billed without its prompt',
        { model: req.model, error },
      );
      return 0;
    }
  }

  async close(): Promise<void> {}
}

function renderMessages(prompt: Extract<DecoderPrompt, { kind: 'chat' }>) {
  return prompt.messages.map((m) => ({
    role: m.role === 'tool' ? 'user' : m.role,
    content: m.parts.map((p) => p.text).join('\n'),
  }));
}

/**
 * vLLM's structured outputs through the OpenAI `response_format` it documents
 * (https://docs.vllm.ai/en/latest/features/structured_outputs/): the same field on every vLLM
 * version, where the `guided_json` extra was removed in v0.12 and `structured_outputs` is newer
 * than some deployed images.
 */
function responseFormat(constraint: OutputConstraint) {
  return constraint.kind === 'json_object'
    ? { type: 'json_object' }
    : { type: 'json_schema', json_schema: { name: 'output', schema: constraint.schema } };
}

/** A chunk's token logprobs, from the chat shape or the completions one. */
function chunkLogprobs(lp: NonNullable<Chunk['choices']>[number]['logprobs']): TokenLogprob[] | undefined {
  if (!lp) return undefined;
  if (lp.content)
    return lp.content.map((t) => ({
      token: t.token,
      logprob: t.logprob,
      top: (t.top_logprobs ?? []).map((a) => ({ token: a.token, logprob: a.logprob })),
    }));
  return (lp.tokens ?? []).map((token, i) => ({
    token,
    logprob: lp.token_logprobs?.[i] ?? Number.NEGATIVE_INFINITY,
    top: Object.entries(lp.top_logprobs?.[i] ?? {})
      .map(([t, logprob]) => ({ token: t, logprob }))
      .sort((a, b) => b.logprob - a.logprob),
  }));
}

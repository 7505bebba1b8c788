import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError, BadRequestError, ServiceUnavailableError } from '../../core/errors';
import type {
  DecoderBackend,
  DecoderPrompt,
  FinishReason,
  GenerateRequest,
  GenerationEvent,
  GenerationUsage,
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
}

/** An upstream failure relayed with its status (4xx stay the caller's problem, 5xx become 503). */
class UpstreamError extends ApiError {
  readonly kind: string;
  constructor(readonly status: number, message: string) {
    super(message);
    this.kind = status === 429 ? 'rate_limit_error' : status < 500 ? 'invalid_request_error' : 'api_error';
  }
}

interface Chunk {
  choices?: { index: number; text?: string; delta?: { content?: string | null }; finish_reason?: string | null }[];
  usage?: { prompt_tokens?: number; completion_tokens?: number; prompt_tokens_details?: { cached_tokens?: number } | null } | null;
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
  private readonly fetch: typeof fetch;
  private modelList?: { at: number; ids: Set<string>; maxLen: Map<string, number> };

  constructor(private readonly opts: OpenAiUpstreamOptions) {
    this.fetch = opts.fetch ?? fetch;
  }

  private upstreamModel(model: string): string {
    return this.opts.modelNames?.[model] ?? model;
  }

  private headers(): Record<string, string> {
    return { 'content-type': 'application/json', ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}) };
  }

  private async models() {
    if (this.modelList && Date.now() - this.modelList.at < 30_000) return this.modelList;
    const res = await this.fetch(`${this.opts.baseUrl}/v1/models`, { headers: this.headers() });
    if (!res.ok) throw new ServiceUnavailableError(`Decoder upstream answered ${res.status} on /v1/models`);
    const body = (await res.json()) as { data?: { id: string; max_model_len?: number }[] };
    const ids = new Set((body.data ?? []).map((m) => m.id));
    const maxLen = new Map((body.data ?? []).filter((m) => m.max_model_len).map((m) => [m.id, m.max_model_len as number]));
    this.modelList = { at: Date.now(), ids, maxLen };
    return this.modelList;
  }

  async hasModel(model: string): Promise<boolean> {
    try {
      return (await this.models()).ids.has(this.upstreamModel(model));
    } catch {
      return false;
    }
  }

  async contextSize(model: string): Promise<number> {
    const fromServer = (await this.models().catch(() => undefined))?.maxLen.get(this.upstreamModel(model));
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
      ...(req.prompt.kind === 'chat' && req.prompt.continueFinal && req.prompt.messages.at(-1)?.role === 'assistant'
        ? { add_generation_prompt: false, continue_final_message: true }
        : {}),
      stream: true,
      stream_options: { include_usage: true },
    };
  }

  /** vLLM's `/tokenize`, so the prompt size is known before the first token (Anthropic message_start). */
  async countTokens(model: string, prompt: DecoderPrompt): Promise<number> {
    const res = await this.fetch(`${this.opts.baseUrl}/tokenize`, {
      method: 'POST',
      headers: this.headers(),
      body: JSON.stringify({ model: this.upstreamModel(model), ...(prompt.kind === 'text' ? { prompt: prompt.text } : { messages: renderMessages(prompt) }) }),
    });
    if (!res.ok) throw new ServiceUnavailableError(`Decoder upstream has no /tokenize (${res.status})`);
    return ((await res.json()) as { count: number }).count;
  }

  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    const path = req.prompt.kind === 'text' ? '/v1/completions' : '/v1/chat/completions';
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
      signal?.removeEventListener('abort', onAbort);
      if (signal?.aborted) throw err;
      throw new ServiceUnavailableError(`Decoder upstream unreachable: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
    if (!res.ok || !res.body) {
      signal?.removeEventListener('abort', onAbort);
      const text = await res.text().catch(() => '');
      let message = text.slice(0, 500);
      try {
        message = (JSON.parse(text) as { error?: { message?: string }; message?: string }).error?.message ?? message;
      } catch {
        /* not JSON */
      }
      if (res.status === 400) throw new BadRequestError(`Upstream rejected the request: ${message}`);
      throw new UpstreamError(res.status >= 500 ? 503 : res.status, `Decoder upstream answered ${res.status}: ${message}`);
    }
    let promptTokens = 0;
    try {
      promptTokens = await this.countTokens(req.model, req.prompt);
    } catch {
      /* reported at the end instead */
    }
    yield { type: 'start', usage: { promptTokens, cacheReadTokens: 0, cacheWriteTokens: 0, cacheWrite5mTokens: 0, cacheWrite1hTokens: 0, engineReusedTokens: 0 } };
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
        if (chunk.error) throw new ServiceUnavailableError(`Decoder upstream failed mid-stream: ${chunk.error.message ?? 'error'}`);
        for (const c of chunk.choices ?? []) {
          const text = c.text ?? c.delta?.content ?? '';
          if (text) {
            chunks++;
            yield { type: 'text', text };
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
    }
    // vLLM does not say which stop string matched, so `stop_sequence` stays null upstream.
    yield { type: 'done', finishReason: finish, stopSequence, usage };
  }

  async close(): Promise<void> {}
}

function renderMessages(prompt: Extract<DecoderPrompt, { kind: 'chat' }>) {
  return prompt.messages.map((m) => ({ role: m.role === 'tool' ? 'user' : m.role, content: m.parts.map((p) => p.text).join('\n') }));
}

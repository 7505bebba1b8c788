import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Llama, LlamaContext, LlamaContextSequence, LlamaModel, Token } from 'node-llama-cpp';
import { BadRequestError, NotFoundError, ServiceUnavailableError } from '../../core/errors';
import { StopMatcher } from '../../core/decoder/stopText';
import type {
  DecoderBackend,
  DecoderMessage,
  DecoderPrompt,
  FinishReason,
  GenerateRequest,
  GenerationEvent,
  TokenizedPrompt,
} from '../../core/decoder/types';

export interface LlamaCppOptions {
  /** Directories searched for `<model id>/*.gguf`, in order. */
  modelDirs: string[];
  /** CPU threads per evaluation. On a busy 2-core box 1 is much faster than 2 (spin-wait contention). */
  threads?: number;
  /** Parallel sequences (slots) per model; each keeps its KV state for prefix reuse. */
  slots?: number;
  contextSize?: number;
  /** Where prefix KV snapshots of cache entries are written. */
  stateDir?: string;
  /** Requests allowed to wait for a slot; beyond it a 503 with Retry-After (before any stream). */
  maxQueue?: number;
}

interface Slot {
  seq: LlamaContextSequence;
  busy: boolean;
  lastUsed: number;
}

interface Loaded {
  model: LlamaModel;
  context: LlamaContext;
  slots: Slot[];
  waiters: (() => void)[];
  defaultSystem: string | null;
}

/** Default system prompt of SmolLM2's chat template (added when the first message is not a system one). */
const SMOLLM_SYSTEM = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face';

/**
 * Local decoder on llama.cpp through node-llama-cpp (prebuilt CPU binaries from npm; nothing is
 * downloaded or compiled). Prompts are rendered with the model's ChatML template piece by piece, so
 * cache-marker boundaries are exact token positions. Prefix reuse is real: every slot keeps its KV
 * state and a request goes to the slot sharing the longest token prefix; cache entries additionally
 * snapshot the prefix KV to a file, restored into a slot when no slot still holds that prefix.
 */
export class LlamaCppDecoder implements DecoderBackend {
  readonly name = 'llama.cpp';
  readonly cachesAutomatically = false;
  private llama?: Promise<Llama>;
  private readonly models = new Map<string, Promise<Loaded>>();
  private readonly stateDir: string;
  private readonly stateFiles = new Map<string, string>();
  private readonly paths = new Map<string, string>();
  private closed = false;

  constructor(private readonly opts: LlamaCppOptions) {
    this.stateDir = opts.stateDir ?? join(tmpdir(), `sift-kv-${process.pid}-${Math.random().toString(36).slice(2, 8)}`);
  }

  /** The GGUF of a catalog model, if present in one of the model dirs. */
  ggufPath(model: string): string | undefined {
    const known = this.paths.get(model);
    if (known && existsSync(known)) return known;
    for (const d of this.opts.modelDirs.flatMap((dir) => [join(dir, model), join(dir, model.replace('/', '--'))])) {
      if (!existsSync(d)) continue;
      const f = readdirSync(d).filter((n) => n.endsWith('.gguf')).sort()[0];
      if (f) {
        this.paths.set(model, join(d, f));
        return join(d, f);
      }
    }
    return undefined;
  }

  async hasModel(model: string): Promise<boolean> {
    return this.ggufPath(model) !== undefined;
  }

  async contextSize(model: string): Promise<number> {
    return (await this.load(model)).context.contextSize;
  }

  private async getLlama(): Promise<Llama> {
    this.llama ??= import('node-llama-cpp').then(({ getLlama, LlamaLogLevel }) =>
      getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error, progressLogs: false }),
    );
    return this.llama;
  }

  private load(model: string): Promise<Loaded> {
    let p = this.models.get(model);
    if (!p) {
      p = (async () => {
        const path = this.ggufPath(model);
        if (!path) throw new NotFoundError(`Weights for '${model}' are not in the model store (run: node scripts/fetch-decoder.mjs)`);
        const llama = await this.getLlama();
        const m = await llama.loadModel({ modelPath: path });
        const slots = this.opts.slots ?? 4;
        const context = await m.createContext({
          contextSize: Math.min(this.opts.contextSize ?? 8192, m.trainContextSize),
          sequences: slots,
          threads: this.opts.threads ?? defaultThreads(),
          batchSize: 512,
        });
        const template = String((m.fileInfo.metadata as { tokenizer?: { chat_template?: unknown } }).tokenizer?.chat_template ?? '');
        return {
          model: m,
          context,
          slots: Array.from({ length: slots }, () => ({ seq: context.getSequence(), busy: false, lastUsed: 0 })),
          waiters: [],
          defaultSystem: template.includes('SmolLM') ? SMOLLM_SYSTEM : null,
        };
      })();
      p.catch(() => this.models.delete(model));
      this.models.set(model, p);
    }
    return p;
  }

  /** ChatML pieces: template text (special tokens allowed) and caller text (never special). */
  private tokenize(l: Loaded, prompt: DecoderPrompt): TokenizedPrompt {
    const tokens: number[] = [];
    const breakpoints: TokenizedPrompt['breakpoints'] = [];
    const special = (t: string) => tokens.push(...(l.model.tokenize(t, true) as number[]));
    const plain = (t: string) => {
      if (t) tokens.push(...(l.model.tokenize(t, false) as number[]));
    };
    if (prompt.kind === 'text') {
      plain(prompt.text);
      return { tokens, breakpoints };
    }
    const messages: DecoderMessage[] = [...prompt.messages];
    if (l.defaultSystem && messages[0]?.role !== 'system') messages.unshift({ role: 'system', parts: [{ text: l.defaultSystem }] });
    const last = messages.length - 1;
    messages.forEach((m, i) => {
      const prefill = i === last && m.role === 'assistant' && prompt.continueFinal === true;
      special(`<|im_start|>${m.role}\n`);
      m.parts.forEach((p, j) => {
        if (j > 0) plain('\n');
        plain(p.text);
        if (p.cache) breakpoints.push({ length: tokens.length, ttlSeconds: p.cache.ttlSeconds });
      });
      if (!prefill) special('<|im_end|>\n');
    });
    if (!(messages[last]?.role === 'assistant' && prompt.continueFinal)) special('<|im_start|>assistant\n');
    return { tokens, breakpoints };
  }

  async countTokens(model: string, prompt: DecoderPrompt): Promise<number> {
    return this.tokenize(await this.load(model), prompt).tokens.length;
  }

  private async acquire(l: Loaded, tokens: Token[], signal?: AbortSignal): Promise<Slot> {
    for (;;) {
      if (signal?.aborted) throw new Error('aborted');
      const free = l.slots.filter((s) => !s.busy);
      if (free.length > 0) {
        let best = free[0] as Slot;
        let bestLen = -1;
        for (const s of free) {
          const len = s.seq.compareContextTokens(tokens).firstDifferentIndex;
          if (len > bestLen || (len === bestLen && s.lastUsed < best.lastUsed)) {
            best = s;
            bestLen = len;
          }
        }
        best.busy = true;
        return best;
      }
      if (l.waiters.length >= (this.opts.maxQueue ?? 64)) {
        const err = new ServiceUnavailableError('The decoder is at capacity; retry shortly');
        err.headers['retry-after'] = '1';
        throw err;
      }
      await new Promise<void>((ok) => l.waiters.push(ok));
    }
  }

  private release(l: Loaded, slot: Slot): void {
    slot.busy = false;
    slot.lastUsed = performance.now();
    l.waiters.shift()?.();
  }

  private statePath(key: string): string {
    mkdirSync(this.stateDir, { recursive: true });
    return join(this.stateDir, `${key}.kv`);
  }

  /** Cache ledger eviction hook: the KV snapshot of an expired entry goes too. */
  evict(key: string): void {
    const path = this.stateFiles.get(key);
    if (!path) return;
    this.stateFiles.delete(key);
    unlink(path).catch(() => undefined);
  }

  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncIterable<GenerationEvent> {
    if (this.closed) throw new Error('decoder closed');
    const l = await this.load(req.model);
    const prompt = this.tokenize(l, req.prompt);
    const tokens = prompt.tokens as Token[];
    const ctxSize = l.context.contextSize;
    if (tokens.length + req.params.maxTokens > ctxSize) {
      throw new BadRequestError(
        `This model's context is ${ctxSize} tokens; the prompt has ${tokens.length} and max tokens asks for ${req.params.maxTokens} more`,
      );
    }
    const plan = req.cache.plan(prompt);
    const slot = await this.acquire(l, tokens, signal);
    const seq = slot.seq;
    const gen: Token[] = [];
    // node-llama-cpp ends the iteration itself at an end-of-generation token.
    let finish: FinishReason = 'stop';
    const stop = new StopMatcher(req.params.stop);
    let reused = 0;
    try {
      let keep = seq.compareContextTokens(tokens).firstDifferentIndex;
      const snapshot = plan.hitKey ? this.stateFiles.get(plan.hitKey) : undefined;
      if (snapshot && keep < plan.readTokens && existsSync(snapshot)) {
        await seq.clearHistory();
        await seq.loadStateFromFile(snapshot, { acceptRisk: true });
        keep = seq.compareContextTokens(tokens).firstDifferentIndex;
      }
      keep = Math.min(keep, tokens.length - 1);
      // A new cache entry snapshots the KV state exactly at its prefix, so evaluation restarts there.
      const firstWrite = plan.writes[0]?.length;
      if (firstWrite !== undefined) keep = Math.min(keep, firstWrite);
      if (seq.nextTokenIndex > keep) await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
      reused = keep;
      let at = keep;
      for (const w of plan.writes) {
        if (w.length > at) {
          await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(at, w.length));
          at = w.length;
        }
        const path = this.statePath(w.key);
        await seq.saveStateToFile(path);
        this.stateFiles.set(w.key, path);
      }
      yield {
        type: 'start',
        usage: {
          promptTokens: tokens.length,
          cacheReadTokens: plan.readTokens,
          cacheWriteTokens: plan.writeTokens,
          cacheWrite5mTokens: plan.write5mTokens,
          cacheWrite1hTokens: plan.write1hTokens,
          engineReusedTokens: reused,
        },
      };
      let emitted = 0;
      if (signal?.aborted) finish = 'cancelled';
      else if (req.params.maxTokens > 0) {
        const it = seq.evaluate(tokens.slice(at), {
          ...(req.params.temperature !== undefined ? { temperature: req.params.temperature } : {}),
          ...(req.params.topP !== undefined ? { topP: req.params.topP } : {}),
          ...(req.params.topK !== undefined ? { topK: req.params.topK } : {}),
          ...(req.params.seed !== undefined ? { seed: req.params.seed } : {}),
        });
        for await (const tok of it) {
          if (signal?.aborted) {
            finish = 'cancelled';
            break;
          }
          if (l.model.isEogToken(tok)) break;
          gen.push(tok);
          const text = l.model.detokenize(gen);
          // A multi-byte character split across tokens waits for its remaining bytes.
          const ready = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
          if (ready.length > emitted) {
            const out = stop.push(ready.slice(emitted));
            emitted = ready.length;
            if (out) yield { type: 'text', text: out };
            if (stop.matched !== null) {
              finish = 'stop_sequence';
              break;
            }
          }
          if (gen.length >= req.params.maxTokens) {
            finish = 'length';
            break;
          }
        }
        if (finish !== 'stop_sequence' && finish !== 'cancelled') {
          const text = l.model.detokenize(gen);
          const tail = stop.push(text.slice(emitted)) + stop.flush();
          if (stop.matched !== null) finish = 'stop_sequence';
          if (tail) yield { type: 'text', text: tail };
        }
      } else finish = 'length';
    } finally {
      this.release(l, slot);
    }
    yield {
      type: 'done',
      finishReason: finish,
      stopSequence: stop.matched,
      usage: {
        promptTokens: tokens.length,
        completionTokens: gen.length,
        cacheReadTokens: plan.readTokens,
        cacheWriteTokens: plan.writeTokens,
        cacheWrite5mTokens: plan.write5mTokens,
        cacheWrite1hTokens: plan.write1hTokens,
        engineReusedTokens: reused,
      },
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.models.values()) {
      const l = await p.catch(() => undefined);
      if (l) {
        await l.context.dispose();
        await l.model.dispose();
      }
    }
    this.models.clear();
    const llama = await this.llama?.catch(() => undefined);
    await llama?.dispose();
    rmSync(this.stateDir, { recursive: true, force: true });
  }
}

export function defaultThreads(): number {
  const env = Number(process.env['SIFT_DECODER_THREADS']);
  if (Number.isInteger(env) && env > 0) return env;
  return Math.max(1, Math.min(8, cpus().length - 1));
}

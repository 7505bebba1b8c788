import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Services } from '../../core/context';
import { CACHE_DIR, DEFAULT_MODELS_DIR, REPO_ROOT } from '../../paths';
import { decoderProfile } from '../../core/decoder/models';
import { PromptCache } from '../../core/decoder/promptCache';
import type { DecoderRuntime } from '../../core/decoder/service';
import type { DecoderBackend } from '../../core/decoder/types';
import { LlamaCppDecoder } from './llamaCpp';
import { OpenAiUpstreamDecoder } from './openAiUpstream';

export { defaultThreads, LlamaCppDecoder } from './llamaCpp';
export { OpenAiUpstreamDecoder } from './openAiUpstream';

export interface DecoderSetup {
  backend?: DecoderBackend;
  /** Overrides every model's minimum cacheable prefix (tests use small prompts). */
  minCacheTokens?: number;
  now?: () => number;
}

/**
 * Where local GGUF weights are looked for, in order: $SIFT_DATA_DIR/models, ./.sift/models (where
 * `npm run fetch:decoder` puts them), then the per-user model cache (SIFT_MODELS_DIR or
 * ~/.cache/sift/models). Inside each, `<vendor>/<name>/` or `<vendor>--<name>/`.
 */
export function modelDirs(): string[] {
  const dirs = [
    process.env.SIFT_DATA_DIR ? join(resolve(REPO_ROOT, process.env.SIFT_DATA_DIR), 'models') : undefined,
    join(REPO_ROOT, '.sift', 'models'),
    DEFAULT_MODELS_DIR,
  ].filter((d): d is string => !!d);
  return [...new Set(dirs)].filter((d) => existsSync(d));
}

/**
 * The backend from the environment: `SIFT_DECODER_UPSTREAM_URL` or `SIFT_DECODER_URL` (vLLM on ECS, with optional
 * `SIFT_DECODER_UPSTREAM_KEY` and `SIFT_DECODER_UPSTREAM_MODELS` = JSON map of catalog id → served
 * name), otherwise local llama.cpp on the GGUF files in the model store.
 */
export function backendFromEnv(): DecoderBackend {
  // SIFT_DECODER_URL is what the inference stack (lib/inference-stack.ts) sets on the gateway task.
  const url = process.env.SIFT_DECODER_UPSTREAM_URL ?? process.env.SIFT_DECODER_URL;
  if (url) {
    const names = process.env.SIFT_DECODER_UPSTREAM_MODELS;
    return new OpenAiUpstreamDecoder({
      baseUrl: url.replace(/\/+$/, '').replace(/\/v1$/, ''),
      ...(process.env.SIFT_DECODER_UPSTREAM_KEY ? { apiKey: process.env.SIFT_DECODER_UPSTREAM_KEY } : {}),
      ...(names ? { modelNames: JSON.parse(names) as Record<string, string> } : {}),
    });
  }
  const slots = Number(process.env.SIFT_DECODER_SLOTS);
  // Fine-tuned adapters (adapter.gguf of decoder jobs) are cached per blob version, across restarts.
  return new LlamaCppDecoder({
    modelDirs: modelDirs(),
    adapterDir: join(CACHE_DIR, 'adapters'),
    ...(slots > 0 ? { slots } : {}),
  });
}

/**
 * The decoder runtime a service graph carries (`svc.decoder`): the backend (and so the model) is
 * created on first use, so a process that never generates (the authorizer, a worker) loads nothing.
 */
export class LazyDecoderRuntime implements DecoderRuntime {
  private runtime: DecoderRuntime | undefined;

  constructor(private setup: DecoderSetup = {}) {}

  /** Replaces the setup before the first use (tests, benchmarks): the runtime object in Services stays the same. */
  configure(setup: DecoderSetup): void {
    if (this.runtime) throw new Error('decoder already started for this service');
    this.setup = setup;
  }

  get started(): boolean {
    return this.runtime !== undefined;
  }

  get backend(): DecoderBackend {
    return this.start().backend;
  }

  get cache(): PromptCache {
    return this.start().cache;
  }

  private start(): DecoderRuntime {
    if (this.runtime) return this.runtime;
    const envMin = Number(process.env.SIFT_DECODER_MIN_CACHE_TOKENS);
    const minOverride = this.setup.minCacheTokens ?? (envMin > 0 ? envMin : undefined);
    const backend = this.setup.backend ?? backendFromEnv();
    const cache = new PromptCache({
      minTokens: (model) => minOverride ?? decoderProfile(model).minCacheTokens,
      ...(this.setup.now ? { now: this.setup.now } : {}),
      onEvict: (key) => (backend instanceof LlamaCppDecoder ? backend.evict(key) : undefined),
    });
    this.runtime = { backend, cache };
    return this.runtime;
  }

  /** Frees the model and its KV snapshots (local mode shutdown); nothing to do if it never started. */
  async close(): Promise<void> {
    const rt = this.runtime;
    this.runtime = undefined;
    if (!rt) return;
    rt.cache.clear();
    await rt.backend.close();
  }
}

/**
 * Sets up the decoder of a service graph before its first use (tests, benchmarks). A runtime's graph
 * is read-only: its `LazyDecoderRuntime` takes the setup; a bare graph without one (the core's
 * in-memory services) gets one.
 */
export function configureDecoder(svc: Services, setup: DecoderSetup): void {
  if (svc.decoder instanceof LazyDecoderRuntime) svc.decoder.configure(setup);
  else svc.decoder = new LazyDecoderRuntime(setup);
}

/** Frees the model and its KV snapshots (local mode shutdown). */
export async function closeDecoder(svc: Services): Promise<void> {
  if (svc.decoder instanceof LazyDecoderRuntime) await svc.decoder.close();
}

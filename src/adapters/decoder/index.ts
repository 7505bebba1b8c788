import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import type { Services } from '../../core/context';
import { CACHE_DIR, DEFAULT_MODELS_DIR, REPO_ROOT } from '../../local/paths';
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

const runtimes = new WeakMap<Services, DecoderRuntime>();
const setups = new WeakMap<Services, DecoderSetup>();

/**
 * Where local GGUF weights are looked for, in order: $SIFT_DATA_DIR/models, ./.sift/models (where
 * `npm run fetch:decoder` puts them), then the per-user model cache (SIFT_MODELS_DIR or
 * ~/.cache/sift/models). Inside each, `<vendor>/<name>/` or `<vendor>--<name>/`.
 */
export function modelDirs(): string[] {
  const dirs = [
    process.env['SIFT_DATA_DIR'] ? join(resolve(REPO_ROOT, process.env['SIFT_DATA_DIR']), 'models') : undefined,
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
  const url = process.env['SIFT_DECODER_UPSTREAM_URL'] ?? process.env['SIFT_DECODER_URL'];
  if (url) {
    const names = process.env['SIFT_DECODER_UPSTREAM_MODELS'];
    return new OpenAiUpstreamDecoder({
      baseUrl: url.replace(/\/+$/, '').replace(/\/v1$/, ''),
      ...(process.env['SIFT_DECODER_UPSTREAM_KEY'] ? { apiKey: process.env['SIFT_DECODER_UPSTREAM_KEY'] } : {}),
      ...(names ? { modelNames: JSON.parse(names) as Record<string, string> } : {}),
    });
  }
  const slots = Number(process.env['SIFT_DECODER_SLOTS']);
  // Fine-tuned adapters (adapter.gguf of decoder jobs) are cached per blob version, across restarts.
  return new LlamaCppDecoder({ modelDirs: modelDirs(), adapterDir: join(CACHE_DIR, 'adapters'), ...(slots > 0 ? { slots } : {}) });
}

/** Sets the decoder for a service instance before its first use (tests, benchmarks, ECS wiring). */
export function configureDecoder(svc: Services, setup: DecoderSetup): void {
  if (runtimes.has(svc)) throw new Error('decoder already started for this service');
  setups.set(svc, setup);
}

export function decoderRuntime(svc: Services): DecoderRuntime {
  let rt = runtimes.get(svc);
  if (!rt) {
    const setup = setups.get(svc) ?? {};
    const envMin = Number(process.env['SIFT_DECODER_MIN_CACHE_TOKENS']);
    const minOverride = setup.minCacheTokens ?? (envMin > 0 ? envMin : undefined);
    const backend = setup.backend ?? backendFromEnv();
    const cache = new PromptCache({
      minTokens: (model) => minOverride ?? decoderProfile(model).minCacheTokens,
      ...(setup.now ? { now: setup.now } : {}),
      onEvict: (key) => (backend instanceof LlamaCppDecoder ? backend.evict(key) : undefined),
    });
    rt = { backend, cache };
    runtimes.set(svc, rt);
  }
  return rt;
}

/** Frees the model and its KV snapshots (local mode shutdown). */
export async function closeDecoder(svc: Services): Promise<void> {
  const rt = runtimes.get(svc);
  runtimes.delete(svc);
  if (!rt) return;
  rt.cache.clear();
  await rt.backend.close();
}

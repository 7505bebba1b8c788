import type { PromptCache } from './promptCache';
import type { DecoderBackend } from './types';

/** The decoder of this process (`svc.decoder`; adapters/decoder): its backend and prompt cache. */
export interface DecoderRuntime {
  backend: DecoderBackend;
  cache: PromptCache;
}

/**
 * How a model family caches (docs/reference/decisions.md#prompt-caching): `explicit` honours markers (Claude-style and
 * our own models), `gpt` caches automatically and rejects markers, `automatic` (vLLM APC) ignores them.
 */
export type CacheFamily = 'claude' | 'gpt-4' | 'gpt-5' | 'explicit';

export interface DecoderProfile {
  family: CacheFamily;
  /** docs/reference/decisions.md#prompt-caching, minimum prefix: shorter marked prefixes are silently not cached. */
  minCacheTokens: number;
  /** Largest `max_tokens` accepted. */
  maxOutputTokens: number;
  /** Whether the model is offered tools (calls by constrained decoding, tools.ts); false: tools get a clear 400. */
  tools: boolean;
  /** USD per million tokens. */
  inputPrice: number;
  outputPrice: number;
}

/** docs/reference/decisions.md#cache-billing: multipliers of the input price. */
export const CACHE_MULTIPLIERS: Record<CacheFamily, { read: number; write: number }> = {
  claude: { read: 0.1, write: 1.25 },
  'gpt-4': { read: 0.5, write: 1 },
  'gpt-5': { read: 0.1, write: 1 },
  // Our own models follow the Claude-style explicit scheme, so they bill like it.
  explicit: { read: 0.1, write: 1.25 },
};

const PROFILES: Record<string, DecoderProfile> = {
  'HuggingFaceTB/SmolLM2-135M-Instruct': {
    family: 'explicit',
    minCacheTokens: 1024,
    maxOutputTokens: 4096,
    // Tool calls come from grammar-constrained decoding (tools.ts), not from the model's own skill.
    tools: true,
    inputPrice: 0.05,
    outputPrice: 0.1,
  },
};

const DEFAULT_PROFILE: DecoderProfile = {
  family: 'explicit',
  minCacheTokens: 1024,
  maxOutputTokens: 4096,
  tools: false,
  inputPrice: 0.1,
  outputPrice: 0.2,
};

export function decoderProfile(model: string): DecoderProfile {
  const p = PROFILES[model];
  if (p) return p;
  if (/(^|\/)gpt-5/i.test(model)) return { ...DEFAULT_PROFILE, family: 'gpt-5' };
  if (/(^|\/)gpt-4/i.test(model)) return { ...DEFAULT_PROFILE, family: 'gpt-4' };
  if (/(^|\/)claude/i.test(model)) return { ...DEFAULT_PROFILE, family: 'claude', minCacheTokens: 4096 };
  return DEFAULT_PROFILE;
}

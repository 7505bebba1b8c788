import type { Services } from '../context';
import { resolveServingTarget } from '../deployments';
import { ServiceUnavailableError } from '../errors';
import { missingWeightsError } from '../modelBuild';
import type { DecoderAdapterSpec, DecoderBackend } from './types';

/**
 * How a model family caches (SPEC "Prompt caching rules"): `explicit` honours markers (Claude-style and
 * our own models), `gpt` caches automatically and rejects markers, `automatic` (vLLM APC) ignores them.
 */
export type CacheFamily = 'claude' | 'gpt-4' | 'gpt-5' | 'explicit';

export interface DecoderProfile {
  family: CacheFamily;
  /** SPEC "Minimum cacheable prefix": shorter marked prefixes are silently not cached. */
  minCacheTokens: number;
  /** Largest `max_tokens` accepted. */
  maxOutputTokens: number;
  /** Whether the model can call tools; SmolLM2-135M cannot do so reliably, so tools get a clear 400. */
  tools: boolean;
  /** USD per million tokens. */
  inputPrice: number;
  outputPrice: number;
}

/** SPEC "Cache billing": multipliers of the input price. */
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
    tools: false,
    inputPrice: 0.05,
    outputPrice: 0.1,
  },
};

const DEFAULT_PROFILE: DecoderProfile = { family: 'explicit', minCacheTokens: 1024, maxOutputTokens: 4096, tools: false, inputPrice: 0.1, outputPrice: 0.2 };

export function decoderProfile(model: string): DecoderProfile {
  const p = PROFILES[model];
  if (p) return p;
  if (/(^|\/)gpt-5/i.test(model)) return { ...DEFAULT_PROFILE, family: 'gpt-5' };
  if (/(^|\/)gpt-4/i.test(model)) return { ...DEFAULT_PROFILE, family: 'gpt-4' };
  if (/(^|\/)claude/i.test(model)) return { ...DEFAULT_PROFILE, family: 'claude', minCacheTokens: 4096 };
  return DEFAULT_PROFILE;
}

export type ResolvedModel =
  | {
      type: 'decoder';
      /** The string the caller sent (echoed in responses). */
      requested: string;
      /** What the backend serves: a catalog id, or a training job id for fine-tuned weights. */
      backendModel: string;
      /** The catalog model at the root (pricing, limits, chat template). */
      baseModel: string;
      profile: DecoderProfile;
      projectId: string | null;
      trainingJobId: string | null;
      /** Set for a fine-tuned job: the backend loads the adapter before generating. */
      adapter?: DecoderAdapterSpec;
    }
  | { type: 'encoder'; requested: string; baseModel: string; projectId: string | null; trainingJobId: string | null };

/**
 * SPEC "model identifiers" (deployments.ts): a catalog id, a deployed training job id, or a project
 * name or id (whatever the project serves now). A deployed decoder job is served as its base model
 * plus the job's LoRA adapter (`backend.ensureAdapter`).
 */
export async function resolveModel(svc: Services, teamId: string, model: string, backend: DecoderBackend): Promise<ResolvedModel> {
  const target = await resolveServingTarget(svc, teamId, model);
  const trainingJobId = target.job?.id ?? null;
  if (target.model.type === 'encoder') return { type: 'encoder', requested: model, baseModel: target.model.id, projectId: target.projectId, trainingJobId };
  if (target.kind === 'catalog') {
    if (!(await backend.hasModel(target.model.id))) {
      throw missingWeightsError(svc, target.model.id, `Model '${model}' is in the catalog but its weights are not installed on this deployment`);
    }
    return { type: 'decoder', requested: model, backendModel: target.model.id, baseModel: target.model.id, profile: decoderProfile(target.model.id), projectId: null, trainingJobId: null };
  }
  if (!(await backend.hasModel(target.model.id))) {
    throw new ServiceUnavailableError(`Base model '${target.model.id}' of training job '${target.job.id}' is not installed on this deployment`);
  }
  if (!backend.ensureAdapter) throw new ServiceUnavailableError(`The ${backend.name} backend cannot serve fine-tuned adapters`);
  const adapter: DecoderAdapterSpec = { id: target.job.id, baseModel: target.model.id, blobPrefix: target.job.deployment.blob_prefix };
  return {
    type: 'decoder',
    requested: model,
    backendModel: target.job.id,
    baseModel: target.model.id,
    profile: decoderProfile(target.model.id),
    projectId: target.projectId,
    trainingJobId,
    adapter,
  };
}

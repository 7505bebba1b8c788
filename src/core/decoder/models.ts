import type { Services } from '../context';
import { findBaseModel } from '../catalog';
import { ConflictError, NotFoundError, ServiceUnavailableError } from '../errors';
import { isUuid } from '../ids';
import { getProject } from '../projects';
import { getTrainingJob } from '../trainingJobs';
import type { DecoderBackend } from './types';

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
    }
  | { type: 'encoder'; requested: string; baseModel: string; projectId: string | null; trainingJobId: string | null };

/**
 * SPEC "model identifiers": a catalog id, a training job id (routes only while deployed), or — on
 * every route here — a project name or id (whatever the project has deployed).
 */
export async function resolveModel(
  svc: Services,
  teamId: string,
  model: string,
  backend: DecoderBackend,
  opts: { allowProjects: boolean },
): Promise<ResolvedModel> {
  const base = findBaseModel(model);
  if (base) {
    if (base.type === 'encoder') return { type: 'encoder', requested: model, baseModel: base.id, projectId: null, trainingJobId: null };
    if (!(await backend.hasModel(base.id))) {
      throw new ServiceUnavailableError(`Model '${model}' is in the catalog but its weights are not installed on this deployment`);
    }
    return { type: 'decoder', requested: model, backendModel: base.id, baseModel: base.id, profile: decoderProfile(base.id), projectId: null, trainingJobId: null };
  }
  let jobId: string | undefined;
  let projectId: string | null = null;
  if (isUuid(model)) {
    const job = await getTrainingJob(svc, teamId, model).catch(() => undefined);
    if (job) jobId = job.id;
  }
  if (!jobId && opts.allowProjects) {
    const project = await getProject(svc, teamId, model).catch(() => undefined);
    if (project) {
      if (!project.active_training_job_id) {
        throw new ConflictError(`Project '${model}' has no active inference deployment: deploy a trained model to it first`);
      }
      jobId = project.active_training_job_id;
      projectId = project.id;
    }
  }
  if (!jobId) throw new NotFoundError(`The model '${model}' does not exist or you do not have access to it`);
  const job = await getTrainingJob(svc, teamId, jobId);
  if (job.model_type === 'encoder') return { type: 'encoder', requested: model, baseModel: job.root_model, projectId, trainingJobId: job.id };
  // A decoder job is served from its merged weights (`models/<job id>/*.gguf`) once deployed.
  if (!projectId || !(await backend.hasModel(job.id))) {
    throw new ConflictError(`Training job '${job.id}' has no active inference deployment`);
  }
  return {
    type: 'decoder',
    requested: model,
    backendModel: job.id,
    baseModel: job.root_model,
    profile: decoderProfile(job.root_model),
    projectId,
    trainingJobId: job.id,
  };
}

/**
 * The one model resolver of every inference route (docs/reference/decisions.md#model-identifiers, deployments.ts): a
 * request's model string becomes one `ResolvedModel`, once, and is passed down to whatever runs it.
 */
import type { Principal, Services } from './context';
import { decoderProfile, type DecoderProfile } from './decoder/models';
import type { DecoderAdapterSpec } from './decoder/types';
import { resolveServingTarget } from './deployments';
import { ServiceUnavailableError, ValidationError } from './errors';
import { baseModelManifestKey } from './modelLayout';
import { missingWeightsError } from './modelBuild';

export interface ResolvedDecoder {
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

export interface ResolvedEncoder {
  type: 'encoder';
  requested: string;
  /** The catalog model at the root of the weights. */
  baseModel: string;
  /** Blob-store prefix of the model directory (`…/onnx/`, `tokenizer.json`, `manifest.json`). */
  prefix: string;
  projectId: string | null;
  trainingJobId: string | null;
}

export type ResolvedModel = ResolvedDecoder | ResolvedEncoder;

/**
 * A catalog id, a deployed training job id, or a project name or id (whatever the project serves
 * now). A deployed decoder job is served as its base model plus the job's LoRA adapter
 * (`backend.ensureAdapter`); a decoder's weights are checked here, an encoder's where it runs
 * (`ensureEncoderWeights`). `extraction`: the caller can only extract, so a decoder is a 422 on
 * `body.model_id` before anything else is checked.
 */
export async function resolveModel(
  svc: Services,
  principal: Pick<Principal, 'team_id'>,
  model: string,
  opts: { extraction?: boolean } = {},
): Promise<ResolvedModel> {
  const target = await resolveServingTarget(svc, principal.team_id, model);
  const trainingJobId = target.job?.id ?? null;
  if (target.model.type === 'encoder') {
    const prefix = target.kind === 'catalog' ? `models/${model}/` : target.job.deployment.blob_prefix;
    return {
      type: 'encoder',
      requested: model,
      baseModel: target.model.id,
      prefix,
      projectId: target.projectId,
      trainingJobId,
    };
  }
  if (opts.extraction) {
    const what =
      target.kind === 'catalog'
        ? `'${model}' is a decoder model`
        : target.projectId
          ? `project '${model}' serves a decoder model`
          : `training job '${model}' trained a decoder model`;
    throw ValidationError.field(
      ['body', 'model_id'],
      `${what}: extraction needs an encoder; for generation send task: "generate" with messages`,
    );
  }
  if (!svc.decoder) throw new ServiceUnavailableError('The decoder runtime is not available on this deployment');
  const backend = svc.decoder.backend;
  if (target.kind === 'catalog') {
    if (!(await backend.hasModel(target.model.id))) {
      throw missingWeightsError(
        svc,
        target.model.id,
        `Model '${model}' is in the catalog but its weights are not installed on this deployment`,
      );
    }
    return {
      type: 'decoder',
      requested: model,
      backendModel: target.model.id,
      baseModel: target.model.id,
      profile: decoderProfile(target.model.id),
      projectId: null,
      trainingJobId: null,
    };
  }
  if (!(await backend.hasModel(target.model.id))) {
    throw new ServiceUnavailableError(
      `Base model '${target.model.id}' of training job '${target.job.id}' is not installed on this deployment`,
    );
  }
  if (!backend.ensureAdapter)
    throw new ServiceUnavailableError(`The ${backend.name} backend cannot serve fine-tuned adapters`);
  const adapter: DecoderAdapterSpec = {
    id: target.job.id,
    baseModel: target.model.id,
    blobPrefix: target.job.deployment.blob_prefix,
  };
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

/**
 * A catalog encoder's weights must be in the model store (a deployed job's always are): else 503.
 * A long-lived server remembers for a few seconds that they were (hotPath.ts), so the request path
 * makes no store round trip for them; a miss is checked again on every request.
 */
export async function ensureEncoderWeights(svc: Services, model: ResolvedEncoder): Promise<void> {
  if (model.trainingJobId !== null) return;
  const key = baseModelManifestKey(model.baseModel);
  if (svc.hotPath?.storedWeights.get(key)) return;
  if (await svc.blobs.head(key)) {
    svc.hotPath?.storedWeights.set(key, true);
    return;
  }
  throw missingWeightsError(
    svc,
    model.baseModel,
    `Model '${model.requested}' is in the catalog but its weights are not in the model store on this deployment (GET /base-models shows available: false)`,
  );
}

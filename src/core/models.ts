/**
 * The one model resolver of every inference route (docs/reference/decisions.md#model-identifiers, deployments.ts): a
 * request's model string becomes one servable model (`resolveServable`: weights checked, runtime attached, typed by
 * kind), once, and is passed down to whatever runs it. The only place that says a runtime is missing
 * (`requireRuntime`) or that a model is of the wrong kind.
 */
import type { Principal, Services } from './context';
import { decoderProfile, type DecoderProfile } from './decoder/models';
import type { DecoderRuntime } from './decoder/runtime';
import type { DecoderAdapterSpec } from './decoder/types';
import type { CalibratedThresholds } from './extraction/thresholds';
import { resolveServingTarget } from './deployments';
import { BadRequestError, ServiceUnavailableError, ValidationError, type ApiError } from './errors';
import { baseModelManifestKey, baseModelPrefix } from './modelLayout';
import { missingWeightsError } from './modelBuild';
import type { EncoderRuntime } from './ports';

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
  /** The deployment's calibrated thresholds, for requests that send no `threshold`. */
  thresholds?: CalibratedThresholds | undefined;
}

export type ResolvedModel = ResolvedDecoder | ResolvedEncoder;

/**
 * A catalog id, a deployed training job id, or a project name or id (whatever the project serves
 * now). A deployed decoder job is served as its base model plus the job's LoRA adapter
 * (`backend.ensureAdapter`); a decoder's weights are checked here, an encoder's by `resolveServable`
 * (`ensureEncoderWeights`), the resolver routes call. `extraction`: the caller can only extract, so a decoder is a 422 on
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
    const prefix = target.kind === 'catalog' ? baseModelPrefix(model) : target.job.deployment.blob_prefix;
    return {
      type: 'encoder',
      requested: model,
      baseModel: target.model.id,
      prefix,
      projectId: target.projectId,
      trainingJobId,
      ...(target.kind === 'deployment' && target.job.deployment.thresholds
        ? { thresholds: target.job.deployment.thresholds }
        : {}),
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
  const backend = requireRuntime(svc, 'decoder').backend;
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

export type ModelKind = 'encoder' | 'decoder';

/** An encoder ready to run: weights in the model store, the process's engine attached. */
export interface ServableEncoder {
  kind: 'encoder';
  model: ResolvedEncoder;
  runtime: EncoderRuntime;
}

/** A decoder ready to generate: weights installed on the backend (adapter support checked), the runtime attached. */
export interface ServableDecoder {
  kind: 'decoder';
  model: ResolvedDecoder;
  runtime: DecoderRuntime;
}

export type Servable = ServableEncoder | ServableDecoder;

interface Runtimes {
  encoder: EncoderRuntime;
  decoder: DecoderRuntime;
}

/**
 * The process's runtime of a kind; the one 503 (one wording) where this deployment has none. `hint` tells the
 * caller what this deployment can do instead (the native route names the decoder's request shape).
 */
export function requireRuntime<K extends ModelKind>(svc: Services, kind: K, hint?: string): Runtimes[K] {
  const runtime = (kind === 'encoder' ? svc.encoder : svc.decoder) as Runtimes[K] | undefined;
  if (!runtime) {
    throw new ServiceUnavailableError(
      `The ${kind} runtime is not available on this deployment${hint ? `; ${hint}` : ''}`,
    );
  }
  return runtime;
}

export interface ServableOptions {
  /** The kind the caller can serve: its runtime is checked first, and another kind is an error. */
  want?: ModelKind;
  /**
   * Where the caller sent the model id, for a native route (`['body', 'model_id']`): a wrong kind is a 422 on that
   * field. Without it (the compatible routes) a wrong kind is a 400, and an unknown model a 404, with the vendor
   * `param`/`code` hints.
   */
  field?: (string | number)[];
}

/**
 * A model string → the model and the runtime that serve it, weights checked, typed by kind. With `want`, the
 * runtime of that kind is required before anything is looked up, and the other kind is refused.
 */
export async function resolveServable(
  svc: Services,
  principal: Pick<Principal, 'team_id'>,
  model: string,
  opts: ServableOptions & { want: 'encoder' },
): Promise<ServableEncoder>;
export async function resolveServable(
  svc: Services,
  principal: Pick<Principal, 'team_id'>,
  model: string,
  opts: ServableOptions & { want: 'decoder' },
): Promise<ServableDecoder>;
export async function resolveServable(
  svc: Services,
  principal: Pick<Principal, 'team_id'>,
  model: string,
  opts?: ServableOptions,
): Promise<Servable>;
export async function resolveServable(
  svc: Services,
  principal: Pick<Principal, 'team_id'>,
  model: string,
  opts: ServableOptions = {},
): Promise<Servable> {
  const { want, field } = opts;
  if (want) requireRuntime(svc, want);
  let resolved: ResolvedModel;
  try {
    // a decoder's weights (and adapter support) are checked in resolveModel; extraction-only callers refuse a
    // decoder there, before it is looked up any further
    resolved = await resolveModel(svc, principal, model, { extraction: want === 'encoder' && field !== undefined });
  } catch (err) {
    if ((err as ApiError).status === 404 && !field) {
      (err as ApiError).param = 'model';
      (err as ApiError).code = 'model_not_found';
    }
    throw err;
  }
  if (want && resolved.type !== want) throw wrongKind(resolved, field);
  if (resolved.type === 'encoder') {
    const runtime = requireRuntime(svc, 'encoder');
    await ensureEncoderWeights(svc, resolved);
    return { kind: 'encoder', model: resolved, runtime };
  }
  return { kind: 'decoder', model: resolved, runtime: requireRuntime(svc, 'decoder') };
}

/** A model of the other kind than the caller can serve (a native extraction's decoder is refused in resolveModel). */
function wrongKind(resolved: ResolvedModel, field: (string | number)[] | undefined): ApiError {
  const model = resolved.requested;
  if (resolved.type === 'encoder') {
    const message = `'${model}' is an encoder (extraction) model: send a 'schema' field to extract, or use a decoder model to generate text`;
    return field
      ? ValidationError.field(field, message)
      : new BadRequestError(message, { param: 'model', code: 'model_not_generative' });
  }
  return new BadRequestError(`'schema' extraction needs an encoder model; '${model}' is a decoder`, {
    param: 'schema',
    code: 'invalid_value',
  });
}

/**
 * A model a team may choose as its default encoder (PATCH /team): one it can run — catalog, imported, or a
 * project or training job of its own with a deployment — that is an encoder; anything else is a 422 on `field`.
 */
export async function checkEncoderChoice(
  svc: Services,
  teamId: string,
  model: string,
  field: (string | number)[],
): Promise<void> {
  let kind: ModelKind;
  try {
    kind = (await resolveServingTarget(svc, teamId, model)).model.type;
  } catch (err) {
    const status = (err as ApiError).status;
    if (status === 404 || status === 409) throw ValidationError.field(field, (err as Error).message);
    throw err;
  }
  if (kind !== 'encoder') throw ValidationError.field(field, `'${model}' is a decoder model: choose an encoder`);
}

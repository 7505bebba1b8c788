/**
 * Extraction's side of the model resolver (models.ts resolveServable) and of the EncoderRuntime port (svc.encoder;
 * adapters/onnx/encoderRuntime.ts runs the engine).
 */
import type { Services } from '../context';
import { ensureEncoderWeights, requireRuntime, resolveModel, type ResolvedEncoder } from '../models';
import type { EncoderRuntime } from '../ports';

export type { ResolvedEncoder } from '../models';

/**
 * For workflows that only extract and may run the engine elsewhere (the labeller of the generation workflow forwards
 * to the encoder service on AWS): a catalog encoder id, a deployed training job id, or a project name/id, resolved
 * once, with its weights checked — no runtime attached (resolveServable attaches this process's).
 */
export async function resolveEncoderModel(svc: Services, teamId: string, model: string): Promise<ResolvedEncoder> {
  const resolved = (await resolveModel(svc, { team_id: teamId }, model, { extraction: true })) as ResolvedEncoder;
  await ensureEncoderWeights(svc, resolved);
  return resolved;
}

/** The process's encoder runtime (models.ts requireRuntime: a 503 where this deployment has none). */
export const encoderRuntime = (svc: Services): EncoderRuntime => requireRuntime(svc, 'encoder');

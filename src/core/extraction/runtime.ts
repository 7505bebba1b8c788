/**
 * Extraction's side of the model resolver (models.ts resolveServable) and of the EncoderRuntime port (svc.encoder;
 * adapters/onnx/encoderRuntime.ts runs the engine).
 */
import type { Services } from '../context';
import { ensureEncoderWeights, resolveModel, type ResolvedEncoder } from '../models';

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

/**
 * Extraction's side of the model resolver (models.ts) and of the EncoderRuntime port (svc.encoder;
 * adapters/onnx/encoderRuntime.ts runs the engine).
 */
import type { Services } from '../context';
import { ServiceUnavailableError } from '../errors';
import { ensureEncoderWeights, resolveModel, type ResolvedEncoder } from '../models';
import type { EncoderRuntime } from '../ports';

export type { ResolvedEncoder } from '../models';

/**
 * For callers that only extract (workflows, readiness): a catalog encoder id, a deployed training
 * job id, or a project name/id, resolved once, with its weights checked.
 */
export async function resolveEncoderModel(svc: Services, teamId: string, model: string): Promise<ResolvedEncoder> {
  const resolved = (await resolveModel(svc, { team_id: teamId }, model, { extraction: true })) as ResolvedEncoder;
  await ensureEncoderWeights(svc, resolved);
  return resolved;
}

/** The process's encoder runtime; a 503 where this deployment has none. */
export function encoderRuntime(svc: Services): EncoderRuntime {
  if (!svc.encoder) throw new ServiceUnavailableError('The encoder runtime is not available on this deployment');
  return svc.encoder;
}

/**
 * Models still being built on this installation (local mode: the background build `npm start`
 * launches, scripts/build-models.mjs). A catalog model without weights that is being built answers
 * 503 with `Retry-After` and the build's progress instead of a plain "not available".
 */
import type { Services } from './context';
import type { ModelBuildProgress } from './ports';
import { ServiceUnavailableError } from './errors';

/** One line a person can read: "training step 120/700, about 6 min left". */
export function describeBuild(p: ModelBuildProgress): string {
  if (p.state === 'failed')
    return `its build failed: ${p.error ?? 'no reason recorded'}${p.log ? ` (log: ${p.log})` : ''}`;
  if (p.state === 'pending')
    return `it is queued to be built (${p.stage === 'venv' ? 'installing the training venv first' : 'another model builds first'})`;
  const steps = p.step !== undefined && p.total ? `, step ${p.step}/${p.total}` : '';
  const eta = p.eta_seconds !== undefined ? `, about ${Math.max(1, Math.round(p.eta_seconds / 60))} min left` : '';
  return `it is being built (${p.stage ?? 'starting'}${steps}${eta})`;
}

/** Seconds a client should wait before asking again: the ETA while known, within [10 s, 5 min]. */
export const retryAfterSeconds = (p: ModelBuildProgress): number => Math.min(300, Math.max(10, p.eta_seconds ?? 60));

/**
 * The 503 for a catalog model whose weights are missing: with the build's progress and
 * `Retry-After` while it is being built, else `fallback` (nothing will bring the weights).
 */
export function missingWeightsError(svc: Services, modelId: string, fallback: string): ServiceUnavailableError {
  const p = svc.modelBuilds?.progress(modelId);
  if (!p) return new ServiceUnavailableError(fallback);
  const message = `Model '${modelId}' is not available yet: ${describeBuild(p)}`;
  return p.state === 'failed'
    ? new ServiceUnavailableError(message)
    : new ServiceUnavailableError(message, retryAfterSeconds(p));
}

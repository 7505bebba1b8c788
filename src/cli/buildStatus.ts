/** `sift models status` and the `serve` banner: the background venv and model build, one line per part. */
import { describeBuild } from '../core/modelBuild';
import { modelProgress, readBuildStatus } from '../local/modelBuild';

/** The build in `modelsDir`: its state and lines describing it (none when no build ever ran there). */
export async function buildStatus(modelsDir: string): Promise<{ state: string | undefined; lines: string[] }> {
  const status = await readBuildStatus(modelsDir);
  if (!status) return { state: undefined, lines: [] };
  const lines = [
    `model build: ${status.state}${status.error ? ` (${status.error})` : ''}${status.log ? `; log ${status.log}` : ''}`,
  ];
  if (status.venv)
    lines.push(
      `  training venv: ${status.venv.state === 'building' ? 'installing' : status.venv.state}${status.venv.error ? ` (${status.venv.error})` : ''}`,
    );
  for (const id of Object.keys(status.models ?? {})) {
    const p = modelProgress(status, id);
    lines.push(`  ${id}: ${p ? describeBuild(p).replace(/^it is |^its /, '') : 'built'}`);
  }
  return { state: status.state, lines };
}

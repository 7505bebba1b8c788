/**
 * The local server's view of the background build `npm start` launches (scripts/build-models.mjs):
 * it polls the build's status file, reports each unfinished model's progress (ModelBuildTracker),
 * calls `onBuilt` whenever another model is reported built (the server publishes it then, so
 * they become available without a restart), and treats a build whose process died while its status
 * still said `running` as failed.
 */
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { missingAsUndefined } from '../adapters/fs/missingFile';
import type { ModelBuildProgress, ModelBuildTracker } from '../core/ports';

/** What scripts/build-models.mjs writes to `<modelsDir>/.sift-build.json`. */
export interface BuildStatusFile {
  state: 'running' | 'done' | 'failed';
  pid: number;
  stage?: string;
  error?: string;
  log?: string;
  venv?: { state: 'building' | 'done' | 'failed'; error?: string };
  models?: Record<
    string,
    {
      state: 'pending' | 'building' | 'done' | 'failed';
      stage?: string;
      step?: number;
      total?: number;
      eta_seconds?: number;
      error?: string;
    }
  >;
}

export const buildStatusPath = (modelsDir: string) => join(modelsDir, '.sift-build.json');

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
};

/** The status file, with a crashed build (its process gone, the file still `running`) reported as failed. */
export async function readBuildStatus(modelsDir: string): Promise<BuildStatusFile | undefined> {
  const text = await readFile(buildStatusPath(modelsDir), 'utf8').catch(missingAsUndefined);
  if (text === undefined) return undefined;
  let status: BuildStatusFile;
  try {
    status = JSON.parse(text) as BuildStatusFile;
  } catch {
    return undefined; // never half-written (renamed into place); unparsable means not ours
  }
  if (status.state === 'running' && !alive(status.pid)) {
    status = {
      ...status,
      state: 'failed',
      error: `the build process (pid ${status.pid}) ended without finishing${status.log ? `; see ${status.log}` : ''}`,
    };
  }
  if (status.state !== 'running') {
    // a build that ended (stopped, crashed) leaves nothing pending: what it did not finish failed
    const error = status.error ?? 'the build ended without finishing';
    for (const m of Object.values(status.models ?? {}))
      if (m.state === 'pending' || m.state === 'building') Object.assign(m, { state: 'failed', error });
    if (status.venv?.state === 'building') status.venv = { state: 'failed', error };
  }
  return status;
}

/** A model's progress in a status file; undefined once built or when the build does not cover it. */
export function modelProgress(status: BuildStatusFile | undefined, modelId: string): ModelBuildProgress | undefined {
  const m = status?.models?.[modelId];
  if (!status || !m || m.state === 'done') return undefined;
  const log = status.log ? { log: status.log } : {};
  if (m.state === 'failed') return { state: 'failed', error: m.error ?? status.error ?? 'no reason recorded', ...log };
  if (m.state === 'pending')
    return {
      state: 'pending',
      ...(status.stage ? { stage: status.stage === 'venv' ? 'venv' : 'queued' } : {}),
      ...log,
    };
  const { state: _state, error: _error, ...rest } = m;
  return { state: 'building', ...rest, ...log };
}

/** The models a status file reports built, as one comparable string. */
const builtIds = (s: BuildStatusFile | undefined): string =>
  Object.entries(s?.models ?? {})
    .filter(([, m]) => m.state === 'done')
    .map(([id]) => id)
    .sort()
    .join();

export class ModelBuildWatcher implements ModelBuildTracker {
  private status: BuildStatusFile | undefined;
  private mtimeMs = -1;
  private timer: NodeJS.Timeout | undefined;
  private readonly waiters = new Set<() => void>();

  constructor(
    private readonly modelsDir: string,
    private readonly onBuilt: (status: BuildStatusFile) => Promise<void>,
    private readonly pollMs = 1000,
    private readonly onError: (error: Error) => void = () => {},
  ) {}

  /** Reads the file once (so the first requests see the build) and then polls it. */
  async start(): Promise<void> {
    await this.poll();
    this.timer = setInterval(() => void this.poll(), this.pollMs);
    this.timer.unref();
  }

  close(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    for (const wake of this.waiters) wake();
  }

  progress(modelId: string): ModelBuildProgress | undefined {
    return modelProgress(this.status, modelId);
  }

  async whenBuilt(modelIds: string[], signal?: AbortSignal): Promise<void> {
    for (;;) {
      signal?.throwIfAborted();
      const s = this.status;
      if (s?.venv?.state === 'failed')
        throw new Error(
          `the training venv could not be installed: ${s.venv.error ?? s.error ?? 'no reason recorded'}${s.log ? ` (log: ${s.log})` : ''}`,
        );
      const pending = modelIds.map((id) => [id, this.progress(id)] as const).filter(([, p]) => p !== undefined);
      const failed = pending.find(([, p]) => p?.state === 'failed');
      if (failed) throw new Error(`the build of ${failed[0]} failed: ${failed[1]?.error ?? 'no reason recorded'}`);
      const venvBuilding = s?.state === 'running' && s.venv?.state === 'building';
      if (!venvBuilding && pending.length === 0) return;
      if (!this.timer) throw new Error('the server is shutting down');
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          signal?.removeEventListener('abort', wake);
          resolve();
        };
        this.waiters.add(wake);
        signal?.addEventListener('abort', wake, { once: true });
      });
    }
  }

  private polling = false;

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      const info = await stat(buildStatusPath(this.modelsDir)).catch(missingAsUndefined);
      // a running build is re-read even when unchanged: its process may have died
      if (!info || (info.mtimeMs === this.mtimeMs && this.status?.state !== 'running')) return;
      this.mtimeMs = info.mtimeMs;
      const status = await readBuildStatus(this.modelsDir);
      if (!status) return;
      const changed = JSON.stringify(status) !== JSON.stringify(this.status);
      if (!changed) return;
      // publish first, so a model is in the store by the time it stops being reported as building;
      // only when a model finished (the file changes at every training step)
      try {
        if (builtIds(status) !== builtIds(this.status)) await this.onBuilt(status);
      } catch (err) {
        this.mtimeMs = -1; // try again at the next poll
        this.onError(err as Error);
        return;
      }
      this.status = status;
      for (const wake of [...this.waiters]) wake();
    } finally {
      this.polling = false;
    }
  }
}

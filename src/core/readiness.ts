/**
 * Readiness (load balancer target health, ECS): the stores answer and, where the process serves
 * the engine, the models named in `svc.config.preloadModels` (SIFT_PRELOAD_MODELS) are loaded — so a fresh task gets traffic
 * only once its first request won't pay the model load.
 */
import { baseModelManifestKey } from './modelLayout';
import { CATALOG } from './catalog';
import type { Services } from './context';
import { resolveServable } from './models';
import { describeBuild } from './modelBuild';
import type { ModelBuildProgress } from './ports';
import type { ExecutionProviderOutcome } from './extraction/types';

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, { ok: boolean; detail?: string; ms: number }>;
  /** Models this installation is still building (local first start), with their progress. */
  builds?: Record<string, ModelBuildProgress>;
}

async function check(name: string, report: ReadinessReport, fn: () => Promise<unknown>): Promise<void> {
  const started = performance.now();
  try {
    await fn();
    report.checks[name] = { ok: true, ms: Math.round(performance.now() - started) };
  } catch (err) {
    report.ready = false;
    report.checks[name] = {
      ok: false,
      detail: (err as Error).message.slice(0, 300),
      ms: Math.round(performance.now() - started),
    };
  }
}

/**
 * Where SIFT_REQUIRE_EXECUTION_PROVIDER names a provider (the GPU gateway task: `cuda`), sessions that
 * landed on another are a failed check, not a warning: a task that pays for a GPU and serves on CPU
 * leaves the load balancer and is counted for the alarm.
 */
function requireProvider(svc: Services, outcome: ExecutionProviderOutcome | undefined): void {
  const required = svc.config.requireExecutionProvider;
  if (!required || outcome?.used === required) return;
  svc.usageMetrics.providerFallback();
  // a runtime that cannot say where its sessions run is not shown to be on the required provider
  throw new Error(
    `encoder sessions run on ${outcome?.used ?? 'an unknown provider'}, not ${required} as SIFT_REQUIRE_EXECUTION_PROVIDER requires` +
      (outcome?.reason ? `: ${outcome.reason}` : ''),
  );
}

export async function readiness(svc: Services, models: string[] = svc.config.preloadModels): Promise<ReadinessReport> {
  const report: ReadinessReport = { ready: true, checks: {} };
  await Promise.all([
    check('records', report, () => svc.records.get('INSTALL', 'INSTALL')),
    check('blobs', report, () => svc.blobs.head('models/.readiness-probe')),
  ]);
  // local first start: not ready while the models `npm start` builds in the background are missing
  if (svc.modelBuilds) {
    for (const m of CATALOG) {
      const p = svc.modelBuilds.progress(m.id);
      if (!p) continue;
      // a blob store that cannot say whether the model is published is its own failed check, not a build in progress
      const published = await svc.blobs.head(baseModelManifestKey(m.id)).then(Boolean, (err: unknown) => {
        report.checks[`build:${m.id}`] = {
          ok: false,
          detail: `could not check the model store: ${(err as Error).message}`.slice(0, 300),
          ms: 0,
        };
        return undefined;
      });
      if (published) continue;
      report.ready = false;
      if (published === false) report.checks[`build:${m.id}`] = { ok: false, detail: describeBuild(p), ms: 0 };
      report.builds ??= {};
      report.builds[m.id] = p;
    }
  }
  const preloadedDirs = new Set<string>();
  for (const model of models) {
    await check(`model:${model}`, report, async () => {
      // catalog ids only: they need no team (preloading is an operator setting)
      const { runtime, model: resolved } = await resolveServable(svc, { team_id: '-' }, model, {
        want: 'encoder',
        field: ['body', 'model_id'],
      });
      const dir = await runtime.localDir(svc.blobs, resolved);
      preloadedDirs.add(dir);
      const loaded = await runtime.model(dir);
      requireProvider(svc, loaded.executionProvider);
    });
  }
  // models a request loaded (the ECS gateway preloads none by default): held to the same requirement
  const required = svc.config.requireExecutionProvider;
  const others = [...(svc.encoder?.executionProviders?.() ?? [])].filter(([dir]) => !preloadedDirs.has(dir));
  if (required && others.length > 0)
    await check('encoder-provider', report, async () => {
      for (const [, outcome] of others) requireProvider(svc, outcome);
    });
  return report;
}

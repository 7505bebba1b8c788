/**
 * `sift models pull <id>`: the checkpoint from the Hugging Face hub, then `importCheckpoint` — under the
 * hub id (a catalog encoder id provides that model's weights; any other `<org>/<name>` registers a model of
 * its own) or under `as`.
 *
 * Fails fast where no hub is reachable: HF_HUB_OFFLINE refuses at once, and one request with a short
 * timeout probes the hub before huggingface_hub (whose own retries can take minutes) downloads anything.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  checkRegistryOptions,
  importableModel,
  importCheckpoint,
  ModelImportError,
  runImportModule,
  type ImportOptions,
  type ImportResult,
} from './modelImport';

export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';
export const HUB_PROBE_TIMEOUT_MS = 10_000;

export interface PullOptions extends Omit<ImportOptions, 'checkpointDir' | 'modelId' | 'modelIdField'> {
  /** The hub repo. */
  modelId: string;
  /** The id to import it as (default: `modelId`). */
  as?: string | undefined;
  revision?: string | undefined;
  /** Default: HF_ENDPOINT, else https://huggingface.co (huggingface_hub reads the same variable). */
  hubEndpoint?: string | undefined;
  probeTimeoutMs?: number | undefined;
}

/** huggingface_hub's reading of a boolean environment variable. */
const truthy = (v: string | undefined) => ['1', 'true', 'yes', 'on'].includes((v ?? '').trim().toLowerCase());

/** One metadata request: resolves when the hub answers for the repo, else a ModelImportError saying why. */
export async function probeHub(modelId: string, endpoint: string, timeoutMs: number): Promise<void> {
  if (truthy(process.env.HF_HUB_OFFLINE)) {
    throw new ModelImportError(
      `HF_HUB_OFFLINE is set, so the Hugging Face hub is not used: download ${modelId} where the hub is reachable and run \`sift models import <dir> --as ${modelId}\``,
    );
  }
  const url = `${endpoint.replace(/\/+$/, '')}/api/models/${modelId}`;
  const token = process.env.HF_TOKEN;
  let res: Response;
  try {
    res = await fetch(url, {
      signal: AbortSignal.timeout(timeoutMs),
      ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
    });
  } catch (err) {
    const e = err as Error & { cause?: { code?: string; message?: string } };
    const why =
      e.name === 'TimeoutError'
        ? `no answer in ${timeoutMs / 1000} s`
        : (e.cause?.code ?? e.cause?.message ?? e.message);
    throw new ModelImportError(
      `the Hugging Face hub is not reachable at ${endpoint} (${why}): download ${modelId} where it is (e.g. \`hf download ${modelId} --local-dir <dir>\`) and run \`sift models import <dir> --as ${modelId}\``,
    );
  }
  if (res.status === 401 || res.status === 403)
    throw new ModelImportError(
      `the hub refused ${modelId} (HTTP ${res.status}): the repo is gated or private; set HF_TOKEN`,
    );
  if (res.status === 404) throw new ModelImportError(`the hub has no repo ${modelId} (HTTP 404)`);
  if (!res.ok) throw new ModelImportError(`the hub answered HTTP ${res.status} for ${url}`);
}

const HUB_REPO = /^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._-]*$/;

export async function pullModel(o: PullOptions): Promise<ImportResult> {
  // the name is checked before the hub is asked; the repo only has to be a hub id
  const catalog = o.as !== undefined ? importableModel(o.as, '--as') : importableModel(o.modelId, '<id>');
  checkRegistryOptions(o, catalog !== undefined);
  if (!HUB_REPO.test(o.modelId) || o.modelId.includes('..'))
    throw new ModelImportError(`<id>: '${o.modelId}' is not a Hugging Face hub repo id (<org>/<name>)`);
  const endpoint = o.hubEndpoint ?? process.env.HF_ENDPOINT ?? DEFAULT_HUB_ENDPOINT;
  await probeHub(o.modelId, endpoint, o.probeTimeoutMs ?? HUB_PROBE_TIMEOUT_MS);
  const say = o.onLine ?? (() => {});
  await mkdir(o.modelsDir, { recursive: true });
  const download = join(o.modelsDir, `.pulling-${process.pid}-${Date.now()}`);
  try {
    say(`${o.modelId}: downloading from ${endpoint}…`);
    const run = await runImportModule(
      ['download', '--repo', o.modelId, '--to', download, ...(o.revision ? ['--revision', o.revision] : [])],
      {
        python: o.python,
        trainerDir: o.trainerDir,
        env: { HF_ENDPOINT: endpoint, HF_HUB_OFFLINE: '0' },
      },
    );
    if (run.code !== 0)
      throw new ModelImportError(
        `downloading ${o.modelId} failed: ${run.last?.error ?? run.stderr.trim().split('\n').slice(-2).join(' | ')}`,
      );
    return await importCheckpoint({
      ...o,
      checkpointDir: download,
      modelId: o.as ?? o.modelId,
      modelIdField: o.as !== undefined ? '--as' : '<id>',
    });
  } finally {
    await rm(download, { recursive: true, force: true });
  }
}

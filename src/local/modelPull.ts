/**
 * `sift models pull <id>`: the checkpoint from the Hugging Face hub, then `importCheckpoint`.
 *
 * Fails fast where no hub is reachable: HF_HUB_OFFLINE refuses at once, and one request with a short
 * timeout probes the hub before huggingface_hub (whose own retries can take minutes) downloads anything.
 */
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import {
  importableModel,
  importCheckpoint,
  ModelImportError,
  runImportModule,
  type ImportOptions,
  type ImportResult,
} from './modelImport';

export const DEFAULT_HUB_ENDPOINT = 'https://huggingface.co';
export const HUB_PROBE_TIMEOUT_MS = 10_000;

export interface PullOptions extends Omit<ImportOptions, 'checkpointDir' | 'modelId'> {
  modelId: string;
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

export async function pullModel(o: PullOptions): Promise<ImportResult> {
  importableModel(o.modelId);
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
    return await importCheckpoint({ ...o, checkpointDir: download, modelId: o.modelId });
  } finally {
    await rm(download, { recursive: true, force: true });
  }
}

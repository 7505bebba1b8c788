/**
 * `sift models import <dir>`: a GLiNER2 checkpoint (as the `gliner2` library or the Hugging Face hub
 * saves it) → Sift's served model directory in the local models dir (`<vendor>--<name>/`, which local
 * start publishes into the model store), accepted only when the TS engine on the export answers the
 * parity cases as the Python library does on the checkpoint.
 *
 * Under a catalog encoder id it provides that catalog model's weights; under any other `<org>/<name>`
 * (src/core/modelRegistry.ts `checkImportName`) it is a model of its own: the manifest gets a `registry`
 * entry (architecture, backbone, parameters, bytes, languages, optionally the one team it is private to),
 * which registers it wherever the directory is published (local start, `sift models publish`).
 *
 * The conversion is containers/training `sift_trainer.export.import_checkpoint` (export/export_onnx.py's fragments)
 * run in the trainer venv; it writes into a staging directory beside the target, and the directory
 * is renamed into place only after parity passes, so a refused import leaves nothing behind.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { missingAsUndefined } from '../adapters/fs/missingFile';
import { CATALOG, type BaseModel } from '../core/catalog';
import {
  checkImportName,
  languageProblem,
  ModelNameError,
  SERVABLE_ARCHITECTURES,
  type RegistryEntry,
} from '../core/modelRegistry';
import { EncoderModel } from '../encoder/engine';
import { createLogger } from '../http/logger';
import { canonResult, compareCanon, type CanonResult } from '../encoder/parity';
import { MANIFEST_FILE, modelDirName, modelIdFromDirName } from '../core/modelLayout';
import { IMPORT_PARITY_CASES, type ParityCase } from './importParityCases';
import { DEFAULT_PYTHON, REPO_ROOT } from '../paths';

/** Scores must agree this closely (as bench/parity/encoder-parity.ts reports them), and every span and label must match. */
export const IMPORT_PARITY_TOLERANCE = 1e-4;

export class ModelImportError extends Error {}

export interface ImportOptions {
  checkpointDir: string;
  /** The id to import as (a catalog encoder id, or `<org>/<name>` of its own); default: read from the checkpoint (`modelIdFromCheckpoint`). */
  modelId?: string | undefined;
  /** Where `modelId` came from, for refusals (`--as`, `<id>`). */
  modelIdField?: string | undefined;
  /** A model of its own: the languages it handles (ISO 639-1, or `multi`); unknown when absent. */
  languages?: readonly string[] | undefined;
  description?: string | undefined;
  /** A model of its own, private to this team (its id): only that team lists, serves and trains it. */
  teamId?: string | undefined;
  modelsDir: string;
  /** Replace a model directory that is already there. */
  force?: boolean | undefined;
  python?: string | undefined;
  trainerDir?: string | undefined;
  tolerance?: number | undefined;
  cases?: readonly ParityCase[] | undefined;
  /** Progress lines (stages of the conversion, the parity verdict). */
  onLine?: ((line: string) => void) | undefined;
}

export interface ImportResult {
  modelId: string;
  /** A model under its own name: what its manifest registers (src/core/modelRegistry.ts). */
  registry?: RegistryEntry;
  dir: string;
  parity: { cases: number; texts: number; items: number; maxDiff: number; tolerance: number };
  seconds: number;
}

/**
 * The catalog encoder `id` provides weights for, or undefined for a model under a name of its own
 * (src/core/modelRegistry.ts `checkImportName`: a safe `<org>/<name>`, no catalog id of another family).
 */
export function importableModel(id: string, field = '--as'): BaseModel | undefined {
  try {
    return checkImportName(id, field);
  } catch (err) {
    if (err instanceof ModelNameError) throw new ModelImportError(err.message);
    throw err;
  }
}

const TEAM_ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** The registry options, checked before minutes of conversion. */
export function checkRegistryOptions(o: Pick<ImportOptions, 'languages' | 'description' | 'teamId'>, catalog: boolean) {
  if (catalog && (o.languages?.length || o.description !== undefined || o.teamId !== undefined))
    throw new ModelImportError(
      '--language, --description and --team describe a model imported under its own name; a catalog id keeps its catalog entry',
    );
  for (const code of o.languages ?? []) {
    const problem = languageProblem(code);
    if (problem) throw new ModelImportError(`--language: ${problem}`);
  }
  if (o.description !== undefined && (o.description.length === 0 || o.description.length > 300))
    throw new ModelImportError('--description: 1 to 300 characters');
  if (o.teamId !== undefined && !TEAM_ID.test(o.teamId))
    throw new ModelImportError(`--team: '${o.teamId}' is not a team id (the operator's GET /teams lists them)`);
}

/** Bytes of the files a model directory publishes (all but the manifest). */
async function publishedBytes(dir: string): Promise<number> {
  let total = 0;
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile() || (e.parentPath === dir && e.name === MANIFEST_FILE)) continue;
    total += (await stat(join(e.parentPath, e.name))).size;
  }
  return total;
}

/** The id a checkpoint names: a Sift manifest's `model_id`, a hub cache path (`models--<vendor>--<name>/snapshots/…`), or a `<vendor>--<name>` directory. */
export async function modelIdFromCheckpoint(dir: string): Promise<string | undefined> {
  const manifest = await readFile(join(dir, MANIFEST_FILE), 'utf8').catch(missingAsUndefined);
  if (manifest) {
    const id = (JSON.parse(manifest) as { model_id?: unknown }).model_id;
    if (typeof id === 'string') return id;
  }
  const hub = /models--([^/]+?)--([^/]+)\/snapshots\//.exec(`${resolve(dir)}/`);
  if (hub) return `${hub[1]}/${hub[2]}`;
  const name = basename(resolve(dir));
  return name.includes('--') ? modelIdFromDirName(name) : undefined;
}

interface TrainerEvent {
  event: string;
  error?: string;
  stage?: string;
  seconds?: number;
}

/** Runs `python -m sift_trainer.export.import_checkpoint …`; resolves with its last event and a tail of stderr. */
export function runImportModule(
  args: string[],
  o: {
    python?: string | undefined;
    trainerDir?: string | undefined;
    env?: Record<string, string>;
    onEvent?: (e: TrainerEvent) => void;
  },
): Promise<{ code: number | null; last?: TrainerEvent; stderr: string }> {
  const python = o.python ?? DEFAULT_PYTHON;
  if (!existsSync(python))
    return Promise.reject(
      new ModelImportError(
        `the trainer's Python is not at ${python} (run \`node scripts/setup.mjs\`, or set SIFT_PYTHON)`,
      ),
    );
  return new Promise((ok, fail) => {
    const child = spawn(python, ['-m', 'sift_trainer.export.import_checkpoint', ...args], {
      cwd: o.trainerDir ?? join(REPO_ROOT, 'containers', 'training'),
      env: { ...process.env, PYTHONUNBUFFERED: '1', TOKENIZERS_PARALLELISM: 'false', ...o.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let last: TrainerEvent | undefined;
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr = (stderr + b.toString('utf8')).slice(-4000)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      try {
        last = JSON.parse(line) as TrainerEvent;
        o.onEvent?.(last);
      } catch {
        // not an event line
      }
    });
    child.on('error', fail);
    child.on('close', (code) => ok({ code, ...(last ? { last } : {}), stderr }));
  });
}

/** TS engine vs the Python library's answers on every case. */
async function checkParity(
  dir: string,
  cases: readonly ParityCase[],
  reference: Array<{ name: string; results: CanonResult[] }>,
  tolerance: number,
) {
  const model = await EncoderModel.load(dir, { logger: createLogger() });
  try {
    let items = 0;
    let maxDiff = 0;
    const mismatches: string[] = [];
    for (const [ci, c] of cases.entries()) {
      const out = await model.infer(c.texts, c.schema, {
        threshold: c.threshold,
        batchSize: 8,
        ...(c.chunk_words ? { chunkWords: c.chunk_words, chunkOverlap: c.chunk_overlap } : {}),
      });
      out.results.forEach((r, ti) => {
        const report = compareCanon(
          canonResult(r, c.schema),
          reference[ci]?.results[ti] ?? {},
          tolerance,
          `[${c.name} #${ti}] `,
        );
        items += report.items;
        maxDiff = Math.max(maxDiff, report.maxDiff);
        mismatches.push(...report.mismatches);
      });
    }
    return { items, maxDiff, mismatches };
  } finally {
    await model.release();
  }
}

export async function importCheckpoint(o: ImportOptions): Promise<ImportResult> {
  const t0 = performance.now();
  const say = o.onLine ?? (() => {});
  const checkpointDir = resolve(o.checkpointDir);
  if (!existsSync(checkpointDir)) throw new ModelImportError(`checkpoint directory ${checkpointDir} does not exist`);
  const modelId = o.modelId ?? (await modelIdFromCheckpoint(checkpointDir));
  if (!modelId)
    throw new ModelImportError(
      `cannot tell which model ${checkpointDir} is: pass --as <org>/<name> (a name of your own, or a catalog id to provide its weights: ${CATALOG.filter(
        (m) => m.type === 'encoder',
      )
        .map((m) => m.id)
        .join(', ')})`,
    );
  const catalog = importableModel(
    modelId,
    o.modelId ? (o.modelIdField ?? '--as') : `the id read from ${checkpointDir}`,
  );
  checkRegistryOptions(o, catalog !== undefined);
  const target = join(o.modelsDir, modelDirName(modelId));
  if (existsSync(target) && !o.force)
    throw new ModelImportError(`${target} already exists; pass --force to replace ${modelId}'s weights`);
  const cases = o.cases ?? IMPORT_PARITY_CASES;
  const tolerance = o.tolerance ?? IMPORT_PARITY_TOLERANCE;

  await mkdir(o.modelsDir, { recursive: true });
  // beside the target (same file system, so the final rename is atomic); no `--`, so never taken for a model
  const staging = join(o.modelsDir, `.importing-${process.pid}-${Date.now()}`);
  const work = await mkdtemp(join(tmpdir(), 'sift-import-'));
  try {
    await writeFile(join(work, 'cases.json'), JSON.stringify(cases));
    say(`${modelId}: converting ${checkpointDir} (gliner2 → ONNX fragments)…`);
    const run = await runImportModule(
      [
        'convert',
        '--checkpoint',
        checkpointDir,
        '--out',
        staging,
        '--model-id',
        modelId,
        '--cases',
        join(work, 'cases.json'),
        '--reference',
        join(work, 'reference.json'),
      ],
      {
        python: o.python,
        trainerDir: o.trainerDir,
        env: { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' },
        onEvent: (e) => e.event === 'import_stage' && say(`  ${e.stage} (${e.seconds ?? '?'} s)`),
      },
    );
    if (run.code !== 0) {
      const why =
        run.last?.event === 'import_failed' && run.last.error
          ? run.last.error
          : `the converter exited with ${run.code}: ${run.stderr.trim().split('\n').slice(-3).join(' | ')}`;
      throw new ModelImportError(`refused ${checkpointDir}: ${why}`);
    }
    const reference = JSON.parse(await readFile(join(work, 'reference.json'), 'utf8')) as Array<{
      name: string;
      results: CanonResult[];
    }>;
    const parity = await checkParity(staging, cases, reference, tolerance);
    if (parity.mismatches.length) {
      const shown = parity.mismatches
        .slice(0, 8)
        .map((m) => `  ${m}`)
        .join('\n');
      throw new ModelImportError(
        `refused ${checkpointDir}: the TS engine on the export disagrees with the gliner2 library on the checkpoint (${parity.mismatches.length} of ${parity.items} items beyond ${tolerance}); nothing was published:\n${shown}`,
      );
    }
    const texts = cases.reduce((n, c) => n + c.texts.length, 0);
    const summary = { cases: cases.length, texts, items: parity.items, maxDiff: parity.maxDiff, tolerance };
    say(
      `  parity: ${parity.items} spans/labels on ${texts} texts identical, max |Δscore| ${parity.maxDiff.toExponential(2)} (≤ ${tolerance})`,
    );
    // the verdict travels with the weights, and so does a model's own registry entry
    const manifest = JSON.parse(await readFile(join(staging, MANIFEST_FILE), 'utf8')) as Record<string, unknown>;
    const registry = catalog ? undefined : await registryEntry(staging, manifest, o);
    await writeFile(
      join(staging, MANIFEST_FILE),
      JSON.stringify(
        {
          ...manifest,
          import_parity: { ...summary, engine: 'onnxruntime-node fp32', reference: 'gliner2 (PyTorch, CPU)' },
          ...(registry ? { registry } : {}),
        },
        null,
        2,
      ),
    );
    if (registry)
      say(
        `  registered as ${modelId}: ${registry.architecture}${registry.backbone ? ` (${registry.backbone})` : ''}, ${registry.parameter_count ?? '?'} parameters, ${registry.size_bytes} bytes${registry.team_id ? `, private to team ${registry.team_id}` : ''}`,
      );
    if (existsSync(target)) {
      const old = `${staging}.replaced`;
      await rename(target, old);
      await rename(staging, target);
      await rm(old, { recursive: true, force: true });
    } else await rename(staging, target);
    return {
      modelId,
      dir: target,
      parity: summary,
      seconds: (performance.now() - t0) / 1000,
      ...(registry ? { registry } : {}),
    };
  } finally {
    await rm(staging, { recursive: true, force: true });
    await rm(work, { recursive: true, force: true });
  }
}

/** A model of its own's registry entry, from the converter's manifest and the options. */
async function registryEntry(
  dir: string,
  manifest: Record<string, unknown>,
  o: Pick<ImportOptions, 'languages' | 'description' | 'teamId'>,
): Promise<RegistryEntry> {
  const architecture = manifest.architecture;
  if (!(SERVABLE_ARCHITECTURES as readonly unknown[]).includes(architecture))
    throw new ModelImportError(
      `the converter wrote architecture ${JSON.stringify(architecture)}, which the engine does not serve (${SERVABLE_ARCHITECTURES.join(', ')})`,
    );
  const backbone = (manifest.backbone as { model_type?: unknown } | undefined)?.model_type;
  const parameters = (manifest.architecture_details as { parameters?: unknown } | undefined)?.parameters;
  return {
    source: 'imported',
    architecture: architecture as string,
    ...(typeof backbone === 'string' ? { backbone } : {}),
    ...(typeof parameters === 'number' && parameters > 0 ? { parameter_count: parameters } : {}),
    size_bytes: await publishedBytes(dir),
    languages: [...new Set(o.languages ?? [])],
    ...(o.description !== undefined ? { description: o.description } : {}),
    ...(o.teamId !== undefined ? { team_id: o.teamId } : {}),
  };
}

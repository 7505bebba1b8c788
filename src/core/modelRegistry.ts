/**
 * Models under their own names: the catalog (catalog.ts) plus the GLiNER2 encoders an operator imported under an
 * `<org>/<name>` of their own (`sift models import <dir> --as acme/support-ner`, `sift models pull <hub id>`).
 *
 * An imported model is registered by its manifest in the model store: `models/<org>/<name>/manifest.json` with a
 * `registry` entry (`source: "imported"`, architecture, size, languages where known, optionally the one team it is
 * private to). The publisher (src/adapters/modelPublisher.ts) writes a manifest last, once every file it names is
 * in the store, so a model is registered exactly when its weights are all there — locally (local start publishes
 * the models dir) and in a deployed bucket (`sift models publish`) alike — and removing the prefix unregisters it.
 * Nothing else is stored: SageMaker's `model` channel and the runtimes' caches read that prefix as they read a
 * catalog model's. No HTTP route writes the registry; importing is the operator's CLI.
 *
 * The catalog comes first: an imported entry can never shadow a catalog id (an import under a catalog encoder id
 * provides that catalog model's weights, and carries no registry entry).
 */
import { CATALOG, ENCODER_TASKS, findBaseModel, type BaseModel, type ModelTask } from './catalog';
import type { Services } from './context';
import { baseModelManifestKey, MANIFEST_FILE } from './modelLayout';
import { BUCKET_PREFIXES } from './storageLayout';

/** The architectures the engine serves: GLiNER2's span extractor (the converter refuses the others). */
export const SERVABLE_ARCHITECTURES = ['gliner2-span', 'gliner2-boundary'] as const;

/** Longest `<org>` and `<name>` (the Hugging Face hub's limit is 96 for the whole id's parts). */
export const MAX_ORG_CHARS = 64;
export const MAX_NAME_CHARS = 96;
const PART = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** An id refused as a model name; `field` is where it came from (`--as`, `<id>`, a manifest's `model_id`). */
export class ModelNameError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** Why `id` cannot be an imported model's name (undefined: it can). Checked before any store key is built from it. */
function nameProblem(id: string): string | undefined {
  const parts = id.split('/');
  const rule = `a model name is <org>/<name>: letters, digits, '.', '_' and '-', each part starting with a letter or digit, at most ${MAX_ORG_CHARS} and ${MAX_NAME_CHARS} characters, without '--' or '..'`;
  if (parts.length !== 2) return `'${id}' is not of the form <org>/<name>; ${rule}`;
  const [org = '', name = ''] = parts;
  if (!PART.test(org) || !PART.test(name) || id.includes('--') || id.includes('..'))
    return `'${id}' has characters a model name cannot hold; ${rule}`;
  if (org.length > MAX_ORG_CHARS || name.length > MAX_NAME_CHARS) return `'${id}' is too long; ${rule}`;
  return undefined;
}

/** The catalog model `id` names but for letter case: no imported model may be told apart from it by case alone. */
const catalogCaseClash = (id: string) => CATALOG.find((m) => m.id.toLowerCase() === id.toLowerCase());

/** Whether `id` has the shape of an imported model's name (no store is asked for anything else). */
export const isModelName = (id: string) => nameProblem(id) === undefined;

/**
 * The rules for importing under `id`: a catalog encoder id provides that catalog model's weights (returned); any
 * other id must be a safe `<org>/<name>` that is not a catalog id of another family nor one differing from a
 * catalog id only in case (undefined: a model of its own). Throws `ModelNameError` naming `field`.
 */
export function checkImportName(id: string, field: string): BaseModel | undefined {
  const catalog = findBaseModel(id);
  if (catalog) {
    if (catalog.type !== 'encoder')
      throw new ModelNameError(
        field,
        `'${id}' is the catalog's ${catalog.type} model; only GLiNER2 encoders are imported, under a catalog encoder id or a name of your own`,
      );
    return catalog;
  }
  const problem = nameProblem(id);
  if (problem) throw new ModelNameError(field, problem);
  const clash = catalogCaseClash(id);
  if (clash)
    throw new ModelNameError(
      field,
      `'${id}' differs from the catalog's '${clash.id}' only in case; import as '${clash.id}' to provide its weights, or choose another name`,
    );
  return undefined;
}

/** What an imported model's manifest says of it (`registry` in manifest.json). */
export interface RegistryEntry {
  source: 'imported';
  /** The served architecture (`SERVABLE_ARCHITECTURES`). */
  architecture: string;
  /** The backbone's `model_type` (encoder_config/config.json): `bert`, `deberta-v2`, … */
  backbone?: string;
  parameter_count?: number;
  /** Bytes of the model's files in the store. */
  size_bytes?: number;
  /** ISO 639-1 codes, or `multi`; empty when unknown. */
  languages: string[];
  description?: string;
  /** Set for a model private to one team: only that team sees, serves and trains it. */
  team_id?: string;
}

const LANGUAGE = /^(?:[a-z]{2,3}|multi)$/;

/** Why a `--language` code is refused (undefined: accepted). */
export const languageProblem = (code: string) =>
  LANGUAGE.test(code) ? undefined : `'${code}' is not a language code (ISO 639-1 such as 'en', or 'multi')`;

/** The manifest's `registry` entry, when it is a well-formed one for an architecture the engine serves. */
export function readRegistryEntry(manifest: unknown): RegistryEntry | undefined {
  const r = (manifest as { registry?: unknown } | null)?.registry as Record<string, unknown> | undefined;
  if (!r || typeof r !== 'object' || r.source !== 'imported') return undefined;
  if (!(SERVABLE_ARCHITECTURES as readonly unknown[]).includes(r.architecture)) return undefined;
  const count = (v: unknown) => (typeof v === 'number' && Number.isSafeInteger(v) && v > 0 ? v : undefined);
  const text = (v: unknown, max: number) => (typeof v === 'string' && v.length > 0 && v.length <= max ? v : undefined);
  const languages = Array.isArray(r.languages)
    ? r.languages.filter((l): l is string => typeof l === 'string' && !languageProblem(l))
    : [];
  const entry: RegistryEntry = { source: 'imported', architecture: r.architecture as string, languages };
  const backbone = text(r.backbone, 64);
  const parameters = count(r.parameter_count);
  const bytes = count(r.size_bytes);
  const description = text(r.description, 300);
  const team = text(r.team_id, 64);
  if (backbone) entry.backbone = backbone;
  if (parameters) entry.parameter_count = parameters;
  if (bytes) entry.size_bytes = bytes;
  if (description) entry.description = description;
  if (team) entry.team_id = team;
  return entry;
}

/** `22713216` → `23M`, as the catalog writes sizes. */
export function formatParameters(n: number | undefined): string {
  if (!n) return 'unknown';
  if (n >= 1e9) return `${Number((n / 1e9).toPrecision(2))}B`;
  if (n >= 1e6) return `${Math.round(n / 1e6)}M`;
  return `${Math.round(n / 1e3)}K`;
}

/**
 * Full fine-tuning's default rate by size, as the catalog's encoders have it (mini 1e-4, base 5e-5, large 3e-5);
 * LoRA's is `defaultLearningRate`'s, the same for every encoder.
 */
export function importedLearningRate(parameters: number | undefined): number {
  if (parameters !== undefined && parameters < 100e6) return 1e-4;
  if (parameters === undefined || parameters < 300e6) return 5e-5;
  return 3e-5;
}

/** An imported model as GET /base-models lists it and training resolves it: a GLiNER2 encoder with every head. */
export function importedBaseModel(id: string, entry: RegistryEntry): BaseModel {
  const backbone = entry.backbone ? ` on a ${entry.backbone} backbone` : '';
  return {
    id,
    type: 'encoder',
    description: entry.description ?? `Imported GLiNER2 model (${entry.architecture}${backbone})`,
    languages: entry.languages,
    parameters: formatParameters(entry.parameter_count),
    tasks: [...ENCODER_TASKS] as ModelTask[],
    supports_training: true,
    training_types: ['lora', 'full'],
    training_algorithms: ['sft'],
    default_hyperparameters: { nr_epochs: 10, learning_rate: importedLearningRate(entry.parameter_count) },
    max_input_tokens: 2048,
    source: 'imported',
    architecture: entry.architecture,
    ...(entry.backbone ? { backbone: entry.backbone } : {}),
    ...(entry.parameter_count ? { parameter_count: entry.parameter_count } : {}),
    ...(entry.size_bytes ? { size_bytes: entry.size_bytes } : {}),
    ...(entry.team_id ? { team_id: entry.team_id } : {}),
  };
}

/** The imported model registered under `id` in the model store, whoever it is private to. */
async function readImported(svc: Services, id: string): Promise<BaseModel | undefined> {
  const cached = svc.hotPath?.importedModels.get(id);
  if (cached) return cached;
  const key = baseModelManifestKey(id);
  if (!(await svc.blobs.head(key))) return undefined;
  let manifest: unknown;
  try {
    manifest = JSON.parse(await svc.blobs.getText(key));
  } catch (err) {
    if (err instanceof SyntaxError) return undefined;
    if ((err as { name?: string }).name === 'NoSuchKey') return undefined; // withdrawn meanwhile (a re-publish)
    throw err;
  }
  const entry = readRegistryEntry(manifest);
  if (!entry || (manifest as { model_id?: unknown }).model_id !== id) return undefined;
  const model = importedBaseModel(id, entry);
  // its manifest is the registration: the weights are in the store too (models.ts ensureEncoderWeights)
  svc.hotPath?.importedModels.set(id, model);
  svc.hotPath?.storedWeights.set(key, true);
  return model;
}

const visibleTo = (model: BaseModel, teamId: string | null) => !model.team_id || model.team_id === teamId;

/**
 * A base model by id, as `teamId` may use it: a catalog model, else an imported one registered in the model store
 * (public, or private to that team). Ids that cannot be model names never reach the store. `teamId` null: only
 * public models (an operator setting such as SIFT_PRELOAD_MODELS, the public model list).
 */
export async function findModel(svc: Services, id: string, teamId: string | null): Promise<BaseModel | undefined> {
  const catalog = findBaseModel(id);
  if (catalog) return catalog;
  if (!isModelName(id) || catalogCaseClash(id)) return undefined;
  const model = await readImported(svc, id);
  return model && visibleTo(model, teamId) ? model : undefined;
}

const MANIFEST_KEY = new RegExp(`^${BUCKET_PREFIXES.models}([^/]+/[^/]+)/${MANIFEST_FILE.replace('.', '\\.')}$`);

/** Every imported model registered in the model store that `teamId` may use, by id. */
export async function listImportedModels(svc: Services, teamId: string | null): Promise<BaseModel[]> {
  const ids = (await svc.blobs.list(BUCKET_PREFIXES.models))
    .map((key) => MANIFEST_KEY.exec(key)?.[1])
    .filter((id): id is string => id !== undefined && !findBaseModel(id) && isModelName(id))
    .sort();
  const models = await Promise.all(ids.map((id) => findModel(svc, id, teamId)));
  return models.filter((m): m is BaseModel => m !== undefined);
}

/**
 * GET /base-models: the catalog, then the imported models `teamId` may use. A catalog model's weights are present
 * when its manifest is in the model store (`baseModelManifestKey`); an imported model is listed only then.
 */
export async function listBaseModels(
  svc: Services,
  filter: { task_type?: string | undefined; supports_training?: boolean | undefined },
  teamId: string | null,
) {
  const keep = (m: BaseModel) => {
    if (filter.task_type && m.type !== filter.task_type && !m.tasks.includes(filter.task_type as ModelTask))
      return false;
    if (filter.supports_training !== undefined && m.supports_training !== filter.supports_training) return false;
    return true;
  };
  const models = CATALOG.filter(keep);
  const available = await Promise.all(
    models.map(async (m) => (await svc.blobs.head(baseModelManifestKey(m.id))) !== undefined),
  );
  const catalog = models.map((m, i) => {
    // a model without weights that this installation is building says how far the build is
    const build = available[i] ? undefined : svc.modelBuilds?.progress(m.id);
    return {
      ...m,
      source: 'catalog' as const,
      task_type: m.type,
      available: available[i] ?? false,
      ...(build ? { build } : {}),
    };
  });
  const imported = (await listImportedModels(svc, teamId)).filter(keep).map(({ team_id, ...m }) => ({
    ...m,
    private: team_id !== undefined,
    task_type: m.type,
    available: true,
  }));
  return [...catalog, ...imported];
}

/**
 * Where base-model weights live, on disk and in the bucket — one definition shared by local start,
 * `sift models publish`, the serving runtimes and SageMaker's `model` channel.
 *
 * - On disk (set-up builds, operator downloads): `<modelsDir>/<vendor>--<name>/`, holding a
 *   `manifest.json` (format `sift-model/1`: `model_id`, `files`).
 * - In the bucket: `models/<vendor>/<name>/<same relative paths>`; the manifest is written last,
 *   so its presence means every file is there (the catalog's `available`).
 */
import { BUCKET_PREFIXES } from './storageLayout';

export const MANIFEST_FILE = 'manifest.json';

/** `sift/gliner2-mini-v1` → `sift--gliner2-mini-v1`: one directory per model in a models dir. */
export const modelDirName = (id: string) => id.replace('/', '--');

/** `sift--gliner2-mini-v1` → `sift/gliner2-mini-v1` (the first `--` separates vendor and name). */
export const modelIdFromDirName = (name: string) => name.replace('--', '/');

/** The bucket prefix of a base model's weights; SageMaker's `model` channel reads exactly this. */
export const baseModelPrefix = (id: string, root: string = BUCKET_PREFIXES.models) => `${root}${id}/`;

/** A base model's directory name in a local weights cache (`models/<id>`), mirroring its bucket prefix. */
export const baseModelCacheName = (id: string) => `${BUCKET_PREFIXES.models}${id}`;

export const baseModelManifestKey = (id: string, root?: string) => `${baseModelPrefix(id, root)}${MANIFEST_FILE}`;

/** Files of a model directory that are never published: the manifest (written last) and lock files. */
export const isUnpublishedFile = (relPath: string) => relPath === MANIFEST_FILE || relPath.endsWith('.lock');

/**
 * Publishes base-model directories (src/core/modelLayout.ts) into a bucket's model store: the one
 * implementation behind local start-up and `sift models publish`. A directory holds a catalog model, or a
 * model imported under its own name, whose manifest's `registry` entry registers it once the manifest lands
 * (src/core/modelRegistry.ts).
 *
 * - Idempotent: each object carries its sha256 in metadata; an object with the same size and
 *   sha256 is not uploaded again. (The ETag can't serve: under SSE-KMS it is not the MD5.)
 * - Resumable: files are uploaded one by one, so an interrupted run leaves whole objects that the
 *   next run skips.
 * - Never half-visible: an out-of-date manifest is withdrawn before any file changes, and the new
 *   one is written only after every file it names is verified in the bucket.
 *
 * Uploads are single PutObject requests (no @aws-sdk/lib-storage in this repo), so one file may be
 * at most 5 GiB; larger files are refused before anything is uploaded.
 */
import { DeleteObjectCommand, HeadObjectCommand, PutObjectCommand } from '@aws-sdk/client-s3';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readdir, readFile, stat } from 'node:fs/promises';
import { basename, join, relative, sep } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { CATALOG, findBaseModel } from '../core/catalog';
import {
  checkImportName,
  isModelName,
  ModelNameError,
  readRegistryEntry,
  SERVABLE_ARCHITECTURES,
} from '../core/modelRegistry';
import {
  baseModelPrefix,
  isUnpublishedFile,
  MANIFEST_FILE,
  modelDirName,
  modelIdFromDirName,
} from '../core/modelLayout';
import { BUCKET_PREFIXES } from '../core/storageLayout';
import { missingAsUndefined } from './fs/missingFile';
import type { S3BlobStore } from './s3/blobStore';

/** S3's limit for one PutObject: https://docs.aws.amazon.com/AmazonS3/latest/userguide/upload-objects.html */
export const MAX_SINGLE_PUT_BYTES = 5 * 1024 ** 3;
const LARGE_FILE_BYTES = 64 * 1024 ** 2;
const SHA256_METADATA = 'sha256';

export type PublishEvent =
  | { type: 'model'; modelId: string; dir: string; files: number; bytes: number }
  /** `uploading` only before a large file (≥ 64 MiB), so a long upload is not silent. */
  | { type: 'file'; modelId: string; key: string; bytes: number; action: 'uploading' | 'uploaded' | 'unchanged' }
  | { type: 'withdrawn'; modelId: string; key: string }
  | { type: 'done'; modelId: string; uploaded: number; unchanged: number; manifest: 'written' | 'unchanged' };

export interface PublishOptions {
  /** Bucket prefix of the model store (default `models/`, what the service and SageMaker read). */
  root?: string;
  onEvent?: (e: PublishEvent) => void;
  signal?: AbortSignal;
  /**
   * Skip a model outright when the bucket's manifest has the same bytes (local start-up: the
   * manifest is written last, so the files are there). Off for `sift models publish`, which
   * checks every file.
   */
  trustManifest?: boolean;
}

export interface PublishResult {
  modelId: string;
  uploaded: number;
  unchanged: number;
  manifest: 'written' | 'unchanged';
}

export class ModelPublishError extends Error {}

interface LocalFile {
  path: string;
  rel: string;
  size: number;
}

/** Files under `dir`, following symbolic links (hub downloads often link into a blob cache). */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map(async (e) => {
      const path = join(dir, e.name);
      const info = e.isSymbolicLink() ? await stat(path) : e;
      return info.isDirectory() ? filesUnder(path) : info.isFile() ? [path] : [];
    }),
  );
  return nested.flat();
}

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return hash.digest('hex');
}

/**
 * The model id a model directory holds: its manifest's `model_id`, which must agree with the directory name, and
 * be a catalog id or a model imported under its own name (a valid name, and a `registry` entry in the manifest).
 */
export async function readModelDir(dir: string): Promise<{ modelId: string; manifest: Buffer; listed: string[] }> {
  const manifest = await readFile(join(dir, MANIFEST_FILE)).catch(missingAsUndefined);
  if (!manifest)
    throw new ModelPublishError(
      `${dir} has no ${MANIFEST_FILE}: not a model directory (expected <vendor>--<name>/ with a manifest, as set-up builds them)`,
    );
  let parsed: { model_id?: unknown; files?: unknown };
  try {
    parsed = JSON.parse(manifest.toString('utf8')) as typeof parsed;
  } catch (err) {
    throw new ModelPublishError(`${join(dir, MANIFEST_FILE)} is not valid JSON: ${(err as Error).message}`);
  }
  const fromName = modelIdFromDirName(basename(dir));
  const modelId = typeof parsed.model_id === 'string' ? parsed.model_id : fromName;
  if (modelId !== fromName)
    throw new ModelPublishError(
      `${dir}: manifest model_id '${modelId}' does not match the directory name (expected ${modelDirName(modelId)}/)`,
    );
  if (!findBaseModel(modelId)) {
    try {
      checkImportName(modelId, `${join(dir, MANIFEST_FILE)} model_id`);
    } catch (err) {
      if (err instanceof ModelNameError) throw new ModelPublishError(err.message);
      throw err;
    }
    if (!readRegistryEntry(parsed))
      throw new ModelPublishError(
        `'${modelId}' (${dir}) is neither a catalog model (${CATALOG.map((m) => m.id).join(', ')}) nor a model imported under its own name: its manifest has no registry entry of an architecture the engine serves (${SERVABLE_ARCHITECTURES.join(', ')}); import the checkpoint with \`sift models import <dir> --as ${modelId}\``,
      );
  }
  // `files` names what the model needs (values are paths; a trailing `/` names a directory)
  const listed =
    parsed.files && typeof parsed.files === 'object'
      ? Object.values(parsed.files).filter((v): v is string => typeof v === 'string')
      : [];
  return { modelId, manifest, listed };
}

/** Every `<vendor>--<name>/` under `modelsDir` that holds a manifest and names a catalog model or registers an imported one. */
export async function modelDirsIn(modelsDir: string): Promise<string[]> {
  const entries = (await readdir(modelsDir, { withFileTypes: true }).catch(missingAsUndefined)) ?? [];
  const dirs: string[] = [];
  for (const e of entries) {
    if (!e.isDirectory() || !e.name.includes('--')) continue;
    const dir = join(modelsDir, e.name);
    const manifest = await readFile(join(dir, MANIFEST_FILE), 'utf8').catch(missingAsUndefined);
    if (manifest === undefined) continue;
    const id = modelIdFromDirName(e.name);
    if (findBaseModel(id) || (isModelName(id) && importedManifest(manifest))) dirs.push(dir);
  }
  return dirs.sort();
}

/** Whether a manifest's text registers an imported model (a models dir may hold other directories). */
function importedManifest(text: string): boolean {
  try {
    return readRegistryEntry(JSON.parse(text)) !== undefined;
  } catch {
    return false;
  }
}

/**
 * `sift models publish` arguments → model directories: a model directory (has a manifest), a
 * models directory (every model in it), or a model id (catalog or imported) looked up in `modelsDir`.
 */
export async function resolveModelSources(sources: string[], modelsDir: string): Promise<string[]> {
  const dirs: string[] = [];
  for (const source of sources) {
    const info = await stat(source).catch(missingAsUndefined);
    if (info?.isDirectory()) {
      if (await stat(join(source, MANIFEST_FILE)).catch(missingAsUndefined)) dirs.push(source);
      else {
        const found = await modelDirsIn(source);
        if (!found.length)
          throw new ModelPublishError(
            `${source} holds no model directories (<vendor>--<name>/ with a ${MANIFEST_FILE}, named after a catalog model or imported under its own name)`,
          );
        dirs.push(...found);
      }
    } else if (findBaseModel(source) || isModelName(source)) {
      const dir = join(modelsDir, modelDirName(source));
      if (!(await stat(join(dir, MANIFEST_FILE)).catch(missingAsUndefined))) {
        throw new ModelPublishError(
          findBaseModel(source)
            ? `'${source}' is not built or provided: no ${join(dir, MANIFEST_FILE)} (build it with \`node scripts/setup.mjs\`, or put its files there)`
            : `'${source}' is not imported: no ${join(dir, MANIFEST_FILE)} (\`sift models import <dir> --as ${source}\` writes it)`,
        );
      }
      dirs.push(dir);
    } else {
      throw new ModelPublishError(
        `'${source}' is neither a directory nor a model id (a catalog id: ${CATALOG.map((m) => m.id).join(', ')}; or <org>/<name> imported into ${modelsDir})`,
      );
    }
  }
  return [...new Set(dirs)];
}

async function remoteObject(
  blobs: S3BlobStore,
  key: string,
  signal?: AbortSignal,
): Promise<{ size: number; sha256?: string } | undefined> {
  try {
    const res = await blobs.s3.send(
      new HeadObjectCommand({ Bucket: blobs.bucket, Key: key }),
      signal ? { abortSignal: signal } : {},
    );
    const sum = res.Metadata?.[SHA256_METADATA];
    return { size: res.ContentLength ?? 0, ...(sum ? { sha256: sum } : {}) };
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return undefined;
    throw err;
  }
}

async function putFile(
  blobs: S3BlobStore,
  key: string,
  body: Buffer | string,
  size: number,
  hex: string,
  contentType: string,
  signal?: AbortSignal,
) {
  await blobs.s3.send(
    new PutObjectCommand({
      Bucket: blobs.bucket,
      Key: key,
      Body: typeof body === 'string' ? createReadStream(body) : body,
      ContentLength: size,
      ContentType: contentType,
      Metadata: { [SHA256_METADATA]: hex },
      // S3 recomputes it and refuses the upload if a byte changed on the way
      ChecksumSHA256: Buffer.from(hex, 'hex').toString('base64'),
    }),
    signal ? { abortSignal: signal } : {},
  );
}

/** Publishes one model directory; see the module comment for the guarantees. */
export async function publishModelDir(
  blobs: S3BlobStore,
  dir: string,
  opts: PublishOptions = {},
): Promise<PublishResult> {
  const { modelId, manifest, listed } = await readModelDir(dir);
  const prefix = baseModelPrefix(modelId, opts.root ?? BUCKET_PREFIXES.models);
  const manifestKey = prefix + MANIFEST_FILE;
  const manifestSum = createHash('sha256').update(manifest).digest('hex');
  const remoteManifest = await remoteObject(blobs, manifestKey, opts.signal);
  const manifestCurrent =
    remoteManifest?.size === manifest.length &&
    (remoteManifest.sha256 === manifestSum || (await blobs.getText(manifestKey)) === manifest.toString('utf8'));
  if (opts.trustManifest && manifestCurrent) {
    opts.onEvent?.({ type: 'done', modelId, uploaded: 0, unchanged: 0, manifest: 'unchanged' });
    return { modelId, uploaded: 0, unchanged: 0, manifest: 'unchanged' };
  }

  const files: LocalFile[] = [];
  for (const path of await filesUnder(dir)) {
    const rel = relative(dir, path).split(sep).join('/');
    if (isUnpublishedFile(rel)) continue;
    files.push({ path, rel, size: (await stat(path)).size });
  }
  const tooBig = files.filter((f) => f.size > MAX_SINGLE_PUT_BYTES);
  if (tooBig.length)
    throw new ModelPublishError(
      `${tooBig.map((f) => f.rel).join(', ')} exceed${tooBig.length > 1 ? '' : 's'} 5 GiB, the most one PutObject takes; publishing it needs multipart upload (@aws-sdk/lib-storage)`,
    );
  const missing = listed.filter((p) =>
    p.endsWith('/') ? !files.some((f) => f.rel.startsWith(p)) : !files.some((f) => f.rel === p),
  );
  if (missing.length)
    throw new ModelPublishError(
      `${dir}: the manifest names files that are not in the directory: ${missing.join(', ')}`,
    );
  opts.onEvent?.({ type: 'model', modelId, dir, files: files.length, bytes: files.reduce((n, f) => n + f.size, 0) });

  let uploaded = 0;
  let unchanged = 0;
  let withdrawn = false;
  for (const f of files) {
    opts.signal?.throwIfAborted();
    const key = prefix + f.rel;
    const hex = await sha256(f.path);
    const remote = await remoteObject(blobs, key, opts.signal);
    if (remote?.size === f.size && remote.sha256 === hex) {
      unchanged++;
      opts.onEvent?.({ type: 'file', modelId, key, bytes: f.size, action: 'unchanged' });
      continue;
    }
    if (remoteManifest && !withdrawn) {
      // the model is about to change under its manifest: unavailable until the new one lands
      await blobs.s3.send(new DeleteObjectCommand({ Bucket: blobs.bucket, Key: manifestKey }));
      withdrawn = true;
      opts.onEvent?.({ type: 'withdrawn', modelId, key: manifestKey });
    }
    if (f.size >= LARGE_FILE_BYTES) opts.onEvent?.({ type: 'file', modelId, key, bytes: f.size, action: 'uploading' });
    await putFile(blobs, key, f.path, f.size, hex, 'application/octet-stream', opts.signal);
    uploaded++;
    opts.onEvent?.({ type: 'file', modelId, key, bytes: f.size, action: 'uploaded' });
  }

  if (manifestCurrent && !withdrawn) {
    opts.onEvent?.({ type: 'done', modelId, uploaded, unchanged, manifest: 'unchanged' });
    return { modelId, uploaded, unchanged, manifest: 'unchanged' };
  }
  // the manifest goes last, once every file is verified where SageMaker and the runtimes read it
  for (const f of files) {
    const remote = await remoteObject(blobs, prefix + f.rel, opts.signal);
    if (remote?.size !== f.size)
      throw new ModelPublishError(
        `s3://${blobs.bucket}/${prefix}${f.rel} is missing or has the wrong size after upload; not writing the manifest`,
      );
  }
  opts.signal?.throwIfAborted();
  await putFile(blobs, manifestKey, manifest, manifest.length, manifestSum, 'application/json', opts.signal);
  opts.onEvent?.({ type: 'done', modelId, uploaded, unchanged, manifest: 'written' });
  return { modelId, uploaded, unchanged, manifest: 'written' };
}

/** Publishes several model directories in order. */
export async function publishModelDirs(
  blobs: S3BlobStore,
  dirs: string[],
  opts: PublishOptions = {},
): Promise<PublishResult[]> {
  const results: PublishResult[] = [];
  for (const dir of dirs) results.push(await publishModelDir(blobs, dir, opts));
  return results;
}

/** Fine-tuned adapter files: blob version hashes, atomic downloads into the adapter cache, stale versions, LoRA unloading. */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { LlamaModel } from 'node-llama-cpp';
import { ServiceUnavailableError } from '../../../core/errors';
import type { BlobStore } from '../../../core/ports';
import type { DecoderAdapterSpec } from '../../../core/decoder/types';
import type { Logger } from '../../../core/logger';

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException)?.code === 'ENOENT';

/** Deletes a cache file that is no longer wanted; already gone is fine, any other failure is logged (the file only costs disk). */
export async function removeFile(path: string, logger: Logger): Promise<void> {
  try {
    await unlink(path);
  } catch (error) {
    if (!isMissing(error)) logger.warn('could not delete a decoder cache file', { path, error });
  }
}

/** Hash of the adapter blob's identity (etag, size, mtime): a new version gets a new file and context. */
export function adapterVersion(
  spec: DecoderAdapterSpec,
  head: NonNullable<Awaited<ReturnType<BlobStore['head']>>>,
): string {
  return createHash('sha256')
    .update(
      [
        spec.blobPrefix,
        spec.baseModel,
        head.etag ?? '',
        String(head.size),
        head.lastModified?.toISOString() ?? '',
      ].join('\u0000'),
    )
    .digest('hex')
    .slice(0, 16);
}

/** The cache file name stem of an adapter id. */
export const adapterStem = (id: string) => id.replace(/[^A-Za-z0-9._-]/g, '_');

/**
 * Downloads `key` to `filePath` unless a file of `size` bytes is already there (temp name, then
 * rename, so a crash never leaves a partial file under the real name). True when it downloaded.
 */
export async function downloadAdapter(
  blobs: BlobStore,
  key: string,
  filePath: string,
  size: number,
  jobId: string,
  logger: Logger,
): Promise<boolean> {
  // Only a missing file means "download it"; any other failure to look is a real error.
  const have = await stat(filePath).catch((err: unknown) => {
    if (isMissing(err)) return undefined;
    throw err;
  });
  if (have && have.size === size) return false;
  await mkdir(dirname(filePath), { recursive: true });
  const tmp = `${filePath}.${process.pid}.${Math.random().toString(36).slice(2, 10)}.tmp`;
  try {
    await pipeline(await blobs.stream(key), createWriteStream(tmp));
    const got = (await stat(tmp)).size;
    if (got !== size)
      throw new ServiceUnavailableError(
        `Adapter of training job '${jobId}' downloaded ${got} of ${size} bytes; retry shortly`,
      );
    await rename(tmp, filePath);
  } catch (err) {
    // The download's failure is the one reported; the partial file is cleaned up as well as can be.
    await removeFile(tmp, logger);
    throw err;
  }
  return true;
}

/**
 * Files of older versions of an adapter are deleted; one a context still applies goes when that
 * context is disposed (disposeWhenIdle).
 */
export function removeStaleAdapterFiles(
  adapterDir: string,
  stem: string,
  keep: string,
  inUse: (path: string) => boolean,
  logger: Logger,
): void {
  void (async () => {
    let names: string[];
    try {
      names = await readdir(adapterDir);
    } catch (error) {
      // Runs in the background after a new version is in place: stale files only cost disk.
      if (!isMissing(error)) logger.warn('could not list the decoder adapter cache', { path: adapterDir, error });
      return;
    }
    for (const name of names) {
      const path = join(adapterDir, name);
      if (!name.startsWith(`${stem}-`) || !name.endsWith('.gguf') || path === keep) continue;
      if (inUse(path)) continue;
      await removeFile(path, logger);
    }
  })();
}

/**
 * Frees the LoRA weights of a disposed context. node-llama-cpp keeps loaded adapters until the
 * model is disposed (its `_loraAdapters` cache, by file path); the native adapter supports
 * disposal, so it is removed from that cache and freed here. Without that internal map (another
 * node-llama-cpp version) the weights simply stay loaded until the base model goes.
 */
export async function unloadLora(model: LlamaModel, filePath: string, logger: Logger): Promise<void> {
  const cache = (model as unknown as { _loraAdapters?: unknown })._loraAdapters;
  if (!(cache instanceof Map)) return;
  const path = resolve(process.cwd(), filePath);
  const lora = cache.get(path) as { dispose?: () => Promise<void> } | undefined;
  if (!lora || typeof lora.dispose !== 'function') return;
  cache.delete(path);
  try {
    await lora.dispose();
  } catch (error) {
    // Already out of the model's cache, so never applied again; its weights may stay in memory.
    logger.error('llama.cpp LoRA adapter dispose failed', { path, error });
  }
}

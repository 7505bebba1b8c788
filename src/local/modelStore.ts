import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CATALOG, modelManifestKey } from '../core/catalog';
import type { Services } from '../core/context';

/** `sift/gliner2-mini-v1` → `sift--gliner2-mini-v1`: one directory per model in a models dir. */
export const modelDirName = (id: string) => id.replace('/', '--');

/**
 * Publishes locally built or operator-provided weights (`<modelsDir>/<vendor>--<name>/` holding a
 * `manifest.json`) into the model store, i.e. the blob store under `models/<id>/`. The manifest is
 * written last, so a model is `available` only once all its files are there. Unchanged models are
 * skipped (same manifest bytes).
 */
export async function publishBuiltModels(svc: Services, modelsDir: string): Promise<string[]> {
  const published: string[] = [];
  for (const model of CATALOG) {
    const dir = join(modelsDir, modelDirName(model.id));
    const manifestPath = join(dir, 'manifest.json');
    const manifest = await readFile(manifestPath, 'utf8').catch(() => undefined);
    if (manifest === undefined) continue;
    const current = (await svc.blobs.head(modelManifestKey(model.id))) ? await svc.blobs.getText(modelManifestKey(model.id)) : undefined;
    if (current === manifest) continue;
    await svc.blobs.putDirectory(dir, `models/${model.id}/`, (file) => file === manifestPath || file.endsWith('.lock'));
    await svc.blobs.put(modelManifestKey(model.id), manifest, 'application/json');
    published.push(model.id);
  }
  return published;
}

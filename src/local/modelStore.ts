import { modelDirsIn, publishModelDirs } from '../adapters/modelPublisher';
import type { AwsServices } from '../adapters/aws';

/**
 * Publishes locally built or operator-provided weights (`<modelsDir>/<vendor>--<name>/` holding a
 * `manifest.json`) into the model store, with the same code as `sift models publish`
 * (src/adapters/modelPublisher.ts). Models whose manifest is already there unchanged are skipped
 * without hashing their files, so start-up stays fast.
 */
export async function publishBuiltModels(svc: Pick<AwsServices, 'blobs'>, modelsDir: string): Promise<string[]> {
  const results = await publishModelDirs(svc.blobs, await modelDirsIn(modelsDir), { trustManifest: true });
  return results.filter((r) => r.manifest === 'written').map((r) => r.modelId);
}

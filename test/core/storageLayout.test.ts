/** Every key the code writes starts with a prefix the CDK stacks grant on (src/core/storageLayout.ts). */
import { baseModelManifestKey } from '../../src/core/modelLayout';
import { rowsKey, sourceKey } from '../../src/core/datasets/service';
import { shardResultKey } from '../../src/core/evaluation/workflow';
import { BUCKET_PREFIXES } from '../../src/core/storageLayout';
import { archiveKey, checkpointPrefix, logChunkKey, modelPrefix } from '../../src/core/training/artifacts';

it('key builders stay inside their granted prefixes', () => {
  const team = 'team-1';
  const job = '5b0c3c1e-1111-4a4a-8a8a-000000000001';
  expect(rowsKey(team, 'people', 1).startsWith(BUCKET_PREFIXES.datasets)).toBe(true);
  expect(
    sourceKey(team, { name: 'people', version: 1, file_name: 'a.jsonl', upload_id: 'u' }).startsWith(
      BUCKET_PREFIXES.datasets,
    ),
  ).toBe(true);
  for (const key of [
    modelPrefix(team, job),
    archiveKey(team, job),
    checkpointPrefix(team, job, 'c'),
    logChunkKey(team, job, 0),
  ]) {
    expect(key.startsWith(BUCKET_PREFIXES.jobs)).toBe(true);
  }
  expect(shardResultKey(team, 'e', { offset: 0, count: 1 }).startsWith(BUCKET_PREFIXES.evaluations)).toBe(true);
  expect(baseModelManifestKey('sift/gliner2-mini-v1').startsWith(BUCKET_PREFIXES.models)).toBe(true);
});

/**
 * Datasets the service writes itself (synthetic generation, the adaptive loop): the rows go through
 * the same reservation, upload and validation as a user's upload, in steps a retried workflow task
 * can repeat without making a second version.
 */
import type { Services } from '../context';
import { ConflictError } from '../errors';
import { createUploadUrl, getVersion, sourceKey, startProcessing, type DatasetVersion } from './service';

/** Reserves the next version of `name` (creating the dataset on first use). Remember it before submitting. */
export async function reserveProducedVersion(
  svc: Services,
  teamId: string,
  name: string,
  fileName: string,
): Promise<number> {
  const reserve = (newVersion: boolean) =>
    createUploadUrl(svc, teamId, { dataset_name: name, file_name: fileName, new_version: newVersion });
  const reserved = await reserve(false).catch((err: unknown) =>
    err instanceof ConflictError ? reserve(true) : Promise.reject(err),
  );
  return reserved.version;
}

/** Writes the file of a reserved version and queues its processing; a no-op once it is past `pending_upload`. */
export async function submitProducedRows(
  svc: Services,
  teamId: string,
  name: string,
  version: number,
  jsonl: string,
): Promise<void> {
  const record = await getVersion(svc, teamId, name, version);
  if (record.status !== 'pending_upload') return;
  await svc.blobs.put(sourceKey(teamId, record), jsonl, 'application/x-ndjson');
  await startProcessing(svc, teamId, name, version);
}

/** Polls until processing ends; past `waitMs` throws a retryable error (the state machine waits and asks again). */
export async function waitForProcessing(
  svc: Services,
  teamId: string,
  name: string,
  version: number,
  waitMs = 10 * 60_000,
): Promise<DatasetVersion> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const v = await getVersion(svc, teamId, name, version);
    if (v.status === 'ready' || v.status === 'failed') return v;
    if (Date.now() > deadline) {
      const err = new Error(`dataset '${name}' version ${version} is still ${v.status}`);
      err.name = 'Sift.TransientError';
      throw err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

import { NotFoundError } from '../errors';
import type { Services } from '../context';
import { isUuid } from '../ids';
import { checkpointItem, jobCheckpointItem, jobCheckpointsPrefix, jobItem, teamPartition } from '../recordKeys';

/** Where a job's files live in the blob store (S3 on AWS, s3rver locally). */
export const jobPrefix = (teamId: string, jobId: string) => `jobs/${teamId}/${jobId}/`;
export const checkpointPrefix = (teamId: string, jobId: string, checkpointId: string) =>
  `${jobPrefix(teamId, jobId)}checkpoints/${checkpointId}/`;
export const modelPrefix = (teamId: string, jobId: string) => `${jobPrefix(teamId, jobId)}model/`;
export const archiveKey = (teamId: string, jobId: string) => `${jobPrefix(teamId, jobId)}model.tar.gz`;
/** The train channel: each pinned dataset version's rows, as `<name>-v<version>.jsonl` (SageMaker copies it to /opt/ml/input/data/train). */
export const trainChannelPrefix = (teamId: string, jobId: string) => `${jobPrefix(teamId, jobId)}input/train/`;
export const validationChannelPrefix = (teamId: string, jobId: string) =>
  `${jobPrefix(teamId, jobId)}input/validation/`;
/**
 * Checkpoints the trainer saved that reach the service as files, not as announcements: SageMaker
 * syncs /opt/ml/checkpoints here (CheckpointConfig), one directory each with its sift_checkpoint.json.
 */
export const syncedCheckpointsPrefix = (teamId: string, jobId: string) =>
  `${jobPrefix(teamId, jobId)}sagemaker/checkpoints/`;
/** A log chunk is named by the offset of its first line, so readers can skip whole chunks. */
export const logChunkKey = (teamId: string, jobId: string, firstOffset: number) =>
  `${jobPrefix(teamId, jobId)}logs/${String(firstOffset).padStart(10, '0')}.jsonl`;

/** What resolves a checkpoint id used as `base_model` to its job and root model. */
export interface CheckpointRef {
  id: string;
  job_id: string;
  root_model: string;
}

export interface Checkpoint extends CheckpointRef {
  /** Blob prefix holding the checkpoint's files (a gliner2 or PEFT checkpoint directory). */
  blob_prefix: string;
  step: number;
  epoch: number;
  metrics: Record<string, number> | null;
  is_best: boolean;
  is_final: boolean;
  created_at: string;
}

/**
 * 404 for a job that is not there, with getTrainingJob's answer; read here so that this module
 * (which trainingJobs.ts and deployments.ts use) imports neither of them.
 */
async function requireJob(svc: Services, teamId: string, jobId: string): Promise<void> {
  const found = isUuid(jobId) && (await svc.records.get(jobItem(teamId, jobId).pk, jobItem(teamId, jobId).sk));
  if (!found) throw new NotFoundError(`Training job '${jobId}' not found`);
}

/** Registers a checkpoint whose files are already in the blob store (files first, then records). */
export async function registerCheckpoint(svc: Services, teamId: string, checkpoint: Checkpoint): Promise<void> {
  await svc.records.put(jobCheckpointItem(teamId, checkpoint.job_id, checkpoint.created_at, checkpoint.id), checkpoint);
  await svc.records.put(checkpointItem(teamId, checkpoint.id), checkpoint);
}

export async function listCheckpoints(svc: Services, teamId: string, jobId: string): Promise<Checkpoint[]> {
  await requireJob(svc, teamId, jobId);
  return svc.records.queryAll<Checkpoint>(teamPartition(teamId), { beginsWith: jobCheckpointsPrefix(jobId) });
}

export async function getCheckpoint(svc: Services, teamId: string, checkpointId: string): Promise<Checkpoint> {
  const found = await svc.records.get<Checkpoint>(
    checkpointItem(teamId, checkpointId).pk,
    checkpointItem(teamId, checkpointId).sk,
  );
  if (!found) throw new NotFoundError(`Checkpoint '${checkpointId}' not found`);
  return found;
}

/** Marks which checkpoint scored best (by validation f1) once the job ends. */
export async function markBestCheckpoint(svc: Services, teamId: string, jobId: string): Promise<void> {
  const all = await listCheckpoints(svc, teamId, jobId);
  const scored = all.filter((c) => typeof c.metrics?.f1 === 'number');
  const best = scored.sort((a, b) => (b.metrics?.f1 ?? 0) - (a.metrics?.f1 ?? 0))[0];
  if (!best) return;
  for (const c of all) {
    const isBest = c.id === best.id;
    if (c.is_best === isBest) continue;
    await svc.records.update(
      jobCheckpointItem(teamId, jobId, c.created_at, c.id).pk,
      jobCheckpointItem(teamId, jobId, c.created_at, c.id).sk,
      { set: { is_best: isBest } },
    );
    await svc.records.update(checkpointItem(teamId, c.id).pk, checkpointItem(teamId, c.id).sk, {
      set: { is_best: isBest },
    });
  }
}

/** Removes a job's checkpoint records (its files go with the job prefix). */
export async function deleteCheckpointRecords(svc: Services, teamId: string, jobId: string): Promise<void> {
  const all = await svc.records.queryAll<Checkpoint>(teamPartition(teamId), {
    beginsWith: jobCheckpointsPrefix(jobId),
  });
  for (const c of all) {
    await svc.records.delete(checkpointItem(teamId, c.id).pk, checkpointItem(teamId, c.id).sk);
    const item = jobCheckpointItem(teamId, jobId, c.created_at, c.id);
    await svc.records.delete(item.pk, item.sk);
  }
}

export interface LogLine {
  /** 0-based position in the job's log. */
  offset: number;
  ts: string;
  stream: 'stdout' | 'stderr' | 'system';
  line: string;
}

/**
 * Training logs as numbered chunk objects in the blob store: appends never rewrite an object, and
 * readers (the JSON page, the SSE tail) list the chunks. Works the same on S3 and s3rver.
 */
export async function readLogs(
  svc: Services,
  teamId: string,
  jobId: string,
  from: number,
  limit: number,
): Promise<LogLine[]> {
  const keys = (await svc.blobs.list(`${jobPrefix(teamId, jobId)}logs/`)).sort();
  const firstOffset = (key: string) => Number(key.slice(key.lastIndexOf('/') + 1, -'.jsonl'.length));
  // Start at the last chunk that begins at or before `from`.
  let start = 0;
  keys.forEach((k, i) => {
    if (firstOffset(k) <= from) start = i;
  });
  const out: LogLine[] = [];
  for (const key of keys.slice(start)) {
    const lines = (await svc.blobs.getText(key)).split('\n').filter(Boolean);
    for (const l of lines) {
      const parsed = JSON.parse(l) as LogLine;
      if (parsed.offset >= from) out.push(parsed);
      if (out.length >= limit) return out;
    }
  }
  return out;
}

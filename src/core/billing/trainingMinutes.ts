/**
 * GPU minutes of a finished training job, for finance's `GpuMinutes` metric: wall time from
 * `started_at` to `finished_at` times the GPUs of the instance it ran on.
 */
import type { Services } from '../context';

/**
 * GPUs per SageMaker training instance (the types lib/config.ts offers). One table, from
 * https://aws.amazon.com/ec2/instance-types/g5/ , https://aws.amazon.com/ec2/instance-types/g6/ and
 * https://aws.amazon.com/ec2/instance-types/m5/ (the ml.* types are the same hardware).
 * `local`: a job run by local mode on this machine's CPU.
 */
export const GPUS_PER_INSTANCE: Record<string, number> = {
  'ml.g5.xlarge': 1,
  'ml.g5.2xlarge': 1,
  'ml.g6.xlarge': 1,
  'ml.g6.2xlarge': 1,
  'ml.m5.xlarge': 0,
  local: 0,
};

export function gpuMinutes(instanceType: string, startedAt: string, finishedAt: string): number {
  const minutes = Math.max(0, Date.parse(finishedAt) - Date.parse(startedAt)) / 60_000;
  // an unknown type counts as one GPU: finance would rather over- than under-count
  return minutes * (GPUS_PER_INSTANCE[instanceType] ?? 1);
}

/** Emitted once, by the transition that ends the job (the conditional write makes it once). */
export function emitTrainingMinutes(svc: Services, job: { base_model: string; root_model?: string; started_at: string | null; finished_at?: string | null }): void {
  if (!job.started_at || !job.finished_at) return;
  const instanceType = process.env['SIFT_TRAINING_INSTANCE_TYPE'] ?? 'local';
  // the catalog model at the root of the lineage: a checkpoint id would be a per-customer dimension
  svc.usageMetrics.trainingMinutes(job.root_model ?? job.base_model, gpuMinutes(instanceType, job.started_at, job.finished_at));
}

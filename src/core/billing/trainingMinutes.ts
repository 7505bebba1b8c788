/**
 * GPU minutes of a finished training job, for finance's `GpuMinutes` metric: the seconds it trained
 * (compute.ts `trainingSeconds`: SageMaker's count when known, else `started_at` → `finished_at`)
 * times the GPUs of the instance it ran on.
 */
import type { Services } from '../context';
import { trainingInstanceType, trainingSeconds, type BillableTrainingJob } from './compute';

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

export function gpuMinutes(instanceType: string, seconds: number): number {
  // an unknown type counts as one GPU: finance would rather over- than under-count
  return (Math.max(0, seconds) / 60) * (GPUS_PER_INSTANCE[instanceType] ?? 1);
}

/** Emitted once, by the transition that ends the job (the conditional write makes it once). */
export function emitTrainingMinutes(svc: Services, job: BillableTrainingJob): void {
  if (!job.started_at || !job.finished_at) return;
  // the catalog model at the root of the lineage: a checkpoint id would be a per-customer dimension
  svc.usageMetrics.trainingMinutes(
    job.root_model ?? job.base_model,
    gpuMinutes(trainingInstanceType(job, svc.config.trainingInstanceType), trainingSeconds(job)),
  );
}

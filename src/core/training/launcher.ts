/** Starts and stops training compute: a subprocess locally, SageMaker (via Step Functions) on AWS. */
export interface TrainingLauncher {
  submit(teamId: string, jobId: string): Promise<void>;
  /** Asks a running job to stop; it saves a checkpoint first. No-op for a job not running here. */
  stop(teamId: string, jobId: string): Promise<void>;
}

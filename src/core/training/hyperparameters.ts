import type { TrainingJob } from '../trainingJobs';

/** The trainer's seed when a job names none. */
export const DEFAULT_TRAINER_SEED = 42;

/**
 * What the trainer (containers/training) is told about a job, the same locally and on SageMaker.
 * Values are JSON-encoded strings because SageMaker passes hyperparameters as strings; the trainer
 * decodes them.
 */
export function trainerHyperparameters(job: TrainingJob, baseModelPath: string): Record<string, string> {
  const values: Record<string, unknown> = {
    base_model_path: baseModelPath,
    model_name: job.model_name,
    training_type: job.training_type,
    training_algorithm: job.training_algorithm,
    // an encoder job without nr_epochs lets the trainer size the epochs from the dataset (schedule.py)
    ...(job.epochs_from_data ? {} : { nr_epochs: job.nr_epochs }),
    learning_rate: job.learning_rate,
    rl_config: job.rl_config ?? {},
    seed: job.seed ?? DEFAULT_TRAINER_SEED,
    validation_split: 0.1,
    early_stopping_patience: 3,
  };
  return Object.fromEntries(Object.entries(values).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)]));
}

/**
 * Top-level key prefixes of the one Sift bucket. The key builders live beside their domain
 * (datasets/service.ts, training/artifacts.ts, evaluation/workflow.ts, catalog.ts); the CDK stacks
 * scope every IAM grant by these prefixes, and test/core/storageLayout.test.ts checks that each
 * builder's keys really start with its prefix — so infrastructure and code can't drift apart.
 */
export const BUCKET_PREFIXES = {
  /** `datasets/<team>/<name>/v<n>/…`: uploads, normalized rows, reports. */
  datasets: 'datasets/',
  /** `jobs/<team>/<job>/…`: training inputs, SageMaker output and checkpoints, the model, logs. */
  jobs: 'jobs/',
  /** `evaluations/<team>/<id>/shards/…`: per-shard counts of a running evaluation. */
  evaluations: 'evaluations/',
  /** `models/<catalog id>/…`: base model weights (operator-provided or built at set-up). */
  models: 'models/',
  /** `generation/<team>/<job>/…`: scratch of synthetic-data generation. */
  generation: 'generation/',
} as const;

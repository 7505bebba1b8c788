/** Response shapes, for the OpenAPI document and for contract tests that check real responses. */
import { z } from 'zod';

export const ApiKeySchema = z
  .object({
    id: z.string(),
    name: z.string(),
    role: z.enum(['operator', 'admin', 'member']),
    prefix: z.string(),
    created_at: z.string(),
    last_used_at: z.string().nullable(),
  })
  .meta({ id: 'ApiKey' });

export const RowErrorSchema = z
  .object({ row: z.number().nullable(), field: z.string().nullable(), message: z.string() })
  .meta({ id: 'RowError' });

export const DatasetVersionSchema = z
  .object({
    name: z.string(),
    version: z.number().int(),
    status: z.enum(['pending_upload', 'processing', 'ready', 'failed']),
    file_name: z.string(),
    upload_id: z.string().optional().describe("This upload attempt (part of its file's storage key)"),
    declared_size_bytes: z.number().nullable().optional().describe('size_bytes as declared at upload/url'),
    declared_sha256: z.string().nullable().optional().describe('sha256 as declared at upload/url'),
    size_bytes: z.number().nullable(),
    sha256: z.string().nullable(),
    row_count: z.number().nullable(),
    task_types: z.array(z.string()),
    label_vocabulary: z.array(z.string()),
    entity_types: z.array(z.string()),
    relation_types: z.array(z.string()),
    structures: z.record(z.string(), z.record(z.string(), z.object({ dtype: z.enum(['str', 'list']) }))),
    errors: z.array(RowErrorSchema),
    error_count: z.number().int(),
    created_at: z.string(),
    processed_at: z.string().nullable(),
  })
  .meta({ id: 'DatasetVersion' });

const typeThresholds = z.record(z.string(), z.number());
export const CalibratedThresholdsSchema = z
  .object({
    evaluation_id: z.string(),
    entities: typeThresholds,
    labels: typeThresholds.describe('Multi-label classification labels'),
    fields: typeThresholds.describe('Keyed `<structure>.<field>`'),
    relations: typeThresholds,
  })
  .describe(
    "The evaluation's best threshold per type; applied to a request that sends no `threshold` (docs/reference/evaluation.md#calibrated-thresholds)",
  )
  .meta({ id: 'CalibratedThresholds' });

export const JobDeploymentSchema = z
  .object({
    status: z.literal('active'),
    checkpoint_id: z.string().nullable(),
    deployed_at: z.string(),
    thresholds: CalibratedThresholdsSchema.nullable(),
  })
  .meta({ id: 'JobDeployment' });

/** The deployment's threshold opt-in, on deploy and promote bodies. */
export const thresholdChoiceFields = {
  thresholds: z
    .enum(['default', 'calibrated'])
    .optional()
    .describe(
      "`calibrated`: requests that send no `threshold` get each type's best threshold from an evaluation of the job (`evaluation_id`, else its latest complete one); `default`: 0.5 for every type. Absent: a re-pin of the same model keeps what it had, a new one gets the default",
    ),
  evaluation_id: z
    .string()
    .min(1)
    .max(64)
    .optional()
    .describe('With `thresholds: "calibrated"`: the complete evaluation of this training job to take them from'),
};

export const TrainingJobSchema = z
  .object({
    id: z.string(),
    model_name: z.string(),
    base_model: z.string(),
    root_model: z.string(),
    model_type: z.enum(['encoder', 'decoder']),
    datasets: z.array(z.object({ name: z.string(), version: z.number() })),
    task_types: z.array(z.string()),
    training_type: z.enum(['lora', 'full']),
    training_algorithm: z.enum(['sft', 'dpo', 'grpo']),
    rl_config: z.record(z.string(), z.unknown()).nullable(),
    nr_epochs: z.number(),
    epochs_from_data: z
      .boolean()
      .optional()
      .describe(
        'True when the request named no nr_epochs: the encoder trainer sizes the epochs from the dataset (nr_epochs is updated once it has planned them)',
      ),
    learning_rate: z.number(),
    status: z.enum(['requested', 'running', 'complete', 'failed', 'stopped']),
    progress: z.object({ epoch: z.number(), step: z.number(), total_steps: z.number() }).nullable(),
    metrics: z.object({ f1: z.number(), precision: z.number(), recall: z.number() }).nullable(),
    warnings: z
      .array(z.string())
      .describe(
        'Why the finished model may not be what it looks like, e.g. validation F1 no better than the base model',
      ),
    error: z.string().nullable(),
    created_at: z.string(),
    started_at: z.string().nullable(),
    finished_at: z.string().nullable(),
    deployment: JobDeploymentSchema.nullable().optional(),
  })
  .meta({ id: 'TrainingJob' });

export const EvaluationSchema = z
  .object({
    id: z.string(),
    status: z.enum(['running', 'complete', 'failed']),
    base_model: z.string(),
    training_job_id: z.string().nullable(),
    project_id: z.string().nullable(),
    dataset_name: z.string(),
    dataset_version: z.number(),
    metrics: z
      .record(z.string(), z.unknown())
      .nullable()
      .describe(
        'Micro f1/precision/recall, per-type breakdowns, confusion, examples, and `calibration`: per entity type, multi-label label, field and relation type, F1/precision/recall at thresholds 0.05..0.95 and the best threshold (docs/reference/evaluation.md#calibrated-thresholds)',
      ),
    error: z.string().nullable(),
    created_at: z.string(),
    finished_at: z.string().nullable(),
  })
  .meta({ id: 'Evaluation' });

export const ProjectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    description: z.string().nullable(),
    active_training_job_id: z.string().nullable(),
    active_deployment_id: z.string().nullable().optional(),
    adaptive_cycle_id: z.string().nullable().optional(),
    created_at: z.string(),
    updated_at: z.string().optional(),
  })
  .meta({ id: 'Project' });

const ScoresSchema = z.object({ f1: z.number(), precision: z.number(), recall: z.number() });
const DatasetRef = z.object({ name: z.string(), version: z.number().nullable() });

export const AdaptiveCycleSchema = z
  .object({
    id: z.string(),
    project_id: z.string(),
    trigger: z.enum(['manual', 'schedule']),
    status: z.enum(['running', 'skipped', 'failed', 'offered', 'promoted']),
    stage: z.enum(['selecting', 'preparing_data', 'training', 'evaluating', 'done']),
    reason: z.string().nullable(),
    baseline_training_job_id: z.string().nullable(),
    traces: z.record(z.string(), z.number()).nullable(),
    review: z.array(z.object({ inference_id: z.string(), uncertainty: z.number() })),
    datasets: z.object({ train: DatasetRef, holdout: DatasetRef }).nullable(),
    candidate_training_job_id: z.string().nullable(),
    candidate_evaluation_id: z.string().nullable(),
    baseline_evaluation_id: z.string().nullable(),
    comparison: z
      .object({
        candidate: ScoresSchema,
        baseline: ScoresSchema,
        delta_f1: z.number(),
        recommendation: z.enum(['promote', 'keep']),
      })
      .nullable(),
    created_at: z.string(),
    updated_at: z.string(),
    finished_at: z.string().nullable(),
  })
  .meta({ id: 'AdaptiveCycle' });

export const ProjectDeploymentSchema = z
  .object({
    id: z.string(),
    project_id: z.string(),
    action: z.enum(['promote', 'rollback', 'clear']),
    training_job_id: z.string().nullable(),
    checkpoint_id: z.string().nullable(),
    previous_training_job_id: z.string().nullable(),
    created_at: z.string(),
  })
  .meta({ id: 'ProjectDeployment' });

export const InferenceRecordSchema = z
  .object({
    inference_id: z.string(),
    model_id: z.string(),
    type: z.enum(['encoder', 'decoder']),
    tasks: z.array(z.string()),
    project_id: z.string().nullable(),
    training_job_id: z.string().nullable(),
    endpoint: z.string(),
    input: z.record(z.string(), z.unknown()),
    output: z.unknown(),
    routes: z
      .record(z.string(), z.enum(['pooled', 'gliner2']))
      .optional()
      .describe(
        "Encoder classification tasks: which head answered each — 'pooled' (a fine-tuned model's pooled classifier) or 'gliner2'",
      ),
    usage: z.record(z.string(), z.number()),
    latency_ms: z.number(),
    created_at: z.string(),
    feedback: z
      .object({
        verdict: z.enum(['correct', 'incorrect']),
        corrected_output: z.record(z.string(), z.unknown()).nullable(),
        created_at: z.string(),
      })
      .nullable(),
  })
  .meta({ id: 'InferenceRecord' });

export const ModelBuildSchema = z
  .object({
    state: z.enum(['pending', 'building', 'failed']),
    stage: z.string().optional(),
    step: z.number().optional(),
    total: z.number().optional(),
    eta_seconds: z.number().optional(),
    error: z.string().optional(),
    log: z.string().optional(),
  })
  .meta({ id: 'ModelBuild' });

export const BaseModelSchema = z
  .object({
    id: z.string(),
    type: z.enum(['encoder', 'decoder']),
    task_type: z.enum(['encoder', 'decoder']),
    description: z.string(),
    languages: z.array(z.string()),
    parameters: z.string(),
    tasks: z.array(z.string()),
    supports_training: z.boolean(),
    training_types: z.array(z.string()),
    training_algorithms: z.array(z.string()),
    default_hyperparameters: z.object({ nr_epochs: z.number(), learning_rate: z.number() }),
    max_input_tokens: z.number(),
    source: z
      .enum(['catalog', 'imported'])
      .describe(
        "`catalog`: the service's fixed list; `imported`: a GLiNER2 model an operator imported under its own name (`sift models import --as <org>/<name>`, `sift models pull`)",
      ),
    architecture: z.string().optional().describe('Imported models: the served architecture (`gliner2-span`)'),
    backbone: z.string().optional().describe("Imported models: the backbone's `model_type` (`bert`, `deberta-v2`, …)"),
    parameter_count: z.number().int().optional().describe('Imported models: the exact number of parameters'),
    size_bytes: z.number().int().optional().describe("Imported models: bytes of the model's files in the model store"),
    private: z.boolean().optional().describe('Imported models: whether the model is private to your team'),
    available: z.boolean(),
    build: ModelBuildSchema.optional().describe(
      'Present while this installation builds the missing weights (local mode: the background build of `npm start`)',
    ),
  })
  .meta({ id: 'BaseModel' });

export const list = <T extends z.ZodType>(item: T) => z.object({ data: z.array(item) });
export const Deleted = z.object({ id: z.string(), deleted: z.literal(true) });

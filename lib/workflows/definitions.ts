/**
 * Step Functions definitions (Amazon States Language, JSONPath) for Sift's
 * workflows. This module is the single source of the ASL:
 *
 * - the CDK workflow stack deploys these objects, filling the `${...}`
 *   placeholders through `DefinitionSubstitutions`;
 * - local mode and the tests run the very same objects with
 *   aws-local-stepfunctions, overriding every Task by state name with a local
 *   handler (`TASK_STATES` lists them).
 *
 * It imports nothing from aws-cdk-lib on purpose: local mode can load it cheaply.
 *
 * Lambda tasks call the workflow-task function directly (Resource = function
 * ARN) with the payload `{ task: <TaskName>, input: <state input> }`; the
 * function's return value is the task result.
 */

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type AslState = { [key: string]: Json };
export interface AslDefinition {
  Comment: string;
  StartAt: string;
  TimeoutSeconds?: number;
  States: Record<string, AslState>;
}

/** Placeholders filled at deploy time (CloudFormation DefinitionSubstitutions). */
export const PLACEHOLDERS = {
  taskFunction: 'TaskFunctionArn',
  trainingImage: 'TrainingImage',
  trainingRole: 'TrainingRoleArn',
  dataKey: 'DataKeyArn',
  stage: 'Stage',
} as const;
export type Placeholder = (typeof PLACEHOLDERS)[keyof typeof PLACEHOLDERS];
const ph = (name: Placeholder): string => `\${${name}}`;

/** Error names a task handler may throw to ask for a retry (Lambda error type = Error.name). */
export const TRANSIENT_ERROR = 'Sift.TransientError';

/**
 * The error a task throws while a GPU service it calls is at zero or still booting (the ALB's own
 * 503, src/aws/encoderTasks.ts). A cold start takes 6–20 minutes (instance launch, image pull,
 * model load), far longer than LAMBDA_RETRY waits, so it has a patient retrier of its own.
 */
export const SERVICE_WAKING_ERROR = 'Sift.ServiceWaking';

/**
 * Retrier fields and their limits, and the rule that the first retrier whose ErrorEquals matches
 * is the one used: "Handling errors in Step Functions workflows",
 * https://docs.aws.amazon.com/step-functions/latest/dg/concepts-error-handling.html
 * No jitter: every attempt should wait the full interval, so the window below is what a cold start
 * gets (waits of 30 s, 45 s, then 60 s: about 39 minutes over 40 attempts). The 503s of those
 * attempts are also what keeps the service's idle alarm from sending it back to zero.
 */
export const SERVICE_WAKING_RETRY = {
  ErrorEquals: [SERVICE_WAKING_ERROR],
  IntervalSeconds: 30,
  BackoffRate: 1.5,
  MaxDelaySeconds: 60,
  MaxAttempts: 40,
  JitterStrategy: 'NONE',
} as const satisfies Json;

const LAMBDA_RETRY: Json = {
  ErrorEquals: [
    'Lambda.ServiceException',
    'Lambda.AWSLambdaException',
    'Lambda.SdkClientException',
    'Lambda.TooManyRequestsException',
    'Lambda.ClientExecutionTimeoutException',
    TRANSIENT_ERROR,
  ],
  IntervalSeconds: 2,
  MaxAttempts: 40,
  BackoffRate: 2,
  JitterStrategy: 'FULL',
};

/** A Lambda task of the workflow-task function. */
function lambdaTask(
  task: string,
  opts: { next?: string; resultPath?: string | null; catchTo?: string; timeoutSeconds?: number; parameters?: Json },
): AslState {
  const state: AslState = {
    Type: 'Task',
    Comment: `workflow task ${task}`,
    Resource: ph(PLACEHOLDERS.taskFunction),
    Parameters: opts.parameters ?? { task, 'input.$': '$' },
    TimeoutSeconds: opts.timeoutSeconds ?? 300,
    Retry: [SERVICE_WAKING_RETRY, LAMBDA_RETRY],
  };
  // Without ResultPath the task result replaces the state's input (ASL default).
  if (opts.resultPath !== undefined) state.ResultPath = opts.resultPath;
  if (opts.catchTo) state.Catch = [catchAll(opts.catchTo)];
  if (opts.next) state.Next = opts.next;
  else state.End = true;
  return state;
}

/**
 * DescribeTrainingJob's answer for a name with no job: the API reference lists ResourceNotFound
 * ("DescribeTrainingJob", https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_DescribeTrainingJob.html);
 * an AWS SDK integration names it `SageMaker.<code>` (with or without the SDK's `Exception` suffix,
 * "Handling errors in Step Functions workflows": both are listed so neither is retried as transient).
 */
const TRAINING_JOB_NOT_FOUND = ['SageMaker.ResourceNotFound', 'SageMaker.ResourceNotFoundException'];

function catchAll(next: string): Json {
  return { ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: next };
}

/** Failure branch: record the failure (best effort, retried) then fail the execution. */
function failureBranch(recordName: string, task: string, failName: string, error: string): Record<string, AslState> {
  return {
    [recordName]: {
      ...lambdaTask(task, { next: failName, resultPath: '$.failure' }),
      // Recording the failure must not loop back into itself.
      Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.recordError', Next: failName }],
    },
    [failName]: { Type: 'Fail', Error: error, Cause: `see the ${recordName} step and the job record` },
  };
}

// ---------------------------------------------------------------------------
// Training: PrepareTraining -> Train (createTrainingJob.sync, spot + checkpoints) -> RecordTrainingResult

/**
 * `PrepareTraining` returns (at `$.training`): trainingJobName (prefixed
 * `sift-<stage>-`), hyperParameters (string map; `base_model_path` =
 * `/opt/ml/input/data/model`), channels (SageMaker `Channel` objects: `train`,
 * optional `validation`, `model`), outputS3Uri, checkpointS3Uri, instanceType,
 * maxRuntimeSeconds, maxWaitSeconds (>= maxRuntimeSeconds: spot capacity may
 * be waited for).
 */
export interface TrainingOptions {
  /**
   * Name the data key as the training volume's KMS key. Only for instance types with an EBS volume:
   * SageMaker refuses the key on instance-storage (NVMe) types (lib/aws-rules.ts,
   * `acceptsVolumeKmsKey`, decided by the stack from the configured instance type).
   */
  readonly volumeKmsKey: boolean;
}

export function trainJobParameters(opts: TrainingOptions = { volumeKmsKey: false }): Json {
  return {
    'TrainingJobName.$': '$.training.trainingJobName',
    AlgorithmSpecification: {
      TrainingImage: ph(PLACEHOLDERS.trainingImage),
      TrainingInputMode: 'File',
      EnableSageMakerMetricsTimeSeries: true,
      MetricDefinitions: [
        // The trainer logs JSON lines ({"event":"progress",...,"loss":1.23}).
        { Name: 'train:loss', Regex: '"loss":\\s*([0-9.eE+-]+)' },
        { Name: 'eval:f1', Regex: '"f1":\\s*([0-9.eE+-]+)' },
        { Name: 'eval:precision', Regex: '"precision":\\s*([0-9.eE+-]+)' },
        { Name: 'eval:recall', Regex: '"recall":\\s*([0-9.eE+-]+)' },
      ],
    },
    RoleArn: ph(PLACEHOLDERS.trainingRole),
    'HyperParameters.$': '$.training.hyperParameters',
    // Channels come from PrepareTraining: `train`, optional `validation`, and `model`
    // (the base checkpoint; with network isolation the job cannot download it).
    'InputDataConfig.$': '$.training.channels',
    OutputDataConfig: { 'S3OutputPath.$': '$.training.outputS3Uri', KmsKeyId: ph(PLACEHOLDERS.dataKey) },
    ResourceConfig: {
      InstanceCount: 1,
      'InstanceType.$': '$.training.instanceType',
      VolumeSizeInGB: 100,
      ...(opts.volumeKmsKey ? { VolumeKmsKeyId: ph(PLACEHOLDERS.dataKey) } : {}),
    },
    // Managed spot training ("Managed Spot Training in Amazon SageMaker AI",
    // https://docs.aws.amazon.com/sagemaker/latest/dg/model-managed-spot-training.html): MaxWaitTimeInSeconds
    // (>= MaxRuntimeInSeconds; training.prepare sets 2x) bounds waiting for spot capacity plus running. An
    // interrupted job restarts with CheckpointConfig.S3Uri copied back to LocalPath, and the trainer continues
    // from its newest whole checkpoint (containers/training/sift_trainer/job/resume.py): a restart re-runs at
    // most one checkpoint interval, not the job.
    EnableManagedSpotTraining: true,
    StoppingCondition: {
      'MaxRuntimeInSeconds.$': '$.training.maxRuntimeSeconds',
      'MaxWaitTimeInSeconds.$': '$.training.maxWaitSeconds',
    },
    CheckpointConfig: { 'S3Uri.$': '$.training.checkpointS3Uri', LocalPath: '/opt/ml/checkpoints' },
    EnableNetworkIsolation: true,
    EnableInterContainerTrafficEncryption: true,
    Tags: [
      { Key: 'sift:stage', Value: ph(PLACEHOLDERS.stage) },
      { Key: 'sift:job', 'Value.$': '$.jobId' },
    ],
  };
}

export function trainingDefinition(opts: TrainingOptions = { volumeKmsKey: false }): AslDefinition {
  return {
    Comment: 'Sift training job: prepare, run a SageMaker training job (spot, checkpointed), record the result',
    StartAt: 'PrepareTraining',
    TimeoutSeconds: 7 * 24 * 3600,
    States: {
      PrepareTraining: lambdaTask('training.prepare', {
        next: 'Train',
        resultPath: '$.training',
        catchTo: 'RecordTrainingFailure',
      }),
      Train: {
        Type: 'Task',
        Comment: 'SageMaker CreateTrainingJob, waits for completion (.sync)',
        Resource: 'arn:aws:states:::sagemaker:createTrainingJob.sync',
        Parameters: trainJobParameters(opts),
        ResultSelector: {
          'status.$': '$.TrainingJobStatus',
          'modelArtifacts.$': '$.ModelArtifacts.S3ModelArtifacts',
          'billableSeconds.$': '$.BillableTimeInSeconds',
          'trainingSeconds.$': '$.TrainingTimeInSeconds',
        },
        ResultPath: '$.trainingResult',
        Retry: [
          {
            ErrorEquals: ['SageMaker.ResourceLimitExceededException', 'SageMaker.ThrottlingException'],
            IntervalSeconds: 120,
            MaxAttempts: 5,
            BackoffRate: 2,
            JitterStrategy: 'FULL',
          },
          { ErrorEquals: ['SageMaker.AmazonSageMakerException'], IntervalSeconds: 30, MaxAttempts: 2, BackoffRate: 2 },
        ],
        Catch: [
          // a retry whose first attempt had created the job (its answer lost): training-job names are
          // unique in the account and region, so CreateTrainingJob answers ResourceInUse ("CreateTrainingJob",
          // https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateTrainingJob.html). The name
          // is this job's own (prefix + job id), so that job is followed, never a second one started.
          // Which name Step Functions gives that error is not documented for the optimized integration
          // (the exception's code is `ResourceInUse`; its generic one is AmazonSageMakerException), so
          // each of them leads to a look at the job by its name: one that exists is followed, and
          // without one the original error is recorded (AwaitTrainingJob's not-found catch)
          {
            ErrorEquals: [
              'SageMaker.ResourceInUseException',
              'SageMaker.ResourceInUse',
              'SageMaker.AmazonSageMakerException',
            ],
            ResultPath: '$.error',
            Next: 'AwaitTrainingJob',
          },
          catchAll('RecordTrainingFailure'),
        ],
        Next: 'RecordTrainingResult',
      },
      AwaitTrainingJob: {
        Type: 'Task',
        Comment: 'DescribeTrainingJob of the job an earlier attempt of Train created',
        Resource: 'arn:aws:states:::aws-sdk:sagemaker:describeTrainingJob',
        Parameters: { 'TrainingJobName.$': '$.training.trainingJobName' },
        ResultPath: '$.described',
        Retry: [
          // no job of that name: Train's own error stands (kept in $.error), nothing to wait for
          { ErrorEquals: TRAINING_JOB_NOT_FOUND, MaxAttempts: 0 },
          { ErrorEquals: ['States.ALL'], IntervalSeconds: 30, MaxAttempts: 5, BackoffRate: 2 },
        ],
        Catch: [
          { ErrorEquals: TRAINING_JOB_NOT_FOUND, ResultPath: '$.describeError', Next: 'RecordTrainingFailure' },
          catchAll('RecordTrainingFailure'),
        ],
        Next: 'TrainingJobEnded',
      },
      TrainingJobEnded: {
        Type: 'Choice',
        Choices: [
          { Variable: '$.described.TrainingJobStatus', StringEquals: 'Completed', Next: 'AdoptTrainingResult' },
          {
            Or: [
              { Variable: '$.described.TrainingJobStatus', StringEquals: 'Failed' },
              { Variable: '$.described.TrainingJobStatus', StringEquals: 'Stopped' },
            ],
            Next: 'AdoptTrainingFailure',
          },
        ],
        Default: 'WaitForTrainingJob',
      },
      WaitForTrainingJob: { Type: 'Wait', Seconds: 60, Next: 'AwaitTrainingJob' },
      // what Train's ResultSelector and a failed .sync task's error would have carried
      AdoptTrainingResult: {
        Type: 'Pass',
        Parameters: {
          'status.$': '$.described.TrainingJobStatus',
          'modelArtifacts.$': '$.described.ModelArtifacts.S3ModelArtifacts',
          'billableSeconds.$': '$.described.BillableTimeInSeconds',
          'trainingSeconds.$': '$.described.TrainingTimeInSeconds',
        },
        ResultPath: '$.trainingResult',
        Next: 'RecordTrainingResult',
      },
      AdoptTrainingFailure: {
        Type: 'Pass',
        Parameters: { Error: 'States.TaskFailed', 'Cause.$': 'States.JsonToString($.described)' },
        ResultPath: '$.error',
        Next: 'RecordTrainingFailure',
      },
      RecordTrainingResult: lambdaTask('training.complete', {
        next: 'TrainingSucceeded',
        resultPath: '$.record',
        catchTo: 'RecordTrainingFailure',
      }),
      TrainingSucceeded: { Type: 'Succeed' },
      ...failureBranch('RecordTrainingFailure', 'training.failed', 'TrainingFailed', 'Sift.TrainingFailed'),
    },
  };
}

// ---------------------------------------------------------------------------
// Generation: PlanGeneration -> GenerateShards (Map) -> AssembleDataset

export const MAP_CONCURRENCY = 4;

export function generationDefinition(): AslDefinition {
  return {
    Comment: 'Sift synthetic data generation: plan shards, generate each with the decoder, assemble the dataset',
    StartAt: 'PlanGeneration',
    TimeoutSeconds: 24 * 3600,
    States: {
      PlanGeneration: lambdaTask('generation.plan', {
        next: 'GenerateShards',
        resultPath: '$.plan',
        catchTo: 'MarkGenerationFailed',
      }),
      GenerateShards: {
        Type: 'Map',
        ItemsPath: '$.plan.shards',
        MaxConcurrency: MAP_CONCURRENCY,
        ItemSelector: { 'jobId.$': '$.jobId', 'teamId.$': '$.teamId', 'shard.$': '$$.Map.Item.Value' },
        ItemProcessor: {
          ProcessorConfig: { Mode: 'INLINE' },
          StartAt: 'GenerateShard',
          States: {
            GenerateShard: lambdaTask('generation.shard', { timeoutSeconds: 900 }),
          },
        },
        ResultPath: '$.shards',
        Catch: [catchAll('MarkGenerationFailed')],
        Next: 'AssembleDataset',
      },
      AssembleDataset: lambdaTask('generation.assemble', {
        next: 'GenerationSucceeded',
        resultPath: '$.dataset',
        catchTo: 'MarkGenerationFailed',
        timeoutSeconds: 900,
      }),
      GenerationSucceeded: { Type: 'Succeed' },
      ...failureBranch('MarkGenerationFailed', 'generation.failed', 'GenerationFailed', 'Sift.GenerationFailed'),
    },
  };
}

// ---------------------------------------------------------------------------
// Evaluation: PrepareEvaluation -> EvaluateShards (Map) -> AggregateEvaluation

export function evaluationDefinition(): AslDefinition {
  return {
    Comment: 'Sift evaluation: split the dataset, score each shard against the model, aggregate F1/precision/recall',
    StartAt: 'PrepareEvaluation',
    TimeoutSeconds: 12 * 3600,
    States: {
      PrepareEvaluation: lambdaTask('evaluation.prepare', {
        next: 'EvaluateShards',
        resultPath: '$.plan',
        catchTo: 'MarkEvaluationFailed',
      }),
      EvaluateShards: {
        Type: 'Map',
        ItemsPath: '$.plan.shards',
        MaxConcurrency: MAP_CONCURRENCY,
        ItemSelector: { 'evaluationId.$': '$.evaluationId', 'teamId.$': '$.teamId', 'shard.$': '$$.Map.Item.Value' },
        ItemProcessor: {
          ProcessorConfig: { Mode: 'INLINE' },
          StartAt: 'EvaluateShard',
          States: {
            EvaluateShard: lambdaTask('evaluation.shard', { timeoutSeconds: 900 }),
          },
        },
        ResultPath: '$.shardResults',
        Catch: [catchAll('MarkEvaluationFailed')],
        Next: 'AggregateEvaluation',
      },
      AggregateEvaluation: lambdaTask('evaluation.aggregate', {
        next: 'EvaluationSucceeded',
        resultPath: '$.result',
        catchTo: 'MarkEvaluationFailed',
      }),
      EvaluationSucceeded: { Type: 'Succeed' },
      ...failureBranch('MarkEvaluationFailed', 'evaluation.failed', 'EvaluationFailed', 'Sift.EvaluationFailed'),
    },
  };
}

// ---------------------------------------------------------------------------
// Adaptive loop: per eligible project, select traces -> dataset -> train -> evaluate vs baseline -> offer

/** How long the loop waits between looks at a running candidate job / its evaluations (local mode overrides). */
export const ADAPTIVE_POLL_SECONDS = { training: 300, evaluation: 60 } as const;

/** Wait → look (a Lambda task answering `{done}`) → Choice: done goes on, not done waits again. */
function pollLoop(
  prefix: string,
  task: string,
  seconds: number,
  next: string,
  catchTo: string,
): Record<string, AslState> {
  return {
    [`WaitFor${prefix}`]: { Type: 'Wait', Seconds: seconds, Next: `Check${prefix}` },
    [`Check${prefix}`]: lambdaTask(task, { next: `${prefix}Done`, resultPath: `$.poll`, catchTo }),
    [`${prefix}Done`]: {
      Type: 'Choice',
      Choices: [{ Variable: '$.poll.done', BooleanEquals: true, Next: next }],
      Default: `WaitFor${prefix}`,
    },
  };
}

/**
 * Each Map item is `{project: {teamId, projectId, cycleId}}`; every task reads and updates that
 * cycle's record (src/core/adaptive), so outputs stay small and retries resume. Children (the
 * candidate's training job, the two evaluations) are started the way the API starts them and polled,
 * so the same definition runs locally, where the training runner is not a state machine.
 */
export function adaptiveDefinition(): AslDefinition {
  return {
    Comment:
      'Sift adaptive loop: for each eligible project, build a dataset from informative traces and feedback, train a candidate, evaluate it against the deployed baseline, offer it for promotion',
    StartAt: 'SelectProjects',
    TimeoutSeconds: 7 * 24 * 3600,
    States: {
      SelectProjects: lambdaTask('adaptive.projects', {
        next: 'ForEachProject',
        resultPath: '$.selection',
        catchTo: 'LoopFailed',
      }),
      ForEachProject: {
        Type: 'Map',
        ItemsPath: '$.selection.projects',
        MaxConcurrency: 2,
        ItemSelector: { 'project.$': '$$.Map.Item.Value' },
        ItemProcessor: {
          ProcessorConfig: { Mode: 'INLINE' },
          StartAt: 'SelectTraces',
          States: {
            SelectTraces: lambdaTask('adaptive.traces', {
              next: 'EnoughData',
              resultPath: '$.traces',
              catchTo: 'RecordProjectFailure',
            }),
            EnoughData: {
              Type: 'Choice',
              Choices: [{ Variable: '$.traces.enough', BooleanEquals: true, Next: 'StartCandidate' }],
              Default: 'NotEnoughData',
            },
            // the traces task has recorded the cycle as skipped, with the reason
            NotEnoughData: { Type: 'Succeed' },
            StartCandidate: lambdaTask('adaptive.dataset', {
              next: 'WaitForTraining',
              resultPath: '$.candidate',
              catchTo: 'RecordProjectFailure',
              timeoutSeconds: 900,
            }),
            ...pollLoop(
              'Training',
              'adaptive.training',
              ADAPTIVE_POLL_SECONDS.training,
              'StartEvaluations',
              'RecordProjectFailure',
            ),
            StartEvaluations: lambdaTask('adaptive.evaluate', {
              next: 'WaitForEvaluations',
              resultPath: '$.evaluations',
              catchTo: 'RecordProjectFailure',
            }),
            ...pollLoop(
              'Evaluations',
              'adaptive.scores',
              ADAPTIVE_POLL_SECONDS.evaluation,
              'OfferPromotion',
              'RecordProjectFailure',
            ),
            OfferPromotion: lambdaTask('adaptive.offer', { resultPath: '$.offer', catchTo: 'RecordProjectFailure' }),
            RecordProjectFailure: {
              ...lambdaTask('adaptive.failed', { next: 'ProjectSkipped', resultPath: '$.failure' }),
              Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.recordError', Next: 'ProjectSkipped' }],
            },
            // One project's failure is recorded and does not stop the others.
            ProjectSkipped: { Type: 'Succeed' },
          },
        },
        ResultPath: null,
        Catch: [catchAll('LoopFailed')],
        Next: 'LoopDone',
      },
      LoopDone: { Type: 'Succeed' },
      LoopFailed: {
        Type: 'Fail',
        Error: 'Sift.AdaptiveLoopFailed',
        Cause: 'project selection or the project map failed',
      },
    },
  };
}

/** Every Wait state (at any depth) of a definition: local mode shortens them. */
export function waitStates(def: { States: Record<string, AslState> }): string[] {
  return taskStatesOfType(def, 'Wait');
}

export const WORKFLOWS = {
  training: trainingDefinition,
  generation: generationDefinition,
  evaluation: evaluationDefinition,
  adaptive: adaptiveDefinition,
} as const;
export type WorkflowName = keyof typeof WORKFLOWS;

/** Every Task state (at any depth) of a definition, by name: what local mode must handle. */
export function taskStates(def: { States: Record<string, AslState> }): string[] {
  return taskStatesOfType(def, 'Task');
}

function taskStatesOfType(def: { States: Record<string, AslState> }, type: string): string[] {
  const out: string[] = [];
  const walk = (states: Record<string, AslState>): void => {
    for (const [name, state] of Object.entries(states)) {
      if (state.Type === type) out.push(name);
      const proc = (state.ItemProcessor ?? state.Iterator) as { States: Record<string, AslState> } | undefined;
      if (proc) walk(proc.States);
      for (const b of (state.Branches as Array<{ States: Record<string, AslState> }> | undefined) ?? []) walk(b.States);
    }
  };
  walk(def.States);
  return out;
}

/** The `task` name each Lambda Task state sends to the workflow-task function. */
export function lambdaTaskNames(def: { States: Record<string, AslState> }): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (states: Record<string, AslState>): void => {
    for (const [name, state] of Object.entries(states)) {
      const params = state.Parameters as Record<string, Json> | undefined;
      if (
        state.Type === 'Task' &&
        state.Resource === ph(PLACEHOLDERS.taskFunction) &&
        typeof params?.task === 'string'
      ) {
        out[name] = params.task;
      }
      const proc = (state.ItemProcessor ?? state.Iterator) as { States: Record<string, AslState> } | undefined;
      if (proc) walk(proc.States);
      for (const b of (state.Branches as Array<{ States: Record<string, AslState> }> | undefined) ?? []) walk(b.States);
    }
  };
  walk(def.States);
  return out;
}

/** Replace `${Name}` placeholders (what CloudFormation does with DefinitionSubstitutions). */
export function substitute(def: AslDefinition, values: Partial<Record<Placeholder, string>>): AslDefinition {
  const text = JSON.stringify(def).replace(
    /\$\{([A-Za-z0-9]+)\}/g,
    (m, name: string) => values[name as Placeholder] ?? m,
  );
  return JSON.parse(text) as AslDefinition;
}

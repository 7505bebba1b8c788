/**
 * The deployed ASL definitions, run locally with aws-local-stepfunctions and
 * local task handlers (as local mode does): happy paths, retries and every
 * error branch.
 */
import { ExecutionError, StateMachine } from 'aws-local-stepfunctions';
import {
  SERVICE_WAKING_ERROR,
  SERVICE_WAKING_RETRY,
  TRANSIENT_ERROR,
  WORKFLOWS,
  lambdaTaskNames,
  substitute,
  taskStates,
  waitStates,
  type AslDefinition,
  type WorkflowName,
} from '../../lib/workflows/definitions';
import { runOnEncoderService } from '../../src/aws/encoderTasks';
import '../../src/local/promiseWithResolvers';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Handler = (input: Json) => Json | Promise<Json>;

const ARNS = {
  TaskFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:sift-test-tasks',
  TrainingImage: '123456789012.dkr.ecr.us-east-1.amazonaws.com/sift-training:test',
  TrainingRoleArn: 'arn:aws:iam::123456789012:role/sift-test-training',
  DataKeyArn: 'arn:aws:kms:us-east-1:123456789012:key/00000000-0000-0000-0000-000000000000',
  Stage: 'test',
};

function definition(name: WorkflowName): AslDefinition {
  return substitute(WORKFLOWS[name](), ARNS);
}

class NamedError extends Error {
  constructor(name: string, message = name) {
    super(message);
    this.name = name;
  }
}

interface Run {
  output?: Json;
  error?: unknown;
  calls: Array<{ state: string; input: Json }>;
}

async function run(name: WorkflowName, input: Json, handlers: Record<string, Handler>): Promise<Run> {
  const def = definition(name);
  const calls: Run['calls'] = [];
  const wrapped: Record<string, Handler> = {};
  for (const state of taskStates(def)) {
    const h = handlers[state] ?? ((): Json => ({}));
    wrapped[state] = async (i: Json) => {
      calls.push({ state, input: i });
      return h(i);
    };
  }
  const retryIntervalOverrides = Object.fromEntries(taskStates(def).map((s) => [s, 0]));
  const waitTimeOverrides = Object.fromEntries(waitStates(def).map((s) => [s, 0]));
  const sm = new StateMachine(def as never, { validationOptions: { checkArn: true, checkPaths: true } });
  const exec = sm.run(input as never, {
    overrides: { taskResourceLocalHandlers: wrapped as never, retryIntervalOverrides, waitTimeOverrides },
    context: {
      Execution: { Id: `arn:aws:states:us-east-1:123456789012:execution:sift-test-${name}:local-1` },
    } as never,
  });
  try {
    return { output: (await exec.result) as Json, calls };
  } catch (error) {
    return { error, calls };
  }
}

const states = (r: Run): string[] => r.calls.map((c) => c.state);
/** The ASL error name of a failed execution (the Fail state's Error). */
const errorName = (r: Run): string | undefined => (r.error as { cause?: { name?: string } } | undefined)?.cause?.name;

describe('definitions', () => {
  it.each(Object.keys(WORKFLOWS) as WorkflowName[])(
    '%s has only placeholders CDK substitutes, and every Lambda task names its task',
    (name) => {
      const raw = JSON.stringify(WORKFLOWS[name]());
      const placeholders = [...raw.matchAll(/\$\{([A-Za-z0-9]+)\}/g)].map((m) => m[1]!);
      for (const p of placeholders) expect(Object.keys(ARNS)).toContain(p);
      const tasks = lambdaTaskNames(WORKFLOWS[name]());
      expect(Object.keys(tasks).length).toBeGreaterThan(0);
      for (const t of Object.values(tasks)) expect(t).toMatch(new RegExp(`^${name}\\.[a-z]+$`));
    },
  );
});

describe('training workflow', () => {
  const prepared: Json = {
    trainingJobName: 'sift-test-job1',
    hyperParameters: { epochs: '3' },
    channels: [
      {
        ChannelName: 'train',
        DataSource: { S3DataSource: { S3DataType: 'S3Prefix', S3Uri: 's3://b/datasets/t/ds/1/' } },
      },
      {
        ChannelName: 'model',
        DataSource: { S3DataSource: { S3DataType: 'S3Prefix', S3Uri: 's3://b/artifacts/base/' } },
      },
    ],
    outputS3Uri: 's3://b/artifacts/t/job1/',
    checkpointS3Uri: 's3://b/checkpoints/t/job1/',
    instanceType: 'ml.g5.xlarge',
    maxRuntimeSeconds: 3600,
    maxWaitSeconds: 7200,
  };
  const sagemakerResult: Json = {
    TrainingJobStatus: 'Completed',
    ModelArtifacts: { S3ModelArtifacts: 's3://b/artifacts/t/job1/model.tar.gz' },
    BillableTimeInSeconds: 600,
    TrainingTimeInSeconds: 900,
  };

  it('prepares, trains and records the result', async () => {
    const r = await run(
      'training',
      { jobId: 'job1', teamId: 't' },
      {
        PrepareTraining: () => prepared,
        Train: () => sagemakerResult,
        RecordTrainingResult: (i) => ({ recorded: (i as { task: string }).task }),
      },
    );
    expect(r.error).toBeUndefined();
    expect(states(r)).toEqual(['PrepareTraining', 'Train', 'RecordTrainingResult']);
    expect(r.calls[0]!.input).toEqual({ task: 'training.prepare', input: { jobId: 'job1', teamId: 't' } });
    expect(r.output).toMatchObject({
      trainingResult: {
        status: 'Completed',
        billableSeconds: 600,
        modelArtifacts: 's3://b/artifacts/t/job1/model.tar.gz',
      },
      record: { recorded: 'training.complete' },
    });
  });

  it('sends SageMaker spot training with checkpoints and a max wait', async () => {
    let request: Json = null;
    await run(
      'training',
      { jobId: 'job1', teamId: 't' },
      {
        PrepareTraining: () => prepared,
        Train: (i) => {
          request = i;
          return sagemakerResult;
        },
      },
    );
    expect(request).toMatchObject({
      TrainingJobName: 'sift-test-job1',
      RoleArn: ARNS.TrainingRoleArn,
      AlgorithmSpecification: { TrainingImage: ARNS.TrainingImage },
      EnableManagedSpotTraining: true,
      InputDataConfig: [
        expect.objectContaining({ ChannelName: 'train' }),
        expect.objectContaining({ ChannelName: 'model' }),
      ],
      StoppingCondition: { MaxRuntimeInSeconds: 3600, MaxWaitTimeInSeconds: 7200 },
      CheckpointConfig: { S3Uri: 's3://b/checkpoints/t/job1/', LocalPath: '/opt/ml/checkpoints' },
      OutputDataConfig: { KmsKeyId: ARNS.DataKeyArn },
      Tags: [
        { Key: 'sift:stage', Value: 'test' },
        { Key: 'sift:job', Value: 'job1' },
      ],
    });
  });

  it('retries a transient task error', async () => {
    let attempts = 0;
    const r = await run(
      'training',
      { jobId: 'job1', teamId: 't' },
      {
        PrepareTraining: () => {
          attempts += 1;
          if (attempts < 3) throw new NamedError(TRANSIENT_ERROR);
          return prepared;
        },
        Train: () => sagemakerResult,
      },
    );
    expect(r.error).toBeUndefined();
    expect(attempts).toBe(3);
  });

  it('records a failed (or stopped) training job and fails the execution', async () => {
    const r = await run(
      'training',
      { jobId: 'job1', teamId: 't' },
      {
        PrepareTraining: () => prepared,
        Train: () => {
          throw new NamedError('States.TaskFailed', 'TrainingJobStatus: Stopped');
        },
        RecordTrainingFailure: () => ({ status: 'stopped' }),
      },
    );
    expect(states(r)).toEqual(['PrepareTraining', 'Train', 'RecordTrainingFailure']);
    expect(r.calls[2]!.input).toMatchObject({
      task: 'training.failed',
      input: { error: { Error: 'States.TaskFailed' } },
    });
    expect(r.error).toBeInstanceOf(ExecutionError);
    expect(errorName(r)).toBe('Sift.TrainingFailed');
  });

  it('still fails cleanly when recording the failure fails too', async () => {
    const r = await run(
      'training',
      { jobId: 'job1', teamId: 't' },
      {
        PrepareTraining: () => {
          throw new NamedError('Sift.ValidationError', 'dataset not ready');
        },
        RecordTrainingFailure: () => {
          throw new NamedError('Sift.StoreError');
        },
      },
    );
    expect(states(r)).toEqual(['PrepareTraining', 'RecordTrainingFailure']);
    expect(errorName(r)).toBe('Sift.TrainingFailed');
  });
});

describe('generation workflow', () => {
  const plan = {
    shards: [
      { index: 0, count: 50 },
      { index: 1, count: 50 },
      { index: 2, count: 20 },
    ],
  };

  it('generates every shard and assembles the dataset', async () => {
    const r = await run(
      'generation',
      { jobId: 'g1', teamId: 't' },
      {
        PlanGeneration: () => plan,
        GenerateShard: (i) => ({
          key: `generated/g1/${(i as { input: { shard: { index: number } } }).input.shard.index}.jsonl`,
        }),
        AssembleDataset: () => ({ datasetName: 'ds', rows: 120 }),
      },
    );
    expect(r.error).toBeUndefined();
    expect(states(r).filter((s) => s === 'GenerateShard')).toHaveLength(3);
    expect(r.output).toMatchObject({
      shards: [{ key: 'generated/g1/0.jsonl' }, { key: 'generated/g1/1.jsonl' }, { key: 'generated/g1/2.jsonl' }],
      dataset: { rows: 120 },
    });
    const shardInput = r.calls.find((c) => c.state === 'GenerateShard')!.input;
    expect(shardInput).toMatchObject({
      task: 'generation.shard',
      input: { jobId: 'g1', teamId: 't', shard: { count: expect.any(Number) } },
    });
  });

  it('marks the job failed when a shard keeps failing', async () => {
    const r = await run(
      'generation',
      { jobId: 'g1', teamId: 't' },
      {
        PlanGeneration: () => plan,
        GenerateShard: () => {
          throw new NamedError('Sift.DecoderUnavailable');
        },
      },
    );
    expect(states(r)).toContain('MarkGenerationFailed');
    expect(states(r)).not.toContain('AssembleDataset');
    expect(errorName(r)).toBe('Sift.GenerationFailed');
  });
});

describe('evaluation workflow', () => {
  it('scores shards and aggregates', async () => {
    const r = await run(
      'evaluation',
      { evaluationId: 'e1', teamId: 't' },
      {
        PrepareEvaluation: () => ({ shards: [{ index: 0 }, { index: 1 }] }),
        EvaluateShard: () => ({ tp: 8, fp: 1, fn: 2 }),
        AggregateEvaluation: (i) => {
          const results = (i as { input: { shardResults: Array<{ tp: number }> } }).input.shardResults;
          return { tp: results.reduce((a, x) => a + x.tp, 0) };
        },
      },
    );
    expect(r.error).toBeUndefined();
    expect(r.output).toMatchObject({ result: { tp: 16 } });
  });

  it('marks the evaluation failed when aggregation fails', async () => {
    const r = await run(
      'evaluation',
      { evaluationId: 'e1', teamId: 't' },
      {
        PrepareEvaluation: () => ({ shards: [{ index: 0 }] }),
        AggregateEvaluation: () => {
          throw new NamedError('Sift.ValidationError');
        },
      },
    );
    expect(states(r)).toEqual(['PrepareEvaluation', 'EvaluateShard', 'AggregateEvaluation', 'MarkEvaluationFailed']);
    expect(errorName(r)).toBe('Sift.EvaluationFailed');
  });
});

/**
 * A cold GPU service: the ALB answers its own 503 (HTML, no Retry-After) for 6–20 minutes while the
 * task boots. Step Functions waits between attempts as the retrier says ("Handling errors in Step
 * Functions workflows": IntervalSeconds × BackoffRate^n, capped by MaxDelaySeconds, no jitter);
 * the interpreter's waits are compressed to 0, so the test keeps the clock: each failed attempt
 * advances it by the wait Step Functions would take before the next one.
 */
describe('a GPU service waking from zero', () => {
  const COLD_START_SECONDS = 20 * 60;
  type Retrier = {
    ErrorEquals: readonly string[];
    IntervalSeconds?: number;
    BackoffRate?: number;
    MaxDelaySeconds?: number;
    MaxAttempts?: number;
  };
  const wait = (r: Retrier, attempt: number): number =>
    Math.min((r.IntervalSeconds ?? 1) * (r.BackoffRate ?? 2) ** attempt, r.MaxDelaySeconds ?? Number.POSITIVE_INFINITY);
  const lambdaRetriers = (name: WorkflowName): Retrier[][] => {
    const out: Retrier[][] = [];
    const visit = (states: Record<string, Json>) => {
      for (const state of Object.values(states) as Array<Record<string, any>>) {
        if (state.ItemProcessor) visit(state.ItemProcessor.States);
        if (state.Type === 'Task' && state.Resource === ARNS.TaskFunctionArn) out.push(state.Retry as Retrier[]);
      }
    };
    visit(definition(name).States as Record<string, Json>);
    return out;
  };

  /** A shard task as the workflow Lambda runs it, against an ALB whose target boots for COLD_START_SECONDS. */
  const coldShard = () => {
    let clock = 0;
    let attempts = 0;
    const alb: typeof fetch = async () =>
      clock < COLD_START_SECONDS
        ? new Response('<html><body><center><h1>503 Service Temporarily Unavailable</h1></center></body></html>', {
            status: 503,
            headers: { 'content-type': 'text/html' },
          })
        : Response.json({ tp: 1, fp: 0, fn: 0 });
    const handler: Handler = async (input) => {
      try {
        return (await runOnEncoderService('evaluation.shard', input, {
          baseUrl: 'http://alb',
          token: 't',
          fetchImpl: alb,
        })) as Json;
      } catch (err) {
        clock += wait(SERVICE_WAKING_RETRY, attempts);
        attempts += 1;
        throw err;
      }
    };
    return { handler, attempts: () => attempts };
  };

  it.each(Object.keys(WORKFLOWS) as WorkflowName[])(
    '%s: every Lambda task retries Sift.ServiceWaking first, on its own retrier, and never with States.ALL',
    (name) => {
      for (const retry of lambdaRetriers(name)) {
        expect(retry[0]).toEqual(SERVICE_WAKING_RETRY);
        const matching = (error: string) => retry.filter((r) => r.ErrorEquals.includes(error));
        expect(matching(SERVICE_WAKING_ERROR)).toHaveLength(1);
        expect(matching(TRANSIENT_ERROR)).toHaveLength(1);
        expect(matching(TRANSIENT_ERROR)[0]).not.toBe(retry[0]);
        // Step Functions: States.ALL must be alone in the last retrier; these need none
        expect(retry.flatMap((r) => r.ErrorEquals)).not.toContain('States.ALL');
      }
    },
  );

  it('the waking retrier waits out a 20-minute cold start, within the Step Functions limits', () => {
    const r = SERVICE_WAKING_RETRY;
    const window = Array.from({ length: r.MaxAttempts }, (_, n) => wait(r, n)).reduce((a, b) => a + b, 0);
    expect(window).toBeGreaterThanOrEqual(COLD_START_SECONDS);
    expect(r.IntervalSeconds).toBeLessThanOrEqual(99_999_999);
    expect(r.MaxDelaySeconds).toBeLessThan(31_622_401);
    expect(r.MaxAttempts).toBeLessThanOrEqual(99_999_999);
    expect(r.BackoffRate).toBeGreaterThanOrEqual(1);
  });

  it("an evaluation started while the encoder service is at zero finishes once it is up (the ALB's 503s for 20 minutes)", async () => {
    const shard = coldShard();
    const r = await run(
      'evaluation',
      { evaluationId: 'e1', teamId: 't' },
      {
        PrepareEvaluation: () => ({ shards: [{ index: 0 }] }),
        EvaluateShard: shard.handler,
        AggregateEvaluation: () => ({ done: true }),
      },
    );
    expect(r.error).toBeUndefined();
    expect(r.output).toMatchObject({ result: { done: true } });
    expect(shard.attempts()).toBeGreaterThan(20);
  });

  it('a generation started while the gateway is at zero finishes once it is up', async () => {
    const shard = coldShard();
    const r = await run(
      'generation',
      { jobId: 'g1', teamId: 't' },
      {
        PlanGeneration: () => ({ shards: [{ index: 0, count: 5 }] }),
        GenerateShard: shard.handler,
        AssembleDataset: () => ({ rows: 5 }),
      },
    );
    expect(r.error).toBeUndefined();
    expect(states(r)).toContain('AssembleDataset');
  });
});

describe('adaptive loop', () => {
  const projects = {
    projects: [
      { teamId: 't1', projectId: 'quiet', cycleId: 'c1' },
      { teamId: 't2', projectId: 'broken', cycleId: 'c2' },
      { teamId: 't3', projectId: 'ready', cycleId: 'c3' },
    ],
  };
  const project = (i: Json): string => (i as { input: { project: { projectId: string } } }).input.project.projectId;

  it('skips projects without enough data, records failures, polls the candidate and its evaluations, then offers', async () => {
    const polls: Record<string, number> = {};
    const poll = (key: string, doneAfter: number) => (i: Json) => {
      const k = `${key}:${project(i)}`;
      polls[k] = (polls[k] ?? 0) + 1;
      return { done: polls[k]! >= doneAfter };
    };
    const r = await run(
      'adaptive',
      { trigger: 'schedule' },
      {
        SelectProjects: () => projects,
        SelectTraces: (i) => ({ enough: project(i) !== 'quiet' }),
        StartCandidate: (i) => ({ jobId: `job-${project(i)}` }),
        CheckTraining: (i) => {
          if (project(i) === 'broken')
            throw new NamedError('Error', 'candidate training job job-broken failed: CUDA OOM');
          return poll('training', 3)(i);
        },
        StartEvaluations: () => ({ candidate: 'ec', baseline: 'eb' }),
        CheckEvaluations: poll('evaluations', 2),
        OfferPromotion: (i) => ({ status: 'offered', project: project(i) }),
      },
    );
    expect(r.error).toBeUndefined();
    const s = states(r);
    expect(s.filter((x) => x === 'SelectTraces')).toHaveLength(3);
    expect(s.filter((x) => x === 'StartCandidate')).toHaveLength(2);
    expect(polls).toEqual({ 'training:ready': 3, 'evaluations:ready': 2 });
    const failure = r.calls.find((c) => c.state === 'RecordProjectFailure')!;
    expect(failure.input).toMatchObject({
      task: 'adaptive.failed',
      input: { project: { projectId: 'broken', cycleId: 'c2' }, error: { Cause: expect.stringContaining('CUDA OOM') } },
    });
    const offers = r.calls.filter((c) => c.state === 'OfferPromotion');
    expect(offers.map((c) => project(c.input))).toEqual(['ready']);
    expect(offers[0]!.input).toMatchObject({
      task: 'adaptive.offer',
      input: { project: { teamId: 't3', cycleId: 'c3' }, candidate: { jobId: 'job-ready' } },
    });
  });

  it('records a failed evaluation on the project and goes on', async () => {
    const r = await run(
      'adaptive',
      {},
      {
        SelectProjects: () => ({ projects: [projects.projects[2]!] }),
        SelectTraces: () => ({ enough: true }),
        CheckTraining: () => ({ done: true }),
        CheckEvaluations: () => {
          throw new NamedError('Error', 'the baseline evaluation e1 failed');
        },
      },
    );
    expect(r.error).toBeUndefined();
    expect(states(r).slice(-2)).toEqual(['CheckEvaluations', 'RecordProjectFailure']);
  });

  it('fails the loop when project selection fails', async () => {
    const r = await run(
      'adaptive',
      {},
      {
        SelectProjects: () => {
          throw new NamedError('Sift.StoreError');
        },
      },
    );
    expect(errorName(r)).toBe('Sift.AdaptiveLoopFailed');
  });
});

/** Workflow stack: deployed ASL = the shared definitions, SageMaker scope, events, logging. */
import { Match } from 'aws-cdk-lib/assertions';
import { trainingOptions } from '../../lib/workflow-stack';
import { WORKFLOWS, type AslState, type WorkflowName } from '../../lib/workflows/definitions';
import { asArray, buildApp, policyStatements, resourcesOfType } from './helpers';

const built = buildApp();
const t = built.template(built.stacks.workflows);
const machines = resourcesOfType(t, 'AWS::StepFunctions::StateMachine');
const byName = (name: WorkflowName): Record<string, unknown> =>
  Object.values(machines).find((m) => m.Properties?.StateMachineName === `sift-dev-${name}`)!.Properties!;

describe('state machines', () => {
  it.each(Object.keys(WORKFLOWS) as WorkflowName[])(
    'deploys the shared %s definition with logging and tracing',
    (name) => {
      const p = byName(name);
      // training: the SageMaker volume key is decided from the stage's training instance type
      const expected = WORKFLOWS[name](trainingOptions(built.config));
      expect(JSON.parse(p.DefinitionString as string)).toEqual(expected);
      expect(p).toMatchObject({
        StateMachineType: 'STANDARD',
        TracingConfiguration: { Enabled: true },
        LoggingConfiguration: { Level: 'ALL' },
        DefinitionSubstitutions: expect.objectContaining({ TaskFunctionArn: expect.anything(), Stage: 'dev' }),
      });
    },
  );

  it.each(Object.keys(WORKFLOWS) as WorkflowName[])(
    '%s: every task retries, and every task is caught (itself or by its Map/Parallel)',
    (name) => {
      const walk = (states: Record<string, AslState>, caughtByParent: boolean): void => {
        for (const [stateName, s] of Object.entries(states)) {
          const caught = caughtByParent || Array.isArray(s.Catch);
          if (s.Type === 'Task') {
            expect({ stateName, retry: Array.isArray(s.Retry) && s.Retry.length > 0, caught }).toEqual({
              stateName,
              retry: true,
              caught: true,
            });
          }
          const inner = (s.ItemProcessor ?? s.Iterator) as { States: Record<string, AslState> } | undefined;
          if (inner) walk(inner.States, caught);
          for (const b of (s.Branches as Array<{ States: Record<string, AslState> }> | undefined) ?? [])
            walk(b.States, caught);
        }
      };
      walk(WORKFLOWS[name]().States, false);
    },
  );

  it('runs SageMaker training as spot with checkpoints and a max wait (.sync)', () => {
    const train = WORKFLOWS.training().States.Train as { Resource: string; Parameters: Record<string, unknown> };
    expect(train.Resource).toBe('arn:aws:states:::sagemaker:createTrainingJob.sync');
    expect(train.Parameters).toMatchObject({
      EnableManagedSpotTraining: true,
      StoppingCondition: { 'MaxRuntimeInSeconds.$': expect.any(String), 'MaxWaitTimeInSeconds.$': expect.any(String) },
      CheckpointConfig: { 'S3Uri.$': expect.any(String), LocalPath: '/opt/ml/checkpoints' },
      EnableNetworkIsolation: true,
      // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub placeholder
      OutputDataConfig: { KmsKeyId: '${DataKeyArn}' },
    });
  });
});

describe('IAM', () => {
  const statements = policyStatements(t);

  it('limits SageMaker access to Sift training jobs and passes the training role only to SageMaker', () => {
    const sm = statements.filter((s) => asArray(s.Action as string[]).some((a) => a.startsWith('sagemaker:')));
    expect(sm.length).toBeGreaterThan(0);
    for (const s of sm) expect(JSON.stringify(s.Resource)).toContain('training-job/sift-dev-*');
    const pass = statements.filter((s) => asArray(s.Action as string[]).includes('iam:PassRole'));
    expect(pass).toHaveLength(1);
    expect(pass[0]!.Condition).toEqual({ StringEquals: { 'iam:PassedToService': 'sagemaker.amazonaws.com' } });
  });

  it('lets the training role read base models and write only under jobs/ (its inputs, output, checkpoints)', () => {
    const role = Object.keys(resourcesOfType(t, 'AWS::IAM::Role')).find((id) => id.startsWith('TrainingRole'))!;
    const own = statements.filter((s) => s.logicalId.startsWith('TrainingRoleDefaultPolicy'));
    expect(role).toBeDefined();
    const writes = own.filter((s) => asArray(s.Action as string[]).some((a) => a.startsWith('s3:Put')));
    const resources = JSON.stringify(writes.map((s) => s.Resource));
    expect(resources).toContain('/jobs/*');
    expect(resources).not.toContain('/datasets/*');
    expect(resources).not.toContain('/models/*');
  });

  it('grants no service-wide actions', () => {
    for (const s of statements)
      for (const a of asArray(s.Action as string[])) expect(a).not.toMatch(/^(\*|[a-z0-9-]+:\*)$/);
  });
});

describe('training job records', () => {
  it('routes SageMaker state changes of Sift jobs to the updater, with a DLQ', () => {
    t.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.sagemaker'],
        'detail-type': ['SageMaker Training Job State Change'],
        detail: { TrainingJobName: [{ prefix: 'sift-dev-' }] },
      },
      Targets: [Match.objectLike({ DeadLetterConfig: Match.anyValue(), RetryPolicy: Match.anyValue() })],
    });
  });

  it('runs the workflow tasks inside the VPC (they call the internal gateway)', () => {
    const tasks = Object.values(resourcesOfType(t, 'AWS::Lambda::Function')).find(
      (f) =>
        (f.Properties!.Environment as { Variables: Record<string, unknown> }).Variables.POWERTOOLS_SERVICE_NAME ===
        'workflow',
    )!;
    expect(tasks.Properties?.VpcConfig).toBeDefined();
  });
});

describe('task function (engine-bound tasks go to the gateway)', () => {
  const fns = Object.values(resourcesOfType(t, 'AWS::Lambda::Function'));
  const tasks = fns.find((f) => JSON.stringify(f.Properties?.Environment ?? {}).includes('SIFT_INFERENCE_URL'))!;

  it('runs in the VPC with the gateway URL and the internal token secret’s ARN (not its value)', () => {
    expect(tasks.Properties?.VpcConfig).toBeDefined();
    const env = (tasks.Properties!.Environment as { Variables: Record<string, unknown> }).Variables;
    expect(env.SIFT_INTERNAL_TOKEN_SECRET_ARN).toBeDefined();
    expect(env.SIFT_INTERNAL_TOKEN).toBeUndefined();
  });

  it('may read exactly that secret', () => {
    const reads = policyStatements(t).filter((s) =>
      asArray(s.Action as string[]).includes('secretsmanager:GetSecretValue'),
    );
    expect(reads).toHaveLength(1);
    expect(JSON.stringify(reads[0]!.Resource)).toContain('InternalToken');
  });

  it("starts the adaptive loop's children (training, evaluation) by name, so no machine depends on another", () => {
    const env = (tasks.Properties!.Environment as { Variables: Record<string, unknown> }).Variables;
    for (const [key, name] of [
      ['SIFT_TRAINING_STATE_MACHINE_ARN', 'training'],
      ['SIFT_EVALUATION_STATE_MACHINE_ARN', 'evaluation'],
    ] as const) {
      expect(JSON.stringify(env[key])).toContain(`:stateMachine:sift-dev-${name}`);
      expect(JSON.stringify(env[key])).not.toMatch(/"Ref":"(Training|Evaluation)/); // pseudo-parameters only
    }
    const starts = policyStatements(t).filter((s) => asArray(s.Action as string[]).includes('states:StartExecution'));
    expect(starts).toHaveLength(1);
    const resources = JSON.stringify(starts[0]!.Resource);
    expect(resources).toContain('sift-dev-training');
    expect(resources).toContain('sift-dev-evaluation');
    expect(resources).not.toContain('sift-dev-adaptive');
  });
});

/** StepFunctionsWorkflowLauncher: the StartExecution it sends, and idempotent re-starts. */
import { SFNClient, type StartExecutionCommand } from '@aws-sdk/client-sfn';
import { FakeControlPlane } from '../helpers/fakeControlPlane';
import { executionName, StepFunctionsWorkflowLauncher, stepFunctionsLaunchers } from '../../src/aws/workflowLauncher';

class RecordingSfn {
  readonly sent: StartExecutionCommand[] = [];
  constructor(private readonly fail?: string) {}
  async send(cmd: StartExecutionCommand): Promise<object> {
    this.sent.push(cmd);
    if (this.fail) {
      const err = new Error(this.fail);
      err.name = this.fail;
      throw err;
    }
    return { executionArn: 'arn' };
  }
}

const ARN = 'arn:aws:states:us-east-1:123456789012:stateMachine:sift-test-evaluation';

it('starts the kind’s state machine with a valid, deterministic name and the input', async () => {
  const sfn = new RecordingSfn();
  await new StepFunctionsWorkflowLauncher({ evaluation: ARN }, sfn as never).start(
    'evaluation',
    'eval-5b0c3c1e-1111-4a4a-8a8a-000000000001',
    { evaluationId: 'e', teamId: 't' },
  );
  expect(sfn.sent[0]!.input).toEqual({
    stateMachineArn: ARN,
    name: 'eval-5b0c3c1e-1111-4a4a-8a8a-000000000001',
    input: '{"evaluationId":"e","teamId":"t"}',
  });
  expect(executionName('a/b c'.repeat(30))).toMatch(/^[A-Za-z0-9_-]{80}$/);
});

it('treats ExecutionAlreadyExists as started, other errors as errors, a missing machine as an error', async () => {
  await expect(
    new StepFunctionsWorkflowLauncher({ evaluation: ARN }, new RecordingSfn('ExecutionAlreadyExists') as never).start(
      'evaluation',
      'x',
      {},
    ),
  ).resolves.toBeUndefined();
  await expect(
    new StepFunctionsWorkflowLauncher({ evaluation: ARN }, new RecordingSfn('AccessDeniedException') as never).start(
      'evaluation',
      'x',
      {},
    ),
  ).rejects.toThrow('AccessDeniedException');
  await expect(
    new StepFunctionsWorkflowLauncher({ evaluation: ARN }, new RecordingSfn() as never).start('generation', 'x', {}),
  ).rejects.toThrow(/no generation state machine/);
  expect(stepFunctionsLaunchers(() => ({}) as never, { stateMachines: {}, jobNamePrefix: 'sift-test-' })).toEqual({});
});

it('against the Step Functions stand-in: a retried start is one execution, a missing state machine an error', async () => {
  const control = await FakeControlPlane.start();
  const sfn = new SFNClient({
    endpoint: control.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'a', secretAccessKey: 'b' },
    maxAttempts: 1,
  });
  try {
    control.stateMachines.add(ARN);
    const launcher = new StepFunctionsWorkflowLauncher({ evaluation: ARN }, sfn);
    // Step Functions retries the Lambda task that starts it (at least once): same name, same input
    await launcher.start('evaluation', 'eval-1', { evaluationId: 'e1' });
    await launcher.start('evaluation', 'eval-1', { evaluationId: 'e1' });
    expect(control.executions.size).toBe(1);
    // after it ended, a late retry is ExecutionAlreadyExists: it ran, nothing to start
    for (const e of control.executions.values()) e.closed = true;
    await expect(launcher.start('evaluation', 'eval-1', { evaluationId: 'e1' })).resolves.toBeUndefined();
    expect(control.executions.size).toBe(1);
    // a stack whose state machine is gone (or a wrong ARN) is an error, not a silent success
    await expect(
      new StepFunctionsWorkflowLauncher({ evaluation: `${ARN}-gone` }, sfn).start('evaluation', 'eval-2', {}),
    ).rejects.toMatchObject({ name: 'StateMachineDoesNotExist' });
  } finally {
    sfn.destroy();
    await control.stop();
  }
});

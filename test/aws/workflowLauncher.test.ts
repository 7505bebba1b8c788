/** StepFunctionsWorkflowLauncher: the StartExecution it sends, and idempotent re-starts. */
import type { StartExecutionCommand } from '@aws-sdk/client-sfn';
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

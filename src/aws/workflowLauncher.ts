/**
 * Starts Step Functions executions for the WorkflowLauncher port (evaluation, generation, adaptive). The
 * execution name is the caller's idempotency key: a retried start of the same name is the same
 * execution, which SFN reports as ExecutionAlreadyExists — success here.
 */
import { SFNClient, StartExecutionCommand } from '@aws-sdk/client-sfn';
import type { Services, WorkflowKind, WorkflowLauncher } from '../core/context';
import { StepFunctionsTrainingLauncher } from './trainingWorkflow';

/** SFN names: 1–80 characters of [A-Za-z0-9-_]. */
export const executionName = (name: string) => name.replace(/[^A-Za-z0-9_-]/g, '-').slice(0, 80);

export class StepFunctionsWorkflowLauncher implements WorkflowLauncher {
  constructor(
    private readonly stateMachines: Partial<Record<WorkflowKind, string>>,
    private readonly sfn: Pick<SFNClient, 'send'> = new SFNClient({}),
  ) {}

  async start(kind: WorkflowKind, name: string, input: Record<string, unknown>): Promise<void> {
    const arn = this.stateMachines[kind];
    if (!arn) throw new Error(`no ${kind} state machine is configured for this function`);
    try {
      await this.sfn.send(
        new StartExecutionCommand({ stateMachineArn: arn, name: executionName(name), input: JSON.stringify(input) }),
      );
    } catch (err) {
      if ((err as { name?: string }).name !== 'ExecutionAlreadyExists') throw err;
    }
  }
}

/** What a Lambda that starts work is told by its stack: the state machines and the SageMaker job prefix. */
export interface LauncherSettings {
  trainingStateMachineArn?: string;
  stateMachines: Partial<Record<WorkflowKind, string>>;
  jobNamePrefix: string;
}

/**
 * The ports that start work on AWS: training jobs (the training state machine) and the other
 * workflows, from the state machine ARNs the stack set. The API starts them for callers; the
 * workflow function starts them for the adaptive loop (its candidate and evaluations). `services`
 * is the graph these ports become part of (read when a launcher runs, after it is built).
 */
export function stepFunctionsLaunchers(
  services: () => Services,
  s: LauncherSettings,
): Pick<Services, 'training' | 'workflows'> {
  return {
    ...(s.trainingStateMachineArn
      ? {
          training: new StepFunctionsTrainingLauncher(services, s.trainingStateMachineArn, {
            jobNamePrefix: s.jobNamePrefix,
          }),
        }
      : {}),
    ...(Object.keys(s.stateMachines).length ? { workflows: new StepFunctionsWorkflowLauncher(s.stateMachines) } : {}),
  };
}

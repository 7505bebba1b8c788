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

  /** From the environment the API stack sets; undefined when no workflow is configured. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): StepFunctionsWorkflowLauncher | undefined {
    const machines: Partial<Record<WorkflowKind, string>> = {};
    if (env.SIFT_EVALUATION_STATE_MACHINE_ARN) machines.evaluation = env.SIFT_EVALUATION_STATE_MACHINE_ARN;
    if (env.SIFT_GENERATION_STATE_MACHINE_ARN) machines.generation = env.SIFT_GENERATION_STATE_MACHINE_ARN;
    if (env.SIFT_ADAPTIVE_STATE_MACHINE_ARN) machines.adaptive = env.SIFT_ADAPTIVE_STATE_MACHINE_ARN;
    return Object.keys(machines).length ? new StepFunctionsWorkflowLauncher(machines) : undefined;
  }
}

/**
 * Gives a Lambda's services what starts work: training jobs (the training state machine) and the
 * other workflows, from the state machine ARNs its stack set. The API starts them for callers; the
 * workflow function starts them for the adaptive loop (its candidate and evaluations).
 */
export function attachLaunchers(svc: Services, env: NodeJS.ProcessEnv = process.env): void {
  const training = env.SIFT_TRAINING_STATE_MACHINE_ARN;
  if (training) {
    svc.training = new StepFunctionsTrainingLauncher(() => svc, training, {
      jobNamePrefix: env.SIFT_TRAINING_JOB_PREFIX ?? `sift-${env.SIFT_STAGE ?? 'prod'}-`,
    });
  }
  const workflows = StepFunctionsWorkflowLauncher.fromEnv(env);
  if (workflows) svc.workflows = workflows;
}

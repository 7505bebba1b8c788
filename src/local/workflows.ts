/**
 * Local mode's Step Functions: the very ASL the CDK stack deploys (lib/workflows/definitions.ts),
 * run in-process by aws-local-stepfunctions, every Lambda task answered by the same task functions
 * the workflow Lambda calls. Executions are not durable across restarts; bootstrap restarts the
 * records they were working on (their tasks are idempotent).
 */
import { StateMachine } from 'aws-local-stepfunctions';
import { WORKFLOWS, lambdaTaskNames, substitute, waitStates } from '../../lib/workflows/definitions';
import type { WorkflowKind, WorkflowLauncher } from '../core/context';
import type { TaskTable } from '../core/workflowTasks';
import type { Logger } from '../http/logger';
import './promiseWithResolvers';

const LOCAL_ARNS = {
  TaskFunctionArn: 'arn:aws:lambda:local:000000000000:function:sift-local-tasks',
  Stage: 'local',
} as const;

interface Machine {
  sm: StateMachine;
  taskNames: Record<string, string>;
  waits: Record<string, number>;
}

export class LocalWorkflowRunner implements WorkflowLauncher {
  private readonly running = new Map<string, Promise<void>>();
  private readonly machines = new Map<WorkflowKind, Machine>();

  /** `pollMs`: what every Wait state lasts here (the deployed loop waits minutes between looks at a job). */
  constructor(
    private readonly tasks: () => TaskTable,
    private readonly logger: Logger,
    private readonly pollMs = 2000,
  ) {}

  private machine(kind: WorkflowKind): Machine {
    let m = this.machines.get(kind);
    if (!m) {
      const raw = WORKFLOWS[kind]();
      // task names are found by the placeholder Resource, so read them before substituting
      m = {
        sm: new StateMachine(substitute(raw, LOCAL_ARNS) as never, {
          validationOptions: { checkArn: false, checkPaths: true },
        }),
        taskNames: lambdaTaskNames(raw),
        waits: Object.fromEntries(waitStates(raw).map((state) => [state, this.pollMs])),
      };
      this.machines.set(kind, m);
    }
    return m;
  }

  async start(kind: WorkflowKind, name: string, input: Record<string, unknown>): Promise<void> {
    if (this.running.has(name)) return; // the same start twice is one execution, as with SFN names
    const { sm, taskNames, waits } = this.machine(kind);
    const tasks = this.tasks();
    const handlers: Record<string, (payload: { task: string; input: never }) => Promise<unknown>> = {};
    for (const [state, task] of Object.entries(taskNames)) {
      const fn = tasks[task];
      handlers[state] = async (payload) => {
        if (!fn) {
          const err = new Error(`workflow task '${task}' has no local handler`);
          err.name = 'Sift.UnsupportedTask';
          throw err;
        }
        return fn(payload.input);
      };
    }
    const exec = sm.run(input as never, {
      overrides: { taskResourceLocalHandlers: handlers as never, waitTimeOverrides: waits },
      context: {
        Execution: { Id: `arn:aws:states:local:000000000000:execution:sift-local-${kind}:${name}`, Name: name },
      } as never,
    });
    const done = exec.result.then(
      () => undefined,
      (err: unknown) => this.logger.warn('workflow execution failed', { kind, name, error: (err as Error).message }),
    );
    this.running.set(name, done);
    void done.finally(() => this.running.delete(name));
  }

  /** Resolves once no execution is running (tests, shutdown). */
  async idle(): Promise<void> {
    while (this.running.size) await Promise.all([...this.running.values()]);
  }
}

/**
 * The task function of the Step Functions workflows: `{task, input}` → the task's result.
 * Errors named `Sift.ServiceWaking` or `Sift.TransientError` are retried by the state machine (each on
 * its own retrier, lib/workflows/definitions.ts); anything else goes to the
 * workflow's failure branch, which records the reason on the job.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import { completeTraining, prepareTraining, recordTrainingFailure } from '../../aws/trainingWorkflow';
import { runOnEncoderService } from '../../aws/encoderTasks';
import { adaptiveTasks } from '../../core/adaptive/workflow';
import { evaluationTasks } from '../../core/evaluation/workflow';
import { syntheticDataTasks } from '../../core/syntheticData/workflow';
import type { TaskTable } from '../../core/workflowTasks';
import { composeLambda, lambdaSettings } from './compose';
import { logger } from './observability';

const settings = lambdaSettings();
// the adaptive loop starts training jobs and evaluations like the API does
const svc = composeLambda(settings, { launchers: true });
const env = settings.training;

type Input = { jobId: string; teamId: string; [k: string]: unknown };

/** Shards need the engine or the decoder: they run in the gateway (ECS), reached over the VPC. */
const onGateway = (task: string) => (input: unknown) => runOnEncoderService(task, input) as Promise<never>;

const tasks: TaskTable = {
  'training.prepare': (input: Input) => prepareTraining(svc, env, input),
  'training.complete': (input: Parameters<typeof completeTraining>[1]) => completeTraining(svc, input),
  'training.failed': (input: Parameters<typeof recordTrainingFailure>[1]) => recordTrainingFailure(svc, input),
  ...evaluationTasks(svc, onGateway('evaluation.shard')),
  ...syntheticDataTasks(svc, onGateway('generation.shard')),
  ...adaptiveTasks(svc),
} as TaskTable;

async function handle(event: { task: string; input: Input }): Promise<unknown> {
  const task = tasks[event.task];
  if (!task) {
    const err = new Error(`workflow task '${event.task}' is not known to this function (an older deployment?)`);
    err.name = 'Sift.UnsupportedTask';
    throw err;
  }
  return task(event.input as never);
}

export const handler = middy(handle).use(injectLambdaContext(logger));

/**
 * The task function of the Step Functions workflows: `{task, input}` → the task's result.
 * Errors named `Sift.TransientError` are retried by the state machine; anything else goes to the
 * workflow's failure branch, which records the reason on the job.
 */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import { servicesFromEnv } from '../src/adapters/aws';
import { completeTraining, prepareTraining, recordTrainingFailure, type TrainingEnv } from '../src/aws/trainingWorkflow';
import { runOnEncoderService } from '../src/aws/encoderTasks';
import { aggregateEvaluation, prepareEvaluation, recordEvaluationFailure } from '../src/core/evaluation/workflow';
import { assembleGeneration, planGeneration, recordGenerationFailure } from '../src/core/generation/workflow';
import { logger } from '../src/lambda/observability';

const svc = servicesFromEnv('dynamodb');
const env: TrainingEnv = {
  jobNamePrefix: process.env['SIFT_TRAINING_JOB_PREFIX'] ?? `sift-${process.env['SIFT_STAGE'] ?? 'prod'}-`,
  instanceType: process.env['SIFT_TRAINING_INSTANCE_TYPE'] ?? 'ml.g5.xlarge',
  maxRuntimeSeconds: Number(process.env['SIFT_TRAINING_MAX_RUNTIME_SECONDS'] ?? 86_400),
};

type Input = { jobId: string; teamId: string; [k: string]: unknown };

async function handle(event: { task: string; input: Input }): Promise<unknown> {
  switch (event.task) {
    case 'training.prepare':
      return prepareTraining(svc, env, event.input);
    case 'training.complete':
      return completeTraining(svc, event.input as Parameters<typeof completeTraining>[1]);
    case 'training.failed':
      return recordTrainingFailure(svc, event.input as Parameters<typeof recordTrainingFailure>[1]);
    case 'evaluation.prepare':
      return prepareEvaluation(svc, event.input as unknown as Parameters<typeof prepareEvaluation>[1]);
    case 'evaluation.shard':
      // the engine lives in the encoder service, not in a Lambda
      return runOnEncoderService('evaluation.shard', event.input);
    case 'evaluation.aggregate':
      return aggregateEvaluation(svc, event.input as unknown as Parameters<typeof aggregateEvaluation>[1]);
    case 'generation.plan':
      return planGeneration(svc, event.input as unknown as Parameters<typeof planGeneration>[1]);
    case 'generation.shard':
      // the decoder and the engine are reached from the gateway, not from a Lambda
      return runOnEncoderService('generation.shard', event.input);
    case 'generation.assemble':
      return assembleGeneration(svc, event.input as unknown as Parameters<typeof assembleGeneration>[1]);
    case 'generation.failed':
      return recordGenerationFailure(svc, event.input as unknown as Parameters<typeof recordGenerationFailure>[1]);
    case 'evaluation.failed':
      return recordEvaluationFailure(svc, event.input as unknown as Parameters<typeof recordEvaluationFailure>[1]);
    default: {
      // Adaptive-loop tasks arrive with that feature (see ARCHITECTURE.md).
      const err = new Error(`workflow task '${event.task}' is not available in this release`);
      err.name = 'Sift.UnsupportedTask';
      throw err;
    }
  }
}

export const handler = middy(handle).use(injectLambdaContext(logger));

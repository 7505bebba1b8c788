/** EventBridge "SageMaker Training Job State Change" → the Sift job record (running/stopped/failed). */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { EventBridgeEvent } from 'aws-lambda';
import { applySageMakerEvent } from '../../aws/trainingWorkflow';
import { composeLambda, lambdaSettings } from './compose';
import { logger } from './observability';

const settings = lambdaSettings();
const svc = composeLambda(settings);
const { jobNamePrefix } = settings.training;

type Detail = { TrainingJobName: string; TrainingJobStatus: string; FailureReason?: string };

async function handle(event: EventBridgeEvent<'SageMaker Training Job State Change', Detail>): Promise<void> {
  logger.info('sagemaker state change', { job: event.detail.TrainingJobName, status: event.detail.TrainingJobStatus });
  await applySageMakerEvent(svc, { jobNamePrefix }, event.detail);
}

export const handler = middy(handle).use(injectLambdaContext(logger));

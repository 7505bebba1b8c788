/** Background work on Lambda: SQS messages → the shared worker, with partial batch failures. */
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import middy from '@middy/core';
import type { SQSBatchResponse, SQSEvent } from 'aws-lambda';
import type { WorkMessage } from '../../core/ports';
import { handleWorkMessage } from '../../core/worker';
import { composeLambda, lambdaSettings } from './compose';
import { logger } from './observability';

const svc = composeLambda(lambdaSettings());

async function handle(event: SQSEvent): Promise<SQSBatchResponse> {
  const batchItemFailures: SQSBatchResponse['batchItemFailures'] = [];
  for (const record of event.Records) {
    try {
      await handleWorkMessage(svc, JSON.parse(record.body) as WorkMessage);
    } catch (error) {
      logger.error('work message failed', { messageId: record.messageId, error });
      batchItemFailures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures };
}

export const handler = middy(handle).use(injectLambdaContext(logger));

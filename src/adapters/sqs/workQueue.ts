import { SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { WorkQueue, WorkMessage } from '../../core/ports';

export class SqsWorkQueue implements WorkQueue {
  constructor(
    private readonly sqs: SQSClient,
    private readonly queueUrl: string,
  ) {}

  async send(message: WorkMessage): Promise<void> {
    await this.sqs.send(new SendMessageCommand({ QueueUrl: this.queueUrl, MessageBody: JSON.stringify(message) }));
  }
}

import { WriteConflict, type WorkMessage } from './ports';
import type { Services } from './context';
import { failVersion, processVersion } from './datasets/service';
import type { DatasetValidator } from './datasets/validation';

/** How this runtime runs the heavy parts of a message (local mode: dataset rows in a worker thread). */
export interface WorkerRuntime {
  validateDataset?: DatasetValidator;
}

/**
 * Runs one background message. Shared by the SQS Lambda and the in-process queue. A message that
 * throws marks its record failed with the reason, so nothing stays `processing` forever; one whose
 * process dies instead is ended by the attempt limit (datasets/service.ts MAX_PROCESSING_ATTEMPTS).
 */
export async function handleWorkMessage(
  svc: Services,
  message: WorkMessage,
  runtime: WorkerRuntime = {},
): Promise<void> {
  switch (message.type) {
    case 'dataset.process':
      try {
        await processVersion(svc, message.team_id, message.dataset_name, message.version, runtime.validateDataset);
      } catch (err) {
        await failVersion(
          svc,
          message.team_id,
          message.dataset_name,
          message.version,
          `processing failed: ${(err as Error).message}`,
        ).catch((recordError: unknown) => {
          // a version no longer `processing` (finished or deleted meanwhile) keeps its state; a store failure here propagates (the message is retried)
          if (!(recordError instanceof WriteConflict)) throw recordError;
        });
        throw err;
      }
      return;
    case 'usage.apply':
      // idempotent: a redelivery after a partial success re-applies only what is missing; a batch
      // too old to apply safely is kept for reconciliation (billing/ledger.ts)
      await svc.usage.applyKept(message.batch);
      return;
  }
}

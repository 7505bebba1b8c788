import { UsageLedger } from '../../core/billing/ledger';
import { QueueUsageSpool } from '../../core/billing/spool';
import { emfUsageMetrics } from '../metrics/emfUsageMetrics';
import { defaultConfig, type Services, type SiftConfig } from '../../core/context';
import type { Logger, WorkMessage } from '../../core/ports';
import { localDatasetFiles } from '../fs/datasetFiles';
import { MemoryBlobStore } from './blobStore';
import { MemoryRateLimiter } from './rateLimiter';
import { MemoryRecordStore } from './recordStore';

const quiet: Logger = { info: () => {}, warn: () => {}, error: () => {} };

export interface MemoryServices extends Services {
  records: MemoryRecordStore;
  blobs: MemoryBlobStore;
  /** Messages handed to the work queue, in order (nothing runs them). */
  sent: WorkMessage[];
  /** Finance's EMF lines, as they would go to stdout. */
  emf: string[];
}

/**
 * A whole service graph in memory, for core unit tests: the domain runs as in every deployment,
 * its records and blobs in maps, usage written through before each call returns. `now` is settable.
 */
export function createMemoryServices(opts: { now?: () => Date; config?: Partial<SiftConfig> } = {}): MemoryServices {
  const records = new MemoryRecordStore();
  const sent: WorkMessage[] = [];
  const emf: string[] = [];
  const queue = { send: async (m: WorkMessage) => void sent.push(structuredClone(m)) };
  const usageMetrics = emfUsageMetrics((line) => emf.push(line));
  const config = { ...defaultConfig, ...(opts.config ?? {}) };
  return {
    config,
    records,
    blobs: new MemoryBlobStore(),
    queue,
    sent,
    emf,
    rateLimiter: new MemoryRateLimiter(),
    usage: new UsageLedger({
      records,
      spool: new QueueUsageSpool(queue),
      metrics: usageMetrics,
      logger: quiet,
      mode: 'write-through',
      retentionDays: config.inferenceRetentionDays,
    }),
    usageMetrics,
    datasetFiles: localDatasetFiles,
    now: opts.now ?? (() => new Date()),
  };
}

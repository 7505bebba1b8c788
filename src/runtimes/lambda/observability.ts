import { Logger } from '@aws-lambda-powertools/logger';
import { Metrics } from '@aws-lambda-powertools/metrics';
import { Tracer } from '@aws-lambda-powertools/tracer';
import type { Logger as SiftLogger } from '../../http/logger';

/** One Powertools logger/metrics/tracer set per Lambda container. */
export const logger = new Logger({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'sift' });
export const metrics = new Metrics({
  namespace: process.env.POWERTOOLS_METRICS_NAMESPACE ?? 'Sift',
  serviceName: 'sift',
});
export const tracer = new Tracer({ serviceName: process.env.POWERTOOLS_SERVICE_NAME ?? 'sift' });

export const siftLogger: SiftLogger = {
  info: (m, e) => logger.info(m, e ?? {}),
  warn: (m, e) => logger.warn(m, e ?? {}),
  error: (m, e) => logger.error(m, e ?? {}),
};

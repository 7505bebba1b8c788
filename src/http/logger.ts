import { Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';
import type { Logger } from '../core/logger';

export type { Logger } from '../core/logger';

export function createLogger(level = process.env.SIFT_LOG_LEVEL ?? 'INFO'): Logger {
  const logger = new PowertoolsLogger({ serviceName: 'sift', logLevel: level as 'INFO' });
  return {
    info: (m, e) => logger.info(m, e ?? {}),
    warn: (m, e) => logger.warn(m, e ?? {}),
    error: (m, e) => logger.error(m, e ?? {}),
  };
}

export const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };

import { Logger as PowertoolsLogger } from '@aws-lambda-powertools/logger';

/** The slice of a logger the core needs; Powertools' Logger satisfies it (JSON lines on stdout). */
export interface Logger {
  info(message: string, extra?: Record<string, unknown>): void;
  warn(message: string, extra?: Record<string, unknown>): void;
  error(message: string, extra?: Record<string, unknown>): void;
}

export function createLogger(level = process.env['SIFT_LOG_LEVEL'] ?? 'INFO'): Logger {
  const logger = new PowertoolsLogger({ serviceName: 'sift', logLevel: level as 'INFO' });
  return {
    info: (m, e) => logger.info(m, e ?? {}),
    warn: (m, e) => logger.warn(m, e ?? {}),
    error: (m, e) => logger.error(m, e ?? {}),
  };
}

export const silentLogger: Logger = { info: () => {}, warn: () => {}, error: () => {} };

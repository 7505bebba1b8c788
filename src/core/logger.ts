/** The slice of a logger the core needs; Powertools' Logger satisfies it (src/http/logger.ts: JSON lines on stdout). */
export interface Logger {
  info(message: string, extra?: Record<string, unknown>): void;
  warn(message: string, extra?: Record<string, unknown>): void;
  error(message: string, extra?: Record<string, unknown>): void;
}

/**
 * What a long-lived Sift process (`sift serve`, the ECS gateway) does with an error nobody caught:
 * an `uncaughtException`, or an `unhandledRejection` (which Node ≥ 15 raises as one).
 *
 * Policy: log it, then exit cleanly, with status 1, for a supervisor to restart the process. Not
 * "log and keep serving": after an uncaught exception Node's own documentation says the process is
 * in an undefined state (https://nodejs.org/api/process.html#warning-using-uncaughtexception-correctly),
 * and no request can get here — the node:http listener answers every request's failure itself
 * (src/runtimes/node/httpAdapter.ts) — so what does is a bug in background work whose state we can't trust.
 * "Cleanly" means: stop accepting requests, let those in flight finish, write the usage still
 * buffered (money) and close the stores, within a deadline; then exit. Locally the next start
 * recovers what was interrupted (src/core/bootstrap.ts: datasets re-queued, running training jobs
 * marked failed with the reason); on AWS, ECS replaces the task.
 */
import type { Logger } from '../core/logger';

/** How long the shutdown after a fatal error may take before the process exits anyway. */
export const FATAL_SHUTDOWN_DEADLINE_MS = 20_000;

/** The slice of `process` the policy uses (tests pass a stand-in). */
export interface ProcessLike {
  on(event: 'uncaughtException' | 'unhandledRejection', listener: (error: unknown) => void): unknown;
  off(event: 'uncaughtException' | 'unhandledRejection', listener: (error: unknown) => void): unknown;
  exit(code: number): void;
}

export interface FatalErrorPolicy {
  logger: Logger;
  /** Stops accepting requests, finishes those in flight, flushes usage and closes the stores. */
  shutdown: () => Promise<void>;
  deadlineMs?: number;
  process?: ProcessLike;
}

/** Installs the policy; returns a function that removes it. A second fatal error while shutting down is logged, and the shutdown goes on. */
export function exitCleanlyOnFatalErrors(policy: FatalErrorPolicy): () => void {
  const proc: ProcessLike = policy.process ?? process;
  let exiting = false;
  const handlers = (['uncaughtException', 'unhandledRejection'] as const).map((event) => {
    const listener = (error: unknown) => {
      policy.logger.error(`${event}: ${exiting ? 'while shutting down' : 'shutting down cleanly for a restart'}`, {
        error,
      });
      if (exiting) return;
      exiting = true;
      const deadline = setTimeout(() => {
        policy.logger.error('shutdown after a fatal error ran past its deadline; exiting now', {
          deadline_ms: policy.deadlineMs ?? FATAL_SHUTDOWN_DEADLINE_MS,
        });
        proc.exit(1);
      }, policy.deadlineMs ?? FATAL_SHUTDOWN_DEADLINE_MS); // not unref'd: it also keeps the process alive until the exit
      policy.shutdown().then(
        () => {
          clearTimeout(deadline);
          proc.exit(1);
        },
        (shutdownError: unknown) => {
          clearTimeout(deadline);
          policy.logger.error('shutdown after a fatal error failed', { error: shutdownError });
          proc.exit(1);
        },
      );
    };
    proc.on(event, listener);
    return [event, listener] as const;
  });
  return () => {
    for (const [event, listener] of handlers) proc.off(event, listener);
  };
}

import type { WorkHandler, WorkMessage, WorkQueue } from '../../core/ports';

/**
 * Runs messages in this process with bounded concurrency. Durability comes from the records: on
 * start, local mode re-enqueues every dataset version still marked `processing` (see recovery.ts).
 */
export class InProcessWorkQueue implements WorkQueue {
  private readonly pending: WorkMessage[] = [];
  private running = 0;
  private readonly idleWaiters: (() => void)[] = [];

  constructor(
    private readonly handler: WorkHandler,
    private readonly concurrency = 2,
    private readonly onError: (err: unknown, message: WorkMessage) => void = () => {},
  ) {}

  async send(message: WorkMessage): Promise<void> {
    this.pending.push(message);
    queueMicrotask(() => this.pump());
  }

  /** Resolves once nothing is queued or running (used at shutdown and by tests). */
  idle(): Promise<void> {
    if (this.running === 0 && this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running < this.concurrency && this.pending.length > 0) {
      const message = this.pending.shift() as WorkMessage;
      this.running += 1;
      let run: Promise<void>;
      try {
        run = this.handler(message);
      } catch (err) {
        // A handler that throws before returning its promise is a failure like any other, not an
        // uncaught exception in this microtask (which would kill the process and wedge `running`).
        run = Promise.reject(err);
      }
      run
        .catch((err) => this.onError(err, message))
        .finally(() => {
          this.running -= 1;
          this.pump();
          if (this.running === 0 && this.pending.length === 0) for (const w of this.idleWaiters.splice(0)) w();
        });
    }
  }
}

/**
 * The process policy of `sift serve` and the ECS gateway (src/http/fatalErrors.ts): an uncaught
 * exception or unhandled rejection is logged, the service shuts down cleanly (stores closed, usage
 * written) and the process exits 1 for its supervisor to restart — once, whatever else fails meanwhile.
 * A stand-in for `process` records the exit instead of ending Jest.
 */
import { EventEmitter } from 'node:events';
import { exitCleanlyOnFatalErrors, type ProcessLike } from '../../src/http/fatalErrors';

function fakeProcess() {
  const events = new EventEmitter();
  const exits: number[] = [];
  let exited!: (code: number) => void;
  const exit = new Promise<number>((ok) => (exited = ok));
  const proc: ProcessLike = {
    on: (event, listener) => events.on(event, listener),
    off: (event, listener) => events.off(event, listener),
    exit: (code) => {
      exits.push(code);
      exited(code);
    },
  };
  return { events, exits, exit, proc };
}

function recordingLogger() {
  const lines: { message: string; extra?: Record<string, unknown> }[] = [];
  return {
    lines,
    logger: {
      info: () => {},
      warn: () => {},
      error: (message: string, extra?: Record<string, unknown>) =>
        void lines.push({ message, ...(extra ? { extra } : {}) }),
    },
  };
}

it.each(['uncaughtException', 'unhandledRejection'] as const)(
  '%s: logs it, shuts down cleanly, then exits 1',
  async (event) => {
    const { events, exits, exit, proc } = fakeProcess();
    const { lines, logger } = recordingLogger();
    const steps: string[] = [];
    let finishShutdown!: () => void;
    const uninstall = exitCleanlyOnFatalErrors({
      logger,
      process: proc,
      shutdown: () => {
        steps.push('shutdown started');
        return new Promise<void>((ok) => (finishShutdown = ok));
      },
    });
    const boom = new Error('a bug in background work');
    events.emit(event, boom);
    expect(lines).toEqual([{ message: `${event}: shutting down cleanly for a restart`, extra: { error: boom } }]);
    expect(steps).toEqual(['shutdown started']);
    expect(exits).toEqual([]); // not before the stores are closed
    // a second fatal error while shutting down is logged, and starts nothing new
    events.emit(event, new Error('another one'));
    expect(steps).toEqual(['shutdown started']);
    expect(lines[1]!.message).toBe(`${event}: while shutting down`);
    finishShutdown();
    expect(await exit).toBe(1);
    expect(exits).toEqual([1]);
    uninstall();
    expect(events.listenerCount(event)).toBe(0);
  },
);

it('a shutdown that fails still exits 1, and says why', async () => {
  const { events, exit, proc } = fakeProcess();
  const { lines, logger } = recordingLogger();
  exitCleanlyOnFatalErrors({ logger, process: proc, shutdown: () => Promise.reject(new Error('the store is gone')) });
  events.emit('uncaughtException', new Error('boom'));
  expect(await exit).toBe(1);
  expect(lines.map((l) => l.message)).toEqual([
    'uncaughtException: shutting down cleanly for a restart',
    'shutdown after a fatal error failed',
  ]);
});

it('a shutdown that never finishes is cut off at the deadline (exit 1)', async () => {
  const { events, exit, proc } = fakeProcess();
  const { lines, logger } = recordingLogger();
  exitCleanlyOnFatalErrors({ logger, process: proc, shutdown: () => new Promise<void>(() => {}), deadlineMs: 1 });
  events.emit('unhandledRejection', new Error('boom'));
  expect(await exit).toBe(1);
  expect(lines.map((l) => l.message)).toEqual([
    'unhandledRejection: shutting down cleanly for a restart',
    'shutdown after a fatal error ran past its deadline; exiting now',
  ]);
});

/**
 * Local mode's dataset validator: rows are validated in child processes with a bounded heap, not on
 * the thread that serves every tenant's requests (security review F4). A file whose rows need more
 * memory than that kills only its child: the rejection reaches the core's `processVersion`, which
 * marks the version failed with the reason, and the server keeps serving.
 *
 * Why processes and not worker threads: a worker's `resourceLimits` do not contain every OOM. One
 * large allocation past the limit (JSON.parse of a big row or .json file is exactly that) aborts
 * the whole process with "FATAL ERROR: Reached heap limit" (nodejs/node#47224; reproduced here with
 * a 16 MB worker parsing a 20 MB .json: the server process died). A child's heap is its own.
 *
 * Children are kept between files (starting one loads the TypeScript validator, about a second)
 * and unref'd while idle, so they never hold the server open; one that died is not reused.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import type { Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';
import type { DatasetValidator, ValidationJob, ValidationOutcome } from '../core/datasets/validation';

export interface ValidationProcessOptions {
  /** Each child's V8 heap limit (--max-old-space-size), MB. A .json file up to 64 MiB is parsed whole: leave room. */
  heapMb: number;
  /** Idle children kept for the next file (the local work queue runs 2 messages at once). */
  keepIdle?: number;
  /** The child's entry (tests point it at one that crashes). */
  entry?: URL;
}

export const DEFAULT_VALIDATION_HEAP_MB = 1024;

/** What the child may see of the server's environment: not its keys or credentials. */
const CHILD_ENV = ['PATH', 'HOME', 'TMPDIR', 'TMP', 'TEMP', 'LANG', 'TZ'];

/** The child died before it answered; the message is the version's failure reason. */
export class ValidationProcessDied extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ValidationProcessDied';
  }
}

type Reply = { outcome: ValidationOutcome } | { error: string };

export class ValidationProcesses {
  private readonly idle: ChildProcess[] = [];
  /** The end of each child's stderr: it says why a child died (V8 prints "heap out of memory" before aborting). */
  private readonly stderrTail = new WeakMap<ChildProcess, { text: string }>();
  private readonly entry: string;
  /** Children started so far (for tests: a dead one is replaced, a live one reused). */
  started = 0;

  constructor(private readonly opts: ValidationProcessOptions) {
    this.entry = fileURLToPath(opts.entry ?? new URL('./validationChild.mjs', import.meta.url));
  }

  /** The core's `DatasetValidator`, run in a child process. */
  readonly validate: DatasetValidator = async (source, job) => {
    // The bytes are copied here (I/O only; the core has capped them) and read back by the child,
    // beside the rows file, in the directory processing removes when it ends.
    const sourceFile = join(dirname(job.rowsFile), 'source');
    await pipeline(Readable.from(source), createWriteStream(sourceFile));
    const child = this.idle.pop() ?? this.start();
    let died = false;
    try {
      return await this.run(child, sourceFile, job);
    } catch (err) {
      died = err instanceof ValidationProcessDied;
      throw err;
    } finally {
      // a child whose validator threw is fine: only a dead one is dropped
      if (!died) this.release(child);
    }
  };

  async close(): Promise<void> {
    await Promise.all(
      this.idle.splice(0).map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.ref(); // an idle child is unref'd: without this nothing would wait for its exit
            child.kill();
          }),
      ),
    );
  }

  private start(): ChildProcess {
    this.started += 1;
    const env = Object.fromEntries(
      CHILD_ENV.flatMap((k) => (process.env[k] === undefined ? [] : [[k, process.env[k]!]])),
    );
    const child = fork(this.entry, [], {
      execArgv: [`--max-old-space-size=${this.opts.heapMb}`],
      env,
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    const tail = { text: '' };
    this.stderrTail.set(child, tail);
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (s: string) => (tail.text = (tail.text + s).slice(-4000)));
    // one that dies while idle leaves the pool (a message sent to it would never be answered)
    child.once('exit', () => {
      const at = this.idle.indexOf(child);
      if (at !== -1) this.idle.splice(at, 1);
    });
    return child;
  }

  private release(child: ChildProcess): void {
    if (this.idle.length >= (this.opts.keepIdle ?? 2)) {
      child.kill();
      return;
    }
    // idle: neither the process, its channel nor its stderr pipe keeps the server's event loop alive
    child.unref();
    child.channel?.unref();
    (child.stderr as Socket | null)?.unref();
    this.idle.push(child);
  }

  private run(child: ChildProcess, sourceFile: string, job: ValidationJob): Promise<ValidationOutcome> {
    child.ref();
    child.channel?.ref();
    (child.stderr as Socket | null)?.ref();
    return new Promise<ValidationOutcome>((resolve, reject) => {
      const done = () => {
        child.off('message', onMessage);
        child.off('exit', onExit);
      };
      const onMessage = (m: Reply) => {
        done();
        if ('outcome' in m) resolve(m.outcome);
        else reject(new Error(m.error));
      };
      const onExit = (code: number | null, signal: NodeJS.Signals | null) => {
        done();
        const stderr = this.stderrTail.get(child)?.text ?? '';
        reject(
          new ValidationProcessDied(
            /heap out of memory|Allocation failed/.test(stderr)
              ? `the validation process ran out of memory (its heap is limited to ${this.opts.heapMb} MB): the file's rows need more than that`
              : `the validation process ${signal ? `was killed by ${signal}` : `exited with code ${code}`} before it finished`,
          ),
        );
      };
      child.on('message', onMessage);
      child.on('exit', onExit);
      child.send({ sourceFile, job });
    });
  }
}

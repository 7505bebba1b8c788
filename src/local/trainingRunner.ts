import { spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { pipeline } from 'node:stream/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { create as createTar } from 'tar';
import { findBaseModel } from '../core/catalog';
import type { Services } from '../core/context';
import { NotFoundError } from '../core/errors';
import { WriteConflict } from '../core/ports';
import { newUuid } from '../core/ids';
import { containedPath } from '../core/safePath';
import { missingAsUndefined } from '../adapters/fs/missingFile';
import { InProcessPredictor, validationMetrics } from '../core/evaluation/workflow';
import { archiveKey, checkpointPrefix, logChunkKey, modelPrefix, type LogLine } from '../core/training/artifacts';
import type { TrainingLauncher } from '../core/training/launcher';
import {
  checkpointSaved,
  completeTraining,
  failTraining,
  prepareTraining,
  trainingRunning,
  type LifecycleReport,
  type PreparedTraining,
} from '../core/training/lifecycle';
import { getTrainingJob, recordJobEpochs, recordJobProgress, type TrainingJob } from '../core/trainingJobs';
import type { Logger } from '../http/logger';

export interface RunnerOptions {
  /** Job directories and the base-model cache live here. */
  workDir: string;
  /** Python with the training container's requirements (the project venv). */
  python: string;
  /** `containers/training`: the entrypoint is `python -m sift_trainer.job` run from here. */
  trainerDir: string;
  maxConcurrent: number;
  /** How long a stopped job may take to save its checkpoint before it is killed. */
  stopGraceMs: number;
  logger: Logger;
  /**
   * Resolves once the trainer's venv and these catalog models are built (local first start: they
   * build in the background); rejects with the reason when that build failed. Jobs wait for it
   * `requested`, and fail with the reason.
   */
  whenBuilt?: (modelIds: string[], signal: AbortSignal) => Promise<void>;
}

/**
 * The only variables of the service's environment a trainer sees (F15c): what a process needs, the
 * thread and math-library settings sift_trainer/process.py and torch read, and where torch and
 * Hugging Face keep their caches. Everything else stays out — SIFT_ADMIN_KEY, AWS credentials, the
 * internal token — since the trainer runs checkpoint and dataset content the service did not write.
 */
export const TRAINER_ENV_NAMES = [
  'PATH',
  'HOME',
  'USER',
  'LOGNAME',
  'LANG',
  'LANGUAGE',
  'LC_ALL',
  'LC_CTYPE',
  'TZ',
  'TMPDIR',
  'TMP',
  'TEMP',
  'SIFT_TORCH_THREADS',
  'OMP_NUM_THREADS',
  'OMP_WAIT_POLICY',
  'MKL_NUM_THREADS',
  'OPENBLAS_NUM_THREADS',
  'TORCH_HOME',
  'HF_HOME',
  'HF_HUB_CACHE',
  'HF_DATASETS_CACHE',
  'XDG_CACHE_HOME',
  'CUDA_VISIBLE_DEVICES',
  'PYTORCH_CUDA_ALLOC_CONF',
] as const;

/** The trainer's environment: the allow-listed variables that are set, then the job's own. */
export function trainerEnv(jobDir: string, from: NodeJS.ProcessEnv = process.env): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of TRAINER_ENV_NAMES) {
    const value = from[name];
    if (value !== undefined) env[name] = value;
  }
  return {
    ...env,
    SIFT_JOB_DIR: jobDir,
    PYTHONUNBUFFERED: '1',
    HF_HUB_OFFLINE: '1',
    TRANSFORMERS_OFFLINE: '1',
    TOKENIZERS_PARALLELISM: 'false',
    // a local job is never restarted (one a crash interrupted is failed), and every checkpoint's files
    // are uploaded: no optimizer state in them (containers/training/sift_trainer/job/resume.py)
    SIFT_RESUME_STATE: '0',
  };
}

const EPOCHS_WRITE_ATTEMPTS = 4;
const EPOCHS_RETRY_DELAY_MS = 250;

type TrainerEvent = { event: string; [k: string]: unknown };
/** How the trainer ended; `saveError`: a checkpoint it announced that could not be saved (the job fails with it). */
type TrainerExit = { code: number | null; signal: string | null; completed?: TrainerEvent; saveError?: Error };

/**
 * Runs training jobs as subprocesses with the SageMaker directory contract, at most
 * `maxConcurrent` at a time (the rest wait in submission order). Everything a job produces
 * (logs, checkpoints, the model, its archive) goes to the blob store, and its state to the record.
 */
export class LocalTrainingRunner implements TrainingLauncher {
  private readonly waiting: { teamId: string; jobId: string }[] = [];
  private readonly running = new Map<string, ChildProcess>();
  private active = 0;
  private readonly idleWaiters: (() => void)[] = [];
  /** Aborted on shutdown: a job waiting for the background build stays `requested` for the next start. */
  private readonly closing = new AbortController();

  constructor(
    private readonly svc: () => Services,
    private readonly opts: RunnerOptions,
  ) {}

  async submit(teamId: string, jobId: string): Promise<void> {
    this.waiting.push({ teamId, jobId });
    queueMicrotask(() => this.pump());
  }

  async stop(_teamId: string, jobId: string): Promise<void> {
    const i = this.waiting.findIndex((w) => w.jobId === jobId);
    if (i >= 0) this.waiting.splice(i, 1);
    const child = this.running.get(jobId);
    if (!child) return;
    child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), this.opts.stopGraceMs);
    kill.unref();
    child.once('exit', () => clearTimeout(kill));
  }

  /** Resolves once nothing runs and nothing can start (with maxConcurrent 0, jobs only wait). */
  idle(): Promise<void> {
    if (this.isIdle()) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private isIdle(): boolean {
    return this.active === 0 && (this.waiting.length === 0 || this.opts.maxConcurrent === 0);
  }

  /** Stops every running job (service shutdown); they end `stopped` with their checkpoint. */
  async shutdown(): Promise<void> {
    this.closing.abort();
    this.waiting.splice(0);
    for (const [jobId] of this.running) await this.stop('', jobId);
    await this.idle();
  }

  private pump(): void {
    while (this.active < this.opts.maxConcurrent && this.waiting.length > 0) {
      const next = this.waiting.shift() as { teamId: string; jobId: string };
      this.active += 1;
      this.run(next.teamId, next.jobId)
        .catch((error) => this.opts.logger.error('training runner failed', { job_id: next.jobId, error }))
        .finally(() => {
          this.active -= 1;
          this.pump();
          if (this.isIdle()) for (const w of this.idleWaiters.splice(0)) w();
        });
    }
  }

  private async run(teamId: string, jobId: string): Promise<void> {
    const svc = this.svc();
    if (this.opts.whenBuilt) {
      const requested = await getTrainingJob(svc, teamId, jobId).catch((err: unknown) => {
        if (err instanceof NotFoundError) return undefined; // deleted while it waited: nothing to run
        throw err;
      });
      if (!requested) return;
      try {
        await this.opts.whenBuilt(
          findBaseModel(requested.base_model) ? [requested.base_model] : [],
          this.closing.signal,
        );
      } catch (err) {
        if (this.closing.signal.aborted) return;
        await this.fail(svc, teamId, jobId, `cannot train yet: ${(err as Error).message}`);
        return;
      }
    }
    // local mode trains on this machine's CPU: priced as `local` (core/billing/prices.ts)
    const job = await trainingRunning(svc, teamId, jobId, { instance_type: 'local' });
    if (!job) return; // stopped or deleted while it waited
    const dir = join(this.opts.workDir, 'jobs', jobId);
    const log = new LogWriter(svc, teamId, jobId);
    const report: LifecycleReport = {
      logger: this.opts.logger,
      jobLog: { line: (text) => log.system(text), flush: () => log.flush() },
    };
    try {
      await rm(dir, { recursive: true, force: true });
      await this.prepare(svc, teamId, job, dir, log);
      const exit = await this.execute(svc, teamId, job, dir, log);
      await log.flush();
      await this.finish(svc, teamId, job, dir, exit, report);
    } catch (err) {
      log.system(`runner error: ${(err as Error).message}`);
      // the job still fails with the reason on its record when its log cannot be written
      await log
        .flush()
        .catch((error: unknown) =>
          this.opts.logger.error("could not write a failed training job's log", { job_id: jobId, error }),
        );
      await this.fail(svc, teamId, jobId, (err as Error).message);
    } finally {
      // `force` already ignores a missing directory; anything else leaves files behind, said here
      await rm(dir, { recursive: true, force: true }).catch((error: unknown) =>
        this.opts.logger.warn('could not remove a training job directory', { job_id: jobId, dir, error }),
      );
    }
  }

  /** Lays out the SageMaker directories the lifecycle names: hyperparameters, the train (and validation) channel, the base model. */
  private async prepare(svc: Services, teamId: string, job: TrainingJob, dir: string, log: LogWriter): Promise<void> {
    const prepared = await prepareTraining(svc, teamId, job.id, { instanceType: 'local' });
    await mkdir(join(dir, 'input', 'config'), { recursive: true });
    await mkdir(join(dir, 'input', 'data', 'train'), { recursive: true });
    for (const rows of prepared.train) {
      await writeFile(join(dir, 'input', 'data', 'train', rows.file), await svc.blobs.getText(rows.key));
    }
    if (prepared.validation.length) await mkdir(join(dir, 'input', 'data', 'validation'), { recursive: true });
    for (const rows of prepared.validation) {
      await writeFile(join(dir, 'input', 'data', 'validation', rows.file), await svc.blobs.getText(rows.key));
    }
    const baseModelPath = await this.baseModelDir(svc, prepared.model);
    await writeFile(
      join(dir, 'input', 'config', 'hyperparameters.json'),
      JSON.stringify(prepared.hyperparameters(baseModelPath), null, 2),
    );
    const validation = prepared.validation.length ? ` and ${prepared.validation.length} validation dataset(s)` : '';
    log.system(`prepared ${prepared.train.length} dataset(s)${validation}; base model ${prepared.job.base_model}`);
  }

  /** The model channel (a catalog model or a checkpoint), copied once from the blob store into a local cache. */
  private async baseModelDir(svc: Services, model: PreparedTraining['model']): Promise<string> {
    const { prefix, cacheName } = model;
    const target = join(this.opts.workDir, 'cache', cacheName);
    const done = join(target, '.complete');
    if (await exists(done)) return target;
    await rm(target, { recursive: true, force: true });
    for (const key of await svc.blobs.list(prefix)) {
      // a key's suffix names a file under the cache directory only if it stays inside it
      const file = containedPath(target, key.slice(prefix.length), `model store key ${key}`);
      await mkdir(dirname(file), { recursive: true });
      await pipeline(await svc.blobs.stream(key), createWriteStream(file));
    }
    await writeFile(done, svc.now().toISOString());
    return target;
  }

  private execute(svc: Services, teamId: string, job: TrainingJob, dir: string, log: LogWriter): Promise<TrainerExit> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.opts.python, ['-m', 'sift_trainer.job'], {
        cwd: this.opts.trainerDir,
        env: trainerEnv(dir),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      this.running.set(job.id, child);
      let completed: TrainerEvent | undefined;
      let lastProgress: TrainerEvent | undefined;
      let lastProgressWrite = 0;
      // progress and epoch writes say their own failures; a checkpoint that could not be saved fails the job
      const pending: Promise<unknown>[] = [];
      const saves: Promise<void>[] = [];
      createInterface({ input: child.stdout }).on('line', (line) => {
        log.add('stdout', line);
        const event = parseEvent(line);
        if (!event) return;
        if (event.event === 'progress') {
          lastProgress = event;
          // At most one record write a second; the last one is written when the process ends.
          if (Date.now() - lastProgressWrite > 1000) {
            lastProgressWrite = Date.now();
            pending.push(this.saveProgress(svc, teamId, job.id, event));
          }
        } else if (event.event === 'checkpoint') {
          saves.push(this.saveCheckpoint(svc, teamId, job, event, log));
        } else if (event.event === 'schedule' && job.epochs_from_data && typeof event.epochs === 'number') {
          // the epochs the trainer sized from the dataset replace the catalog default on the record
          pending.push(this.saveEpochs(svc, teamId, job.id, event.epochs, log));
        } else if (event.event === 'completed') {
          completed = event;
        }
      });
      createInterface({ input: child.stderr }).on('line', (line) => log.add('stderr', line));
      child.once('error', reject);
      child.once('exit', (code, signal) => {
        this.running.delete(job.id);
        if (lastProgress) pending.push(this.saveProgress(svc, teamId, job.id, lastProgress));
        void Promise.allSettled([...pending, ...saves]).then((settled) => {
          const failed = settled.slice(pending.length).find((r): r is PromiseRejectedResult => r.status === 'rejected');
          resolve({
            code,
            signal,
            ...(completed ? { completed } : {}),
            ...(failed ? { saveError: failed.reason as Error } : {}),
          });
        });
      });
    });
  }

  private async saveProgress(svc: Services, teamId: string, jobId: string, e: TrainerEvent): Promise<void> {
    const progress = {
      epoch: Number(e.epoch ?? 0),
      step: Number(e.step ?? 0),
      total_steps: Number(e.total_steps ?? 0),
    };
    // progress is rewritten every second: a failed write is logged, not retried; a job deleted meanwhile needs none
    await recordJobProgress(svc, teamId, jobId, progress, typeof e.loss === 'number' ? e.loss : undefined).catch(
      (error: unknown) => {
        if (error instanceof WriteConflict) return;
        this.opts.logger.warn("could not record a training job's progress", { job_id: jobId, error });
      },
    );
  }

  /**
   * The planned epochs are written once, and the job shows them ("N epochs") for good: a failed write
   * is retried, and one that still fails is logged with the job id and said in the job's log, since
   * the record then keeps the catalog default. A job deleted meanwhile (WriteConflict) is not retried.
   */
  private async saveEpochs(
    svc: Services,
    teamId: string,
    jobId: string,
    epochs: number,
    log: LogWriter,
  ): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        await recordJobEpochs(svc, teamId, jobId, epochs);
        return;
      } catch (error) {
        if (error instanceof WriteConflict) {
          this.opts.logger.warn('planned epochs not recorded: the job is gone', { job_id: jobId, epochs });
          return;
        }
        if (attempt >= EPOCHS_WRITE_ATTEMPTS) {
          this.opts.logger.error('could not record the planned epochs of a training job', {
            job_id: jobId,
            epochs,
            attempts: attempt,
            error,
          });
          log.system(
            `WARNING: the trainer planned ${epochs} epochs but the job record could not be updated (${(error as Error).message}); it still shows the default`,
          );
          return;
        }
        await delay(EPOCHS_RETRY_DELAY_MS * attempt);
      }
    }
  }

  /** Uploads the checkpoint's files, then reports it to the lifecycle: a listed checkpoint always has its files. */
  private async saveCheckpoint(
    svc: Services,
    teamId: string,
    job: TrainingJob,
    e: TrainerEvent,
    log: LogWriter,
  ): Promise<void> {
    const id = typeof e.id === 'string' ? e.id : newUuid();
    const prefix = checkpointPrefix(teamId, job.id, id);
    try {
      await svc.blobs.putDirectory(String(e.path ?? ''), prefix);
      await checkpointSaved(svc, teamId, job, { ...e, id }, prefix);
    } catch (error) {
      this.opts.logger.error("could not save a training job's checkpoint", {
        job_id: job.id,
        checkpoint_id: id,
        error,
      });
      throw new Error(`could not save checkpoint ${id} (step ${String(e.step ?? '?')}): ${(error as Error).message}`);
    }
    log.system(`checkpoint ${id} saved (step ${String(e.step ?? '?')})`);
  }

  /** The trainer exited: its model goes to the lifecycle's completion, anything else to its failure. */
  private async finish(
    svc: Services,
    teamId: string,
    job: TrainingJob,
    dir: string,
    exit: TrainerExit,
    report: LifecycleReport,
  ): Promise<void> {
    if (exit.saveError) throw exit.saveError;
    if (exit.code !== 0 || !exit.completed) {
      // a stopped job's trainer exits too: the stop stands (failTraining keeps it), with its checkpoints
      const failure = (await readFile(join(dir, 'output', 'failure'), 'utf8').catch(missingAsUndefined)) ?? ''; // the trainer may die before writing one
      const reason =
        failure.trim() ||
        `the trainer exited with ${exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`} and wrote no failure file`;
      await failTraining(svc, teamId, job.id, reason, { report });
      return;
    }
    const modelDir = join(dir, 'model');
    await completeTraining(svc, teamId, job.id, {
      report,
      // the trainer's /opt/ml/model: its files under the job's model prefix, and its archive as the download
      publishModel: async () => {
        await svc.blobs.putDirectory(modelDir, modelPrefix(teamId, job.id));
        const archive = join(dir, 'model.tar.gz');
        // gzip without compression: float weights deflate by ~4% (the mini model: 300 MB at level 6 in
        // 12.9 s of CPU, 327 MB stored in 2.0 s), and every finished job paid those seconds
        await createTar({ gzip: { level: 0 }, file: archive, cwd: modelDir, portable: true }, await readdir(modelDir));
        await svc.blobs.put(archiveKey(teamId, job.id), createReadStream(archive), 'application/gzip');
      },
      scorer: (team, jobId) => validationMetrics(svc, new InProcessPredictor(svc), team, jobId),
    });
  }

  private async fail(svc: Services, teamId: string, jobId: string, reason: string): Promise<void> {
    await failTraining(svc, teamId, jobId, reason, { report: { logger: this.opts.logger } });
  }
}

function parseEvent(line: string): TrainerEvent | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const v = JSON.parse(line) as TrainerEvent;
    return typeof v.event === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

async function exists(path: string): Promise<boolean> {
  return (await stat(path).catch(missingAsUndefined)) !== undefined;
}

/** Buffers log lines and writes them as chunk objects every second or 500 lines. */
class LogWriter {
  private offset = 0;
  private buffer: LogLine[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly svc: Services,
    private readonly teamId: string,
    private readonly jobId: string,
  ) {}

  add(stream: LogLine['stream'], line: string): void {
    this.buffer.push({ offset: this.offset, ts: this.svc.now().toISOString(), stream, line });
    this.offset += 1;
    if (this.buffer.length >= 500) void this.flush();
    else this.timer ??= setTimeout(() => void this.flush(), 1000);
  }

  system(line: string): void {
    this.add('system', line);
  }

  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.buffer;
    this.buffer = [];
    if (batch.length === 0) return this.writing;
    const first = batch[0] as LogLine;
    this.writing = this.writing.then(() =>
      this.svc.blobs.put(
        logChunkKey(this.teamId, this.jobId, first.offset),
        `${batch.map((l) => JSON.stringify(l)).join('\n')}\n`,
        'application/x-ndjson',
      ),
    );
    return this.writing;
  }
}

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { createServices, type AwsServices, type Ports } from '../../adapters/aws';
import { closeDecoder } from '../../adapters/decoder';
import { InProcessWorkQueue } from '../../adapters/memory/workQueue';
import type { WorkMessage } from '../../core/ports';
import { ensureInstallation, recoverInterruptedWork } from '../../core/bootstrap';
import { createHotPath } from '../../core/hotPath';
import { adaptiveTasks } from '../../core/adaptive/workflow';
import { evaluateShard, evaluationTasks, InProcessPredictor } from '../../core/evaluation/workflow';
import { generateSyntheticDataShard, syntheticDataTasks } from '../../core/syntheticData/workflow';
import { decoderTextGenerator } from '../../core/syntheticData/decoderTextGenerator';
import type { SiftConfig } from '../../core/context';
import { FileUsageSpool } from '../../adapters/fs/usageSpool';
import { emfUsageMetrics } from '../../adapters/metrics/emfUsageMetrics';
import { createWriteStream } from 'node:fs';
import { mkdirSync } from 'node:fs';
import { handleWorkMessage } from '../../core/worker';
import { SiftApp } from '../../http/app';
import { createLogger, type Logger } from '../../http/logger';
import { allRoutes } from '../../http/routes';
import { startEmulators } from '../../local/emulators';
import { serveConsole } from '../../local/consoleAssets';
import { createApiServer } from '../node/httpAdapter';
import { ModelBuildWatcher } from '../../local/modelBuild';
import { publishBuiltModels } from '../../local/modelStore';
import { DEFAULT_MODELS_DIR, DEFAULT_PYTHON, REPO_ROOT } from '../../paths';
import { LocalTrainingRunner } from '../../local/trainingRunner';
import { LocalWorkflowRunner } from '../../local/workflows';
import { DEFAULT_VALIDATION_HEAP_MB, ValidationProcesses } from '../../local/validationProcess';

export interface LocalOptions {
  port: number;
  host?: string;
  dataDir: string;
  adminKey?: string;
  s3Port?: number;
  logger?: Logger;
  config?: Partial<SiftConfig>;
  /** Built or provided model weights to publish into the model store (default: the user cache). */
  modelsDir?: string;
  /** Training: Python with the trainer's requirements (default: the venv in the user cache). */
  python?: string;
  /** Training jobs run at once; the rest wait in order (default 1: this machine has 2 cores). */
  maxTrainingJobs?: number;
  /** How long workflow Wait states last locally, ms (the adaptive loop's polls of its candidate). */
  workflowPollMs?: number;
  /** Run the adaptive loop over every eligible project this often, ms (AWS: the EventBridge schedule); off when unset. */
  adaptiveEveryMs?: number;
  /** Where finance's EMF lines go (default: appended to `<dataDir>/logs/metrics.emf.jsonl`). */
  metricsOut?: (line: string) => void;
  /** How often the background model build's status file is read, ms (default 1000). */
  buildPollMs?: number;
  /** Heap limit of each dataset validation child process, MB (default SIFT_VALIDATION_HEAP_MB or 1024). */
  validationHeapMb?: number;
  /** Ports that replace local mode's own (tests: a gateway-keys stand-in, …); the graph stays read-only. */
  ports?: Ports;
}

export interface LocalService {
  url: string;
  /** The local stack's services (finished and read-only), with the emulator-backed DynamoDB and S3 adapters in view. */
  svc: Readonly<AwsServices>;
  app: SiftApp;
  /** Set on the very first start when no SIFT_ADMIN_KEY was given: print it once. */
  createdAdminKey?: string;
  /** Resolves when background work (dataset processing, training) has drained; for tests and shutdown. */
  idle(): Promise<void>;
  runner: LocalTrainingRunner;
  close(): Promise<void>;
}

/**
 * The origins the console is loaded from: this server's. A loopback or wildcard bind is reached as
 * 127.0.0.1, localhost or [::1] alike (the S3 endpoint is on 127.0.0.1 only, so a browser elsewhere
 * cannot upload in any case).
 */
export function consoleOrigins(host: string, port: number): string[] {
  const loopback = [`http://127.0.0.1:${port}`, `http://localhost:${port}`, `http://[::1]:${port}`];
  if (['127.0.0.1', 'localhost', '::1', '0.0.0.0', '::'].includes(host)) return loopback;
  return [`http://${host.includes(':') ? `[${host}]` : host}:${port}`, ...loopback];
}

/** What local mode takes from the environment, read here once; a CLI flag or a test's option wins. */
export interface LocalSettings {
  validationHeapMb: number;
  maxTrainingJobs: number;
  workflowPollMs: number;
  adaptiveEveryMs: number | undefined;
}

export function localSettings(env: NodeJS.ProcessEnv = process.env): LocalSettings {
  return {
    validationHeapMb: Number(env.SIFT_VALIDATION_HEAP_MB) || DEFAULT_VALIDATION_HEAP_MB,
    maxTrainingJobs: Number(env.SIFT_MAX_TRAINING_JOBS ?? 1),
    workflowPollMs: Number(env.SIFT_WORKFLOW_POLL_MS ?? 2000),
    adaptiveEveryMs: Number(env.SIFT_ADAPTIVE_EVERY_MINUTES ?? 0) * 60_000 || undefined,
  };
}

const TABLE = 'sift-records';
const BUCKET = 'sift-data';

/** Local mode: the same app, stores and worker as on AWS, on in-process emulators. */
export async function startLocal(opts: LocalOptions, settings: LocalSettings = localSettings()): Promise<LocalService> {
  const logger = opts.logger ?? createLogger();
  const dataDir = resolve(opts.dataDir);
  // local mode's metrics log: the same EMF lines CloudWatch would extract on AWS
  mkdirSync(join(dataDir, 'logs'), { recursive: true });
  const emfLog = opts.metricsOut
    ? undefined
    : createWriteStream(join(dataDir, 'logs', 'metrics.emf.jsonl'), { flags: 'a' });
  const metricsOut = opts.metricsOut ?? ((line: string) => emfLog!.write(`${line}\n`));
  const emulators = await startEmulators(dataDir, {
    bucket: BUCKET,
    ...(opts.s3Port !== undefined ? { s3Port: opts.s3Port } : {}),
  });
  // the graph is built once, below, with every port; the parts made before it reach it through `built()`
  let svc: Readonly<AwsServices> | undefined;
  const built = () => svc as AwsServices;
  // dataset rows are validated in child processes with a bounded heap, never on the thread that serves requests
  const validation = new ValidationProcesses({
    heapMb: opts.validationHeapMb ?? settings.validationHeapMb,
  });
  const queue = new InProcessWorkQueue(
    (message: WorkMessage) => handleWorkMessage(built(), message, { validateDataset: validation.validate }),
    2,
    (err, message) => logger.error('background work failed', { message, error: err }),
  );
  const modelsDir = opts.modelsDir ?? DEFAULT_MODELS_DIR;
  // A first `npm start` builds the venv and models in the background (scripts/build-models.mjs):
  // each model is published into the store as its build reports it done, without a restart.
  const builds = new ModelBuildWatcher(
    modelsDir,
    async () => {
      const published = await publishBuiltModels(built(), modelsDir);
      if (published.length) logger.info('published built models to the model store', { models: published });
    },
    opts.buildPollMs,
    (error) => logger.error('could not publish the built models', { error }),
  );
  const runner = new LocalTrainingRunner(built, {
    whenBuilt: (ids, signal) => builds.whenBuilt(ids, signal),
    workDir: join(dataDir, 'work'),
    python: opts.python ?? DEFAULT_PYTHON,
    trainerDir: join(REPO_ROOT, 'containers', 'training'),
    maxConcurrent: opts.maxTrainingJobs ?? settings.maxTrainingJobs,
    stopGraceMs: 120_000,
    logger,
  });
  const workflows = new LocalWorkflowRunner(
    () => {
      const graph = built();
      const predictor = new InProcessPredictor(graph);
      return {
        ...evaluationTasks(graph, (input) => evaluateShard(graph, predictor, input)),
        ...syntheticDataTasks(graph, (input) =>
          generateSyntheticDataShard(graph, decoderTextGenerator(graph), predictor, input),
        ),
        ...adaptiveTasks(graph),
      };
    },
    logger,
    opts.workflowPollMs ?? settings.workflowPollMs,
  );
  svc = createServices({
    table: TABLE,
    bucket: BUCKET,
    dynamoEndpoint: emulators.dynamoEndpoint,
    s3Endpoint: emulators.s3Endpoint,
    // this start's random secret: the stores' fronts refuse anything not signed with it
    credentials: emulators.credentials,
    queue,
    rateLimiter: 'memory',
    usage: 'buffered',
    // usage that cannot be written waits here, fsync'd, until a flush (or the next start) replays it
    usageSpool: new FileUsageSpool(join(dataDir, 'usage-spool.jsonl')),
    usageMetrics: emfUsageMetrics(metricsOut),
    logger,
    config: { stage: 'local', ...(opts.config ?? {}) },
    ports: (own) => ({
      training: runner,
      modelBuilds: builds,
      hotPath: createHotPath((id, error) =>
        logger.error('could not store an inference after its response', { inference_id: id, error: error as Error }),
      ),
      workflows,
      ...(typeof opts.ports === 'function' ? opts.ports(own) : opts.ports),
    }),
  });
  let install: Awaited<ReturnType<typeof ensureInstallation>>;
  try {
    await svc.records.ensureTable();
    await svc.blobs.ensureBucket();
    install = await ensureInstallation(svc, opts.adminKey);
    const published = await publishBuiltModels(svc, modelsDir);
    if (published.length) logger.info('published models to the model store', { models: published });
    // usage kept while the store was unreachable in an earlier run
    await svc.usage.flush();
    await builds.start();
    const recovered = await recoverInterruptedWork(svc);
    if (recovered.datasets + recovered.jobs + recovered.workflows) logger.info('recovered interrupted work', recovered);
  } catch (err) {
    // A failed start must not leave the emulators listening (or their files locked).
    // the start's own error is the one to throw; closing the usage ledger may fail for the same reason (the store), so it is logged
    await svc.usage
      .close()
      .catch((error: unknown) => logger.error('could not close the usage ledger after a failed start', { error }));
    emfLog?.end();
    builds.close();
    await emulators.close();
    throw err;
  }
  const app = new SiftApp(svc, allRoutes(), logger);
  // the local stand-in for the stack's EventBridge schedule: the same input to the same state machine
  const adaptiveEvery = opts.adaptiveEveryMs ?? settings.adaptiveEveryMs;
  const schedule = adaptiveEvery
    ? setInterval(() => {
        workflows
          .start('adaptive', `adaptive-schedule-${Date.now()}`, { trigger: 'schedule' })
          .catch((err: unknown) => logger.error('could not start the adaptive loop', { error: err as Error }));
      }, adaptiveEvery)
    : undefined;
  schedule?.unref();
  // the console's files and the API behind one guarded listener: no request can throw out of it (httpAdapter.ts)
  const server: Server = createApiServer(app, svc.config.maxBodyBytes, { logger, front: serveConsole });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(opts.port, opts.host ?? '127.0.0.1', () => ok());
  });
  const address = server.address() as AddressInfo;
  // the console uploads straight to the S3 endpoint: its origins get CORS there, as the bucket's CORS
  // rule lists consoleOrigins on AWS (lib/data-stack.ts): this server's own, and any configured (SIFT_CONSOLE_ORIGINS)
  emulators.allowBrowserOrigins([
    ...consoleOrigins(opts.host ?? '127.0.0.1', address.port),
    ...svc.config.consoleOrigins,
  ]);
  const services = svc;
  return {
    url: `http://${address.address}:${address.port}`,
    svc: services,
    app,
    ...(install.createdKey ? { createdAdminKey: install.createdKey } : {}),
    runner,
    idle: async () => {
      await services.hotPath?.writes.drain();
      await queue.idle();
      await runner.idle();
      await workflows.idle();
    },
    async close() {
      if (schedule) clearInterval(schedule);
      await new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      });
      // the runner first: a job waiting for the build must see the shutdown, not a closed watcher
      await runner.shutdown();
      builds.close();
      await queue.idle();
      await validation.close();
      await workflows.idle();
      await services.hotPath?.writes.drain();
      await closeDecoder(services);
      await services.encoder?.close();
      await services.usage.close();
      await emulators.close();
      await new Promise<void>((ok) => (emfLog ? emfLog.end(() => ok()) : ok()));
    },
  };
}

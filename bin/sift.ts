#!/usr/bin/env -S npx tsx
/** The `sift` command: run the local service, print the OpenAPI document, publish model weights. */
import { Command } from 'commander';
import { followJob, startTraining } from '../src/cli/train';
import { exitCleanlyOnFatalErrors } from '../src/http/fatalErrors';
import { createLogger } from '../src/http/logger';
import { buildOpenApi } from '../src/http/openapi';
import { API_VERSION, allRoutes } from '../src/http/routes';
import { startLocal } from '../src/runtimes/local/main';
import { DEFAULT_MODELS_DIR } from '../src/paths';

const program = new Command()
  .name('sift')
  .description('Sift: training and inference for GLiNER2 encoders and small decoder LLMs');

program
  .command('serve')
  .description('Start the whole service locally on embedded stores (PORT, SIFT_DATA_DIR, SIFT_ADMIN_KEY)')
  .option('-p, --port <port>', 'port to listen on', process.env.PORT ?? '8080')
  .option('--host <host>', 'address to bind', process.env.SIFT_HOST ?? '127.0.0.1')
  .option('-d, --data-dir <dir>', 'where state is kept', process.env.SIFT_DATA_DIR ?? '.sift')
  .action(async (opts: { port: string; host: string; dataDir: string }) => {
    const port = Number(opts.port);
    const s3Port = process.env.SIFT_S3_PORT ? Number(process.env.SIFT_S3_PORT) : port === 0 ? 0 : port + 1;
    const logger = createLogger();
    const service = await startLocal({
      logger,
      port,
      host: opts.host,
      dataDir: opts.dataDir,
      s3Port,
      ...(process.env.SIFT_ADMIN_KEY ? { adminKey: process.env.SIFT_ADMIN_KEY } : {}),
    });
    const lines = [
      `Sift is listening on ${service.url}  (state in ${opts.dataDir})`,
      `OpenAPI: ${service.url}/openapi.json`,
      `Console: ${service.url}/console/`,
    ];
    if (service.createdAdminKey) {
      lines.push('', 'Created the operator API key (shown only this once; keep it):', `  ${service.createdAdminKey}`);
    }
    // a first start builds the venv and models in the background: say so, and where to follow it
    const build = await (await import('../src/cli/buildStatus')).buildStatus(DEFAULT_MODELS_DIR);
    if (build.state && build.state !== 'done')
      lines.push(
        '',
        ...build.lines,
        'Models become available as they are built (sift models status; GET /base-models).',
      );
    process.stdout.write(`${lines.join('\n')}\n`);
    const shutdown = async () => {
      await service.close();
      process.exit(0);
    };
    process.once('SIGINT', shutdown);
    process.once('SIGTERM', shutdown);
    // An error nobody caught: log it, close the service (usage written, stores closed) and exit 1
    // for whatever supervises `sift serve` to restart it; the next start recovers interrupted work.
    // The policy and why: src/http/fatalErrors.ts.
    exitCleanlyOnFatalErrors({ logger, shutdown: () => service.close() });
  });

program
  .command('serve-aws')
  .description('Serve the API from AWS resources (the ECS gateway): SIFT_TABLE, SIFT_BUCKET, SIFT_QUEUE_URL, PORT')
  .option('-p, --port <port>', 'port to listen on', process.env.PORT ?? '8080')
  .action(async (opts: { port: string }) => {
    // a misspelt SIFT_ENCODER_EXECUTION_PROVIDER stops the task at start, not at its first request
    (await import('../src/encoder/executionProvider')).executionProviderFromEnv();
    // the same server the encoder image runs (bin/gateway.ts)
    const { serveGateway } = await import('../src/runtimes/gateway/server');
    const gateway = serveGateway(Number(opts.port));
    // as bin/gateway.ts: log, drain and flush, exit 1 (src/http/fatalErrors.ts)
    exitCleanlyOnFatalErrors({ logger: gateway.logger, shutdown: gateway.shutdown });
  });

program
  .command('bootstrap-aws')
  .description(
    'Create the operator team and key in the deployed table (SIFT_TABLE, AWS credentials); prints the key once',
  )
  .action(async () => {
    const { servicesFromEnv } = await import('../src/adapters/aws');
    const { ensureInstallation } = await import('../src/core/bootstrap');
    const result = await ensureInstallation(servicesFromEnv('dynamodb'), process.env.SIFT_ADMIN_KEY);
    process.stdout.write(
      result.createdKey
        ? `Operator key for team ${result.teamId} (shown only this once):\n  ${result.createdKey}\n`
        : `Installation already bootstrapped (operator team ${result.teamId}); no new key was created.\n`,
    );
  });

program
  .command('openapi')
  .description('Print the OpenAPI 3.1 document')
  .action(() => {
    process.stdout.write(`${JSON.stringify(buildOpenApi(allRoutes(), API_VERSION), null, 2)}\n`);
  });

const apiOptions = () => {
  const apiKey = process.env.SIFT_API_KEY;
  if (!apiKey) throw new Error('set SIFT_API_KEY (and SIFT_URL if the service is not on http://127.0.0.1:8080)');
  return { url: process.env.SIFT_URL ?? 'http://127.0.0.1:8080', apiKey };
};

const finish = (job: { status: string; metrics: unknown; error: string | null }) => {
  process.stdout.write(`${JSON.stringify({ status: job.status, metrics: job.metrics, error: job.error }, null, 2)}\n`);
  process.exitCode = job.status === 'complete' ? 0 : 1;
};

program
  .command('train')
  .description('Start a training job on a running Sift (SIFT_URL, SIFT_API_KEY) and show its progress until it ends')
  .requiredOption('--model-name <name>', 'name for the trained model')
  .requiredOption('--base-model <id>', 'catalog model id or checkpoint UUID')
  .requiredOption('--dataset <name...>', 'dataset name(s)')
  .option('--training-type <type>', 'lora or full')
  .option('--algorithm <algorithm>', 'sft, dpo or grpo')
  .option('--epochs <n>', 'number of epochs', Number)
  .option('--learning-rate <lr>', 'learning rate', Number)
  .option(
    '--rl-config <json>',
    'rl_config as JSON (dpo, grpo)',
    (v: string) => JSON.parse(v) as Record<string, unknown>,
  )
  .action(
    async (o: {
      modelName: string;
      baseModel: string;
      dataset: string[];
      trainingType?: string;
      algorithm?: string;
      epochs?: number;
      learningRate?: number;
      rlConfig?: Record<string, unknown>;
    }) => {
      finish(
        await startTraining({
          ...apiOptions(),
          modelName: o.modelName,
          baseModel: o.baseModel,
          datasets: o.dataset,
          ...(o.trainingType ? { trainingType: o.trainingType } : {}),
          ...(o.algorithm ? { algorithm: o.algorithm } : {}),
          ...(o.epochs !== undefined ? { epochs: o.epochs } : {}),
          ...(o.learningRate !== undefined ? { learningRate: o.learningRate } : {}),
          ...(o.rlConfig ? { rlConfig: o.rlConfig } : {}),
        }),
      );
    },
  );

program
  .command('watch <job-id>')
  .description('Follow a training job with a live progress bar until it ends')
  .action(async (jobId: string) => finish(await followJob(apiOptions(), jobId)));

const models = program.command('models').description('Base-model weights: import, pull, publish');
models
  .command('publish <sources...>')
  .description(
    "Upload model directories (<vendor>--<name>/ with a manifest.json, as set-up builds them or import writes them), a directory of them, or model ids found in --models-dir, into the bucket's models/ prefix. Unchanged files are skipped; an interrupted run resumes; the manifest is written last (for a model imported under its own name, that registers it).",
  )
  .requiredOption('--bucket <name>', 'the deployed bucket (CloudFormation export sift-<stage>-bucket-name)')
  .option('--prefix <prefix>', 'model store prefix in the bucket', 'models/')
  .option('--region <region>', 'AWS region (default: AWS_REGION)')
  .option('--endpoint-url <url>', 'S3 endpoint (an emulator, or a VPC endpoint)')
  .option('--models-dir <dir>', 'where model ids are looked up', DEFAULT_MODELS_DIR)
  .action(
    async (
      sources: string[],
      o: { bucket: string; prefix: string; region?: string; endpointUrl?: string; modelsDir: string },
    ) => {
      const { publishCommand } = await import('../src/cli/models');
      const abort = new AbortController();
      process.once('SIGINT', () => abort.abort(new Error('interrupted; run the same command again to resume')));
      try {
        await publishCommand(sources, o, (line) => process.stdout.write(`${line}\n`), abort.signal);
      } catch (err) {
        process.stderr.write(`sift models publish: ${(err as Error).message}\n`);
        process.exitCode = 1;
      }
    },
  );

type ImportCliOptions = {
  as?: string;
  modelsDir: string;
  force?: boolean;
  bucket?: string;
  prefix: string;
  region?: string;
  endpointUrl?: string;
  revision?: string;
  language?: string[];
  description?: string;
  team?: string;
};
const languageList = (value: string, previous: string[] = []) => [
  ...previous,
  ...value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
];
/** import/pull: where the model goes (the local models dir, and a bucket when named). */
const importTargets = (c: Command) =>
  c
    .option('--models-dir <dir>', 'local model store (local start publishes it)', DEFAULT_MODELS_DIR)
    .option('--force', 'replace a model directory that is already there')
    .option('--bucket <name>', 'also publish into this deployed bucket (as `models publish`)')
    .option('--prefix <prefix>', 'model store prefix in the bucket', 'models/')
    .option('--region <region>', 'AWS region (default: AWS_REGION)')
    .option('--endpoint-url <url>', 'S3 endpoint (an emulator, or a VPC endpoint)')
    .option(
      '--language <codes>',
      'a model under its own name: the languages it handles (ISO 639-1, or multi; comma-separated or repeated)',
      languageList,
    )
    .option('--description <text>', 'a model under its own name: one line for GET /base-models')
    .option(
      '--team <team-id>',
      'a model under its own name: private to this team (only it lists, serves and trains it)',
    );
const runImport = async (name: string, work: (signal: AbortSignal) => Promise<unknown>) => {
  const abort = new AbortController();
  process.once('SIGINT', () => abort.abort(new Error('interrupted')));
  try {
    await work(abort.signal);
  } catch (err) {
    process.stderr.write(`sift models ${name}: ${(err as Error).message}\n`);
    process.exitCode = 1;
  }
};
importTargets(
  models
    .command('import <checkpoint-dir>')
    .description(
      'Convert a GLiNER2 checkpoint directory (config.json, encoder_config/, model.safetensors or pytorch_model.bin, tokenizer files) into served ONNX fragments; refused unless the TS engine matches the gliner2 library on parity cases (scores within 1e-4)',
    )
    .option(
      '--as <id>',
      '<org>/<name> to serve and train it as: a name of your own (registered, GET /base-models source imported) or a catalog encoder id (provides its weights); default: read from the checkpoint',
    ),
).action(async (dir: string, o: ImportCliOptions) =>
  runImport('import', async (signal) => {
    const { importCommand } = await import('../src/cli/models');
    await importCommand(dir, o, (line) => process.stdout.write(`${line}\n`), signal);
  }),
);
importTargets(
  models
    .command('pull <id>')
    .description(
      "Download a GLiNER2 checkpoint (a catalog model's, or any <org>/<name>: registered under that name) from the Hugging Face hub (HF_ENDPOINT, HF_TOKEN), then import it; fails at once where no hub is reachable",
    )
    .option('--revision <rev>', 'hub revision (branch, tag or commit)')
    .option('--as <id>', 'the <org>/<name> to register it as (default: the hub id)'),
).action(async (id: string, o: ImportCliOptions) =>
  runImport('pull', async (signal) => {
    const { pullCommand } = await import('../src/cli/models');
    await pullCommand(id, o, (line) => process.stdout.write(`${line}\n`), signal);
  }),
);
models
  .command('status')
  .description('Progress of the local venv and model build that a first `npm start` runs in the background')
  .option('--models-dir <dir>', 'the models directory the build writes to', DEFAULT_MODELS_DIR)
  .action(async (o: { modelsDir: string }) => {
    const { buildStatus } = await import('../src/cli/buildStatus');
    const { state, lines } = await buildStatus(o.modelsDir);
    process.stdout.write(`${(lines.length ? lines : [`no model build has run in ${o.modelsDir}`]).join('\n')}\n`);
    if (state === 'failed') process.exitCode = 1;
  });

await program.parseAsync(process.argv);

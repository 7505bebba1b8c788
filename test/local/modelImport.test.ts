/**
 * `sift models import` on a real GLiNER2 checkpoint — the mini model's own gliner2 files, copied the
 * way a user's download looks (no ONNX, no manifest) — converted by the trainer venv, checked
 * against the gliner2 library, placed in a temp models dir under a name of its own (acme/support-ner)
 * and published into a bucket (s3rver) that a local stack then lists, serves and trains it from; and the
 * refusals: a corrupted checkpoint, an export the engine cannot match, ids that cannot be model names, and
 * `sift models pull` where no hub is reachable (it must fail in seconds, not retry for minutes).
 */
import { execFile } from 'node:child_process';
import { copyFile, cp, mkdir, mkdtemp, readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { readModelDir } from '../../src/adapters/modelPublisher';
import { prepareTraining as prepareSageMakerTraining } from '../../src/aws/trainingWorkflow';
import { importCommand } from '../../src/cli/models';
import { EncoderModel } from '../../src/encoder/engine';
import { canonResult, compareCanon } from '../../src/encoder/parity';
import type { EncoderSchema } from '../../src/encoder/schema';
import { importCheckpoint, modelIdFromCheckpoint, ModelImportError } from '../../src/local/modelImport';
import { pullModel } from '../../src/local/modelPull';
import { DEFAULT_MODELS_DIR } from '../../src/paths';
import { jsonl, TestStack } from '../helpers/localStack';

const MINI = join(DEFAULT_MODELS_DIR, 'sift--gliner2-mini-v1');
/** A catalog id whose weights this box does not have: the import's test id, only ever in a temp models dir. */
const AS = 'fastino/gliner2-base-v1';
/** A model under its own name: the successful import's id. */
const OWN = 'acme/support-ner';
/** What `GLiNER2.save_pretrained` (and a hub repo) holds; the mini model directory adds onnx/ and manifest.json. */
const CHECKPOINT_FILES = [
  'config.json',
  'encoder_config/config.json',
  'model.safetensors',
  'tokenizer.json',
  'tokenizer_config.json',
];

let work: string;
let checkpoint: string;

async function copyCheckpoint(to: string): Promise<string> {
  for (const f of CHECKPOINT_FILES) {
    await mkdir(join(to, f, '..'), { recursive: true });
    await copyFile(join(MINI, f), join(to, f));
  }
  return to;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'sift-import-test-'));
  checkpoint = await copyCheckpoint(join(work, 'download'));
});
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

/** Texts and a schema the import's own parity cases do not use. */
const TEXTS = [
  'Angela Merkel met Emmanuel Macron in Paris on Friday.',
  'Google hired three engineers from Amazon in Seattle.',
];
const SCHEMA: EncoderSchema = {
  entities: [{ name: 'person' }, { name: 'company' }, { name: 'city' }],
  classifications: [{ task: 'topic', labels: ['politics', 'business', 'sports'], multiLabel: false }],
  structures: [],
  relations: [],
};

describe('sift models import', () => {
  it('converts the checkpoint under a name of its own, passes parity, publishes it (--bucket); the service lists, serves and trains it as a base model', async () => {
    const modelsDir = join(work, 'models');
    // a deployed bucket stands in as the local stack's s3rver; its store starts without models
    // one training slot: the fine-tune below runs on the local launcher (the real trainer)
    const stack = await TestStack.start({ maxTrainingJobs: 1 });
    const endpoint = await stack.svc.blobs.s3.config.endpoint!();
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    const credentials = await stack.svc.blobs.s3.config.credentials();
    process.env.AWS_ACCESS_KEY_ID = credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = credentials.secretAccessKey;
    try {
      const lines: string[] = [];
      const opts = {
        as: OWN,
        language: ['en'],
        description: 'Support tickets: products, people, urgency',
        modelsDir,
        prefix: 'models/',
        bucket: stack.svc.blobs.bucket,
        endpointUrl: `${endpoint.protocol}//${endpoint.hostname}:${endpoint.port}`,
      };
      const result = await importCommand(checkpoint, opts, (l) => lines.push(l));
      expect(result).toMatchObject({ modelId: OWN, dir: join(modelsDir, 'acme--support-ner') });
      expect(result.parity.items).toBeGreaterThan(20);
      expect(result.parity.maxDiff).toBeLessThanOrEqual(1e-4);
      expect(lines.some((l) => /parity: \d+ spans\/labels on 7 texts identical/.test(l))).toBe(true);
      expect(lines).toContainEqual(
        expect.stringMatching(
          /^ {2}registered as acme\/support-ner: gliner2-span \(bert\), \d+ parameters, \d+ bytes$/,
        ),
      );
      expect(lines[lines.length - 1]).toMatch(/^acme\/support-ner: \d+ uploaded, 0 unchanged; manifest written$/);
      // the served layout in the local store, under the id it was imported as, and nothing left beside it
      expect((await readdir(modelsDir)).sort()).toEqual(['acme--support-ner']);
      const manifest = JSON.parse(await readFile(join(result.dir, 'manifest.json'), 'utf8'));
      expect(manifest).toMatchObject({
        format: 'sift-model/1',
        model_id: OWN,
        family: 'encoder',
        import_parity: { tolerance: 1e-4 },
        // the registration, which travels with the weights into any store they are published to
        registry: {
          source: 'imported',
          architecture: 'gliner2-span',
          backbone: 'bert',
          parameter_count: expect.any(Number),
          size_bytes: expect.any(Number),
          languages: ['en'],
        },
      });
      expect(manifest.registry.parameter_count).toBeGreaterThan(20e6);
      expect(manifest.registry.size_bytes).toBeGreaterThan(manifest.registry.parameter_count * 4);
      expect((await readModelDir(result.dir)).listed).toEqual(
        expect.arrayContaining(['onnx/', 'tokenizer.json', 'model.safetensors']),
      );
      expect(manifest.weights_sha256).toBe(
        JSON.parse(await readFile(join(MINI, 'manifest.json'), 'utf8')).weights_sha256,
      );

      // the TS engine on the import answers as on the original build
      const [imported, original] = await Promise.all([EncoderModel.load(result.dir), EncoderModel.load(MINI)]);
      try {
        const [a, b] = await Promise.all([
          imported.infer(TEXTS, SCHEMA, { threshold: 0.3 }),
          original.infer(TEXTS, SCHEMA, { threshold: 0.3 }),
        ]);
        a.results.forEach((r, i) => {
          const report = compareCanon(canonResult(r, SCHEMA), canonResult(b.results[i]!, SCHEMA), 1e-4);
          expect(report.mismatches).toEqual([]);
          expect(report.items).toBeGreaterThan(3);
        });
      } finally {
        await Promise.all([imported.release(), original.release()]);
      }

      // the bucket now lists the model under its own name, after the catalog
      const models = (await stack.call('GET', '/base-models')).body;
      const list = models.data as Array<{ id: string; source: string }>;
      expect(list.find((m) => m.id === 'sift/gliner2-mini-v1')).toMatchObject({ source: 'catalog' });
      expect(list.at(-1)).toEqual({
        id: OWN,
        type: 'encoder',
        task_type: 'encoder',
        source: 'imported',
        description: 'Support tickets: products, people, urgency',
        architecture: 'gliner2-span',
        backbone: 'bert',
        parameters: `${Math.round(manifest.registry.parameter_count / 1e6)}M`, // backbone and heads
        parameter_count: manifest.registry.parameter_count,
        size_bytes: manifest.registry.size_bytes,
        languages: ['en'],
        tasks: ['ner', 'classification', 'structures', 'relations'],
        supports_training: true,
        training_types: ['lora', 'full'],
        training_algorithms: ['sft'],
        default_hyperparameters: { nr_epochs: 10, learning_rate: 1e-4 },
        max_input_tokens: 2048,
        private: false,
        available: true,
      });
      // served by the native routes and the compatible ones
      const res = await stack.call('POST', '/inference', {
        body: { model_id: OWN, text: TEXTS[0], schema: { entities: ['person', 'city'] }, threshold: 0.3 },
      });
      expect(res.status).toBe(200);
      expect((res.body.result.entities as Array<{ text: string }>).map((e) => e.text)).toEqual(
        expect.arrayContaining(['Angela Merkel', 'Paris']),
      );
      const gliner = await stack.call('POST', '/gliner-2/entities', {
        body: { model_id: OWN, text: TEXTS[0], entities: ['person'], threshold: 0.3 },
      });
      expect(gliner.status).toBe(200);
      const chat = await stack.call('POST', '/v1/chat/completions', {
        body: { model: OWN, messages: [{ role: 'user', content: TEXTS[0] }], schema: { entities: ['person'] } },
      });
      expect(chat.status).toBe(200);
      expect(JSON.parse(chat.body.choices[0].message.content).entities[0].text).toBe('Angela Merkel');

      // a base model for training: fine-tuned by the real trainer from the imported weights (the local
      // launcher fetches models/acme/support-ner/ from the store), and its fine-tune served
      const tickets = ['Ana Ruiz', 'Ben Okafor', 'Chen Wei', 'Dara Singh', 'Eva Novak', 'Femi Adeyemi'].flatMap(
        (name) => [
          { text: `${name} reported that the Router X2 keeps rebooting.`, entities: [[name, 'person']] },
          { text: `Please replace the Router X2 for ${name} today.`, entities: [[name, 'person']] },
        ],
      );
      expect((await stack.uploadDataset('tickets', jsonl(tickets))).status).toBe('ready');
      const train = (model_name: string) =>
        stack.call('POST', '/core/training-jobs', {
          body: { model_name, base_model: OWN, datasets: [{ name: 'tickets' }], training_type: 'lora', nr_epochs: 1 },
        });
      const created = await train('support-v2');
      expect(created.status).toBe(201);
      // a second job waits for the one slot: what SageMaker would be given for it, then stopped before it runs
      const queued = await train('support-v2-aws');
      expect(queued.status).toBe(201);
      const team = (await stack.call('GET', '/billing/usage/requests')).body.team_id as string;
      const sagemaker = await prepareSageMakerTraining(
        stack.svc,
        { jobNamePrefix: 'sift-test-', instanceType: 'ml.g5.xlarge', maxRuntimeSeconds: 3600 },
        { teamId: team, jobId: queued.body.id },
      );
      expect(sagemaker.channels.find((c) => c.ChannelName === 'model')?.DataSource.S3DataSource.S3Uri).toBe(
        `s3://${stack.svc.blobs.bucket}/models/${OWN}/`,
      );
      expect((await stack.call('POST', `/core/training-jobs/${queued.body.id}/stop`)).status).toBe(200);
      let job: { status: string; error: string | null; base_model: string; root_model: string };
      for (;;) {
        job = (await stack.call('GET', `/core/training-jobs/${created.body.id}`)).body;
        if (['complete', 'failed', 'stopped'].includes(job.status)) break;
        await new Promise((r) => setTimeout(r, 500));
      }
      expect(job).toMatchObject({ status: 'complete', error: null, base_model: OWN, root_model: OWN });
      expect((await stack.call('POST', `/core/training-jobs/${created.body.id}/deploy`, { body: {} })).status).toBe(
        200,
      );
      const tuned = await stack.call('POST', '/inference', {
        body: { model_id: created.body.id, text: TEXTS[0], schema: { entities: ['person'] }, threshold: 0.3 },
      });
      expect(tuned.status).toBe(200);
      expect(tuned.body).toMatchObject({ model_id: created.body.id, type: 'encoder' });
    } finally {
      await stack.stop();
      if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
      else process.env.AWS_ACCESS_KEY_ID = saved.id;
      if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
      else process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
    }
    // a second import under the same id needs --force
    await expect(importCheckpoint({ checkpointDir: checkpoint, modelId: OWN, modelsDir })).rejects.toThrow(
      /already exists; pass --force to replace acme\/support-ner's weights/,
    );
  }, 240_000);

  it('refuses a corrupted checkpoint with a clear error and leaves nothing behind', async () => {
    const broken = await copyCheckpoint(join(work, 'broken'));
    await truncate(join(broken, 'model.safetensors'), 4096); // an interrupted download
    const modelsDir = join(work, 'models-broken');
    await expect(importCheckpoint({ checkpointDir: broken, modelId: AS, modelsDir })).rejects.toThrow(
      /^refused .*broken: gliner2 could not load the checkpoint at .*broken: \w+/,
    );
    expect(await readdir(modelsDir)).toEqual([]);
    // missing files are named before any loading
    await rm(join(broken, 'encoder_config'), { recursive: true });
    await expect(importCheckpoint({ checkpointDir: broken, modelId: AS, modelsDir })).rejects.toThrow(
      /encoder_config\/config\.json \(the backbone config\) is missing/,
    );
  }, 120_000);

  it('refuses a checkpoint the engine does not reproduce (parity fails), naming the disagreements', async () => {
    // mean subword pooling: gliner2 runs it, the TS engine pools first subwords — the export would serve different scores
    const meanPooled = await copyCheckpoint(join(work, 'mean-pooled'));
    const config = JSON.parse(await readFile(join(meanPooled, 'config.json'), 'utf8'));
    await writeFile(join(meanPooled, 'config.json'), JSON.stringify({ ...config, token_pooling: 'mean' }));
    const modelsDir = join(work, 'models-mean');
    const err = await importCheckpoint({ checkpointDir: meanPooled, modelId: AS, modelsDir }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(ModelImportError);
    expect((err as Error).message).toMatch(
      /the TS engine on the export disagrees with the gliner2 library on the checkpoint \(\d+ of \d+ items beyond 0\.0001\); nothing was published/,
    );
    expect((err as Error).message).toMatch(/\[entities #1\] (score|only in)/); // the accented text: multi-subword words
    expect(await readdir(modelsDir)).toEqual([]);
  }, 240_000); // the same conversion and parity run as the successful import above, so the same budget

  it('accepts a catalog encoder id or a safe <org>/<name>, read from --as or the checkpoint, refusing the rest before converting', async () => {
    const modelsDir = join(work, 'models-ids');
    const refused = (extra: Partial<Parameters<typeof importCheckpoint>[0]>) =>
      importCheckpoint({ checkpointDir: checkpoint, modelsDir, ...extra });
    await expect(refused({ modelId: 'acme/my ner' })).rejects.toThrow(
      /^--as: 'acme\/my ner' has characters a model name cannot hold; a model name is <org>\/<name>: /,
    );
    await expect(refused({ modelId: 'my-ner' })).rejects.toThrow(/^--as: 'my-ner' is not of the form <org>\/<name>/);
    await expect(refused({ modelId: 'HuggingFaceTB/SmolLM2-135M-Instruct' })).rejects.toThrow(
      /^--as: 'HuggingFaceTB\/SmolLM2-135M-Instruct' is the catalog's decoder model; only GLiNER2 encoders are imported/,
    );
    await expect(refused({ modelId: 'Fastino/GLiNER2-Base-v1' })).rejects.toThrow(
      /differs from the catalog's 'fastino\/gliner2-base-v1' only in case/,
    );
    await expect(refused({ modelId: OWN, languages: ['english'] })).rejects.toThrow(
      /^--language: 'english' is not a language code/,
    );
    await expect(refused({ modelId: OWN, teamId: 'team id' })).rejects.toThrow(/^--team: 'team id' is not a team id/);
    await expect(refused({ modelId: AS, teamId: 'team-a' })).rejects.toThrow(
      /describe a model imported under its own name; a catalog id keeps its catalog entry/,
    );
    await expect(importCheckpoint({ checkpointDir: checkpoint, modelsDir })).rejects.toThrow(
      /cannot tell which model .*download is: pass --as <org>\/<name>/,
    );
    await expect(readdir(modelsDir)).rejects.toThrow(/ENOENT/);
    await expect(importCheckpoint({ checkpointDir: join(work, 'nowhere'), modelId: AS, modelsDir })).rejects.toThrow(
      /checkpoint directory .*nowhere does not exist/,
    );
    const hubCache = join(work, 'hub', 'models--fastino--gliner2-large-v1', 'snapshots', '0123abc');
    await mkdir(hubCache, { recursive: true });
    expect(await modelIdFromCheckpoint(hubCache)).toBe('fastino/gliner2-large-v1');
    const ownHubCache = join(work, 'hub', 'models--acme--support-ner', 'snapshots', '0123abc');
    await mkdir(ownHubCache, { recursive: true });
    expect(await modelIdFromCheckpoint(ownHubCache)).toBe(OWN);
    await cp(MINI, join(work, 'sift--gliner2-mini-v1'), {
      recursive: true,
      filter: (src) => !src.endsWith('.safetensors') && !src.endsWith('.onnx'),
    });
    expect(await modelIdFromCheckpoint(join(work, 'sift--gliner2-mini-v1'))).toBe('sift/gliner2-mini-v1');
  });
});

describe('sift models pull without a reachable hub', () => {
  const saved = process.env.HF_HUB_OFFLINE;
  afterEach(() => {
    if (saved === undefined) delete process.env.HF_HUB_OFFLINE;
    else process.env.HF_HUB_OFFLINE = saved;
  });
  const pull = (extra: Partial<Parameters<typeof pullModel>[0]> = {}) =>
    pullModel({ modelId: AS, modelsDir: join(work, 'models-pull'), ...extra });

  it('refuses at once under HF_HUB_OFFLINE, saying how to import instead', async () => {
    process.env.HF_HUB_OFFLINE = '1';
    await expect(pull()).rejects.toThrow(
      /HF_HUB_OFFLINE is set, so the Hugging Face hub is not used: .*sift models import <dir> --as fastino\/gliner2-base-v1/,
    );
  });

  it('fails fast when the hub refuses connections or never answers, and downloads nothing', async () => {
    delete process.env.HF_HUB_OFFLINE;
    // a port nothing listens on
    const closed = createServer();
    await new Promise<void>((ok) => closed.listen(0, '127.0.0.1', ok));
    const port = (closed.address() as { port: number }).port;
    await new Promise((ok) => closed.close(ok));
    await expect(pull({ hubEndpoint: `http://127.0.0.1:${port}` })).rejects.toThrow(
      /the Hugging Face hub is not reachable at http:\/\/127\.0\.0\.1:\d+ \(ECONNREFUSED\): download .* and run `sift models import <dir> --as fastino\/gliner2-base-v1`/,
    );
    // a hub that accepts the connection and then says nothing
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((ok) => silent.listen(0, '127.0.0.1', ok));
    try {
      await expect(
        pull({ hubEndpoint: `http://127.0.0.1:${(silent.address() as { port: number }).port}`, probeTimeoutMs: 1_000 }),
      ).rejects.toThrow(/not reachable .*\(no answer in 1 s\)/);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((ok) => silent.close(ok));
    }
    await expect(readdir(join(work, 'models-pull'))).rejects.toThrow(/ENOENT/);
    // an id that cannot be a model name is refused before the hub is asked
    await expect(pullModel({ modelId: 'acme/../other', modelsDir: join(work, 'models-pull') })).rejects.toThrow(
      /^<id>: 'acme\/..\/other' is not of the form <org>\/<name>/,
    );
    await expect(
      pullModel({ modelId: OWN, as: 'acme', modelsDir: join(work, 'models-pull'), hubEndpoint: 'http://127.0.0.1:9' }),
    ).rejects.toThrow(/^--as: 'acme' is not of the form/);
  });
});

describe('the sift binary', () => {
  const sift = (env: Record<string, string>, ...args: string[]) =>
    promisify(execFile)('node', ['--no-warnings', '--import', 'tsx', 'bin/sift.ts', ...args], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });

  it('lists import and pull, and exits 1 with the reason when the hub is off or an option is bad', async () => {
    expect((await sift({}, 'models', '--help')).stdout).toMatch(
      /^ {2}import \[options\] <checkpoint-dir> +Convert a GLiNER2 checkpoint[\s\S]*^ {2}pull \[options\] <id> +Download/m,
    );
    await expect(
      sift({ HF_HUB_OFFLINE: '1' }, 'models', 'pull', AS, '--models-dir', join(work, 'bin-models')),
    ).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringMatching(/^sift models pull: HF_HUB_OFFLINE is set, so the Hugging Face hub is not used/),
    });
    // the bucket is checked before minutes of conversion
    await expect(
      sift(
        {},
        'models',
        'import',
        checkpoint,
        '--as',
        AS,
        '--models-dir',
        join(work, 'bin-models'),
        '--bucket',
        'Bad_Bucket',
      ),
    ).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("sift models import: --bucket: 'Bad_Bucket' is not a valid S3 bucket name"),
    });
  }, 60_000);
});

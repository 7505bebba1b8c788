/**
 * `sift models publish` / local start's model publishing against s3rver with the real S3 SDK:
 * first publish, re-publish (nothing re-uploaded), an interrupted publish that resumes, the
 * catalog's `available` through a local stack, and SageMaker's `model` channel reading exactly the
 * published directory — of a catalog model and of one imported under its own name, whose manifest's
 * registry entry registers it.
 */
import { HeadObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, sep } from 'node:path';
import { promisify } from 'node:util';
import { publishModelDir, resolveModelSources, type PublishEvent } from '../../src/adapters/modelPublisher';
import { prepareTraining } from '../../src/aws/trainingWorkflow';
import { publishCommand } from '../../src/cli/models';
import { createTrainingJob } from '../../src/core/trainingJobs';
import { STORE_CREDENTIALS_FILE } from '../../src/local/emulators';
import { publishBuiltModels } from '../../src/local/modelStore';
import { jsonl, TestStack } from '../helpers/localStack';
import { CHANNEL_ROOT, materializeChannel, type S3PrefixChannel } from '../helpers/sagemakerChannel';

const MODEL = 'sift/gliner2-mini-v1';
/** A model under its own name (src/core/modelRegistry.ts): its manifest carries a registry entry. */
const OWN = 'acme/support-ner';
const REGISTRY = { source: 'imported', architecture: 'gliner2-span', backbone: 'bert', languages: ['en'] };
const PREFIX = `models/${MODEL}/`;
let stack: TestStack;
let work: string;
/** PutObject requests the stack's S3 client sent (an observer on the real client, not a stand-in). */
let puts: string[] = [];

async function treeOf(dir: string): Promise<Map<string, Buffer>> {
  const out = new Map<string, Buffer>();
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) await walk(p);
      else out.set(relative(dir, p).split(sep).join('/'), await readFile(p));
    }
  };
  await walk(dir);
  return out;
}

/** A model directory as set-up builds one: manifest naming its files, ONNX fragments in a subdirectory, a lock file. */
async function buildModelDir(
  root: string,
  id = MODEL,
  registry: Record<string, unknown> | undefined = id === OWN ? REGISTRY : undefined,
): Promise<string> {
  const dir = join(root, id.replace('/', '--'));
  await mkdir(join(dir, 'onnx'), { recursive: true });
  await writeFile(join(dir, 'config.json'), JSON.stringify({ hidden_size: 8 }));
  // hub downloads link files into a blob cache: the link's target is what gets published
  await mkdir(join(root, 'hub-blobs'), { recursive: true });
  await writeFile(join(root, 'hub-blobs', 'tokenizer-blob'), JSON.stringify({ model: { vocab: { a: 0 } } }));
  await symlink(join(root, 'hub-blobs', 'tokenizer-blob'), join(dir, 'tokenizer.json'));
  await writeFile(join(dir, 'model.safetensors'), randomBytes(2 * 1024 * 1024 + 3));
  await writeFile(join(dir, 'onnx', 'encoder.onnx'), randomBytes(700_000));
  await writeFile(join(dir, 'onnx', 'span_rep.onnx'), randomBytes(300_000));
  await writeFile(join(dir, '.build.lock'), '');
  const manifest = {
    format: 'sift-model/1',
    model_id: id,
    files: { config: 'config.json', weights: 'model.safetensors', tokenizer: 'tokenizer.json', onnx_dir: 'onnx/' },
    ...(registry ? { registry } : {}),
  };
  await writeFile(join(dir, 'manifest.json'), JSON.stringify(manifest, null, 2));
  return dir;
}

const available = async (id = MODEL) => {
  const res = await stack.call('GET', '/base-models');
  return (res.body.data as { id: string; available: boolean }[]).find((m) => m.id === id)?.available;
};

beforeAll(async () => {
  stack = await TestStack.start();
  work = await mkdtemp(join(tmpdir(), 'sift-publish-'));
  stack.svc.blobs.s3.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'PutObjectCommand') puts.push((args.input as { Key: string }).Key);
      return next(args);
    },
    { step: 'initialize', name: 'countPuts' },
  );
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await rm(work, { recursive: true, force: true });
});
beforeEach(async () => {
  puts = [];
  await stack.svc.blobs.deletePrefix('models/');
});

describe('publishing a model directory', () => {
  it('uploads every file under models/<id>/ byte for byte, skips lock files, writes the manifest last with a sha256 per object', async () => {
    const dir = await buildModelDir(join(work, 'first'));
    const events: PublishEvent[] = [];
    const result = await publishModelDir(stack.svc.blobs, dir, { onEvent: (e) => events.push(e) });
    expect(result).toEqual({ modelId: MODEL, uploaded: 5, unchanged: 0, manifest: 'written' });
    expect(puts[puts.length - 1]).toBe(`${PREFIX}manifest.json`);
    expect(events.map((e) => e.type)).toEqual(['model', 'file', 'file', 'file', 'file', 'file', 'done']);

    const local = await treeOf(dir);
    local.delete('.build.lock');
    const keys = (await stack.svc.blobs.list(PREFIX)).sort();
    expect(keys).toEqual([...local.keys()].map((k) => PREFIX + k).sort());
    for (const [rel, bytes] of local) {
      const chunks: Buffer[] = [];
      for await (const c of await stack.svc.blobs.stream(PREFIX + rel)) chunks.push(Buffer.from(c));
      expect(Buffer.concat(chunks).equals(bytes)).toBe(true);
    }
    const head = await (stack.svc.blobs.s3 as S3Client).send(
      new HeadObjectCommand({ Bucket: stack.svc.blobs.bucket, Key: `${PREFIX}model.safetensors` }),
    );
    expect(head.Metadata?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(await available()).toBe(true);
  });

  it('re-publishing uploads nothing; a changed file is uploaded alone, with the manifest withdrawn meanwhile', async () => {
    const dir = await buildModelDir(join(work, 'again'));
    await publishModelDir(stack.svc.blobs, dir);
    puts = [];
    expect(await publishModelDir(stack.svc.blobs, dir)).toEqual({
      modelId: MODEL,
      uploaded: 0,
      unchanged: 5,
      manifest: 'unchanged',
    });
    expect(puts).toEqual([]);

    await writeFile(join(dir, 'onnx', 'encoder.onnx'), randomBytes(700_000)); // same size, new bytes
    const events: PublishEvent[] = [];
    expect(await publishModelDir(stack.svc.blobs, dir, { onEvent: (e) => events.push(e) })).toEqual({
      modelId: MODEL,
      uploaded: 1,
      unchanged: 4,
      manifest: 'written',
    });
    expect(puts).toEqual([`${PREFIX}onnx/encoder.onnx`, `${PREFIX}manifest.json`]);
    expect(events.some((e) => e.type === 'withdrawn')).toBe(true);
  });

  it('an interrupted publish leaves the model unavailable; the next run uploads only what is missing', async () => {
    const dir = await buildModelDir(join(work, 'interrupted'));
    const abort = new AbortController();
    let uploads = 0;
    const first = publishModelDir(stack.svc.blobs, dir, {
      signal: abort.signal,
      onEvent: (e) => {
        if (e.type === 'file' && e.action === 'uploaded' && ++uploads === 2)
          abort.abort(new Error('operator pressed ctrl-c'));
      },
    });
    await expect(first).rejects.toThrow('operator pressed ctrl-c');
    expect(await stack.svc.blobs.head(`${PREFIX}manifest.json`)).toBeUndefined();
    expect(await available()).toBe(false);
    expect(await stack.svc.blobs.list(PREFIX)).toHaveLength(2);

    puts = [];
    expect(await publishModelDir(stack.svc.blobs, dir)).toEqual({
      modelId: MODEL,
      uploaded: 3,
      unchanged: 2,
      manifest: 'written',
    });
    expect(puts).toHaveLength(4);
    expect(await available()).toBe(true);
  });

  it('refuses a directory whose manifest names another model, or lists a file it lacks, before uploading', async () => {
    const dir = await buildModelDir(join(work, 'bad'));
    const manifest = JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8'));
    await writeFile(join(dir, 'manifest.json'), JSON.stringify({ ...manifest, model_id: 'fastino/gliner2-base-v1' }));
    await expect(publishModelDir(stack.svc.blobs, dir)).rejects.toThrow(
      /model_id 'fastino\/gliner2-base-v1' does not match the directory name/,
    );
    await writeFile(
      join(dir, 'manifest.json'),
      JSON.stringify({ ...manifest, files: { ...manifest.files, tokenizer_config: 'tokenizer_config.json' } }),
    );
    await expect(publishModelDir(stack.svc.blobs, dir)).rejects.toThrow(
      /names files that are not in the directory: tokenizer_config.json/,
    );
    expect(puts).toEqual([]);
  });
});

describe('sources and the CLI path', () => {
  it('resolves model dirs, a models dir and model ids (catalog or imported), with clear errors for the rest', async () => {
    const root = join(work, 'sources');
    const mini = await buildModelDir(root);
    const base = await buildModelDir(root, 'fastino/gliner2-base-v1');
    const own = await buildModelDir(root, OWN);
    // weights under a name of their own without a registry entry (copied by hand): not a model to publish
    const unregistered = await buildModelDir(root, 'acme/copied', undefined);
    await mkdir(join(root, 'not-a-model'), { recursive: true });
    expect(await resolveModelSources([root], root)).toEqual([own, base, mini]);
    expect(await resolveModelSources([MODEL, mini, OWN], root)).toEqual([mini, own]);
    await expect(resolveModelSources(['acme/unknown'], root)).rejects.toThrow(
      /'acme\/unknown' is not imported: no .*acme--unknown\/manifest.json \(`sift models import <dir> --as acme\/unknown` writes it\)/,
    );
    await expect(resolveModelSources(['no model'], root)).rejects.toThrow(/neither a directory nor a model id/);
    await expect(publishModelDir(stack.svc.blobs, unregistered)).rejects.toThrow(
      /'acme\/copied' .* is neither a catalog model .* nor a model imported under its own name: its manifest has no registry entry of an architecture the engine serves \(gliner2-span, gliner2-boundary\)/,
    );
    const caseClash = await buildModelDir(join(work, 'sources-bad'), 'Fastino/GLiNER2-base-v1', REGISTRY);
    await expect(publishModelDir(stack.svc.blobs, caseClash)).rejects.toThrow(
      /manifest.json model_id: 'Fastino\/GLiNER2-base-v1' differs from the catalog's 'fastino\/gliner2-base-v1' only in case/,
    );
    await expect(resolveModelSources(['fastino/gliner2-large-v1'], root)).rejects.toThrow(
      /not built or provided: no .*fastino--gliner2-large-v1\/manifest.json/,
    );
    await expect(resolveModelSources([join(root, 'not-a-model')], root)).rejects.toThrow(/holds no model directories/);
  });

  it('publishCommand reaches the bucket through its own S3 client (--endpoint-url, ambient credentials), printing progress', async () => {
    const root = join(work, 'cli');
    await buildModelDir(root);
    const endpoint = await stack.svc.blobs.s3.config.endpoint!();
    const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
    const credentials = await stack.svc.blobs.s3.config.credentials();
    process.env.AWS_ACCESS_KEY_ID = credentials.accessKeyId;
    process.env.AWS_SECRET_ACCESS_KEY = credentials.secretAccessKey;
    const lines: string[] = [];
    try {
      const opts = {
        bucket: stack.svc.blobs.bucket,
        prefix: 'models/',
        modelsDir: root,
        endpointUrl: `${endpoint.protocol}//${endpoint.hostname}:${endpoint.port}`,
      };
      await expect(publishCommand([MODEL], { ...opts, bucket: 'Bad_Bucket' }, (l) => lines.push(l))).rejects.toThrow(
        /--bucket: 'Bad_Bucket'/,
      );
      await expect(publishCommand([MODEL], { ...opts, prefix: 'models' }, (l) => lines.push(l))).rejects.toThrow(
        /--prefix: 'models' must end with '\/'/,
      );
      const [result] = await publishCommand([MODEL], opts, (l) => lines.push(l));
      expect(result).toMatchObject({ modelId: MODEL, uploaded: 5, manifest: 'written' });
    } finally {
      if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
      else process.env.AWS_ACCESS_KEY_ID = saved.id;
      if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
      else process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
    }
    expect(lines[0]).toMatch(/^sift\/gliner2-mini-v1: 5 file\(s\), 3\.\d MiB from /);
    expect(lines).toContain(`  uploaded  ${PREFIX}onnx/encoder.onnx (0.7 MiB)`);
    expect(lines[lines.length - 1]).toBe('sift/gliner2-mini-v1: 5 uploaded, 0 unchanged; manifest written');
    expect(await available()).toBe(true);
  });

  it('the sift CLI lists `models` and publishes through it; bad options exit 1 naming the option', async () => {
    const root = join(work, 'bin');
    await buildModelDir(root);
    const endpoint = await stack.svc.blobs.s3.config.endpoint!();
    // the local stores' credentials as a user's tool finds them: the file each start writes in the data dir
    const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _secret, AWS_PROFILE: _profile, ...ambient } = process.env;
    const env = {
      ...ambient,
      AWS_SHARED_CREDENTIALS_FILE: join(stack.dataDir, STORE_CREDENTIALS_FILE),
      AWS_REGION: 'us-east-1',
    };
    // async: this process hosts the S3 emulator the CLI talks to
    const sift = (...args: string[]) =>
      promisify(execFile)('node', ['--no-warnings', '--import', 'tsx', 'bin/sift.ts', ...args], {
        env,
        encoding: 'utf8',
      });
    expect((await sift('--help')).stdout).toMatch(/^ {2}models +Base-model weights: import, pull, publish$/m);
    const publish = [
      'models',
      'publish',
      MODEL,
      '--models-dir',
      root,
      '--endpoint-url',
      `${endpoint.protocol}//${endpoint.hostname}:${endpoint.port}`,
    ];
    const { stdout } = await sift(...publish, '--bucket', stack.svc.blobs.bucket);
    expect(stdout.trim().split('\n').pop()).toBe('sift/gliner2-mini-v1: 5 uploaded, 0 unchanged; manifest written');
    expect(await available()).toBe(true);
    await expect(sift(...publish, '--bucket', 'x')).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining("sift models publish: --bucket: 'x' is not a valid S3 bucket name"),
    });
  }, 60_000);

  it('local start-up publishes with the same code and skips a model whose manifest is already there', async () => {
    const root = join(work, 'local');
    await buildModelDir(root);
    expect(await publishBuiltModels(stack.svc, root)).toEqual([MODEL]);
    puts = [];
    expect(await publishBuiltModels(stack.svc, root)).toEqual([]);
    expect(puts).toEqual([]);
  });
});

describe("SageMaker's model channel", () => {
  it.each([
    ['a catalog model', MODEL, 'channel-rows'],
    ['a model imported under its own name', OWN, 'channel-rows-own'],
  ])(
    'materializes exactly the published directory of %s where the trainer is told to read the base model',
    async (_what, id, rows) => {
      const dir = await buildModelDir(join(work, 'channel'), id);
      await publishModelDir(stack.svc.blobs, dir);
      expect(await available(id)).toBe(true);
      const teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id as string;
      const ds = await stack.uploadDataset(
        rows,
        jsonl([{ text: 'Tim Cook leads Apple.', entities: [{ text: 'Tim Cook', start: 0, end: 8, label: 'person' }] }]),
      );
      expect(ds.status).toBe('ready');
      const { training: _notSubmitted, ...recordOnly } = stack.svc;
      const job = await createTrainingJob(recordOnly, teamId, {
        model_name: 'channel',
        base_model: id,
        datasets: [{ name: rows }],
        training_type: 'full',
      });
      const prepared = await prepareTraining(
        stack.svc,
        { jobNamePrefix: 'sift-test-', instanceType: 'ml.g5.xlarge', maxRuntimeSeconds: 3600 },
        { jobId: job.id, teamId },
      );

      const channel = prepared.channels.find((c) => c.ChannelName === 'model') as S3PrefixChannel;
      expect(channel.DataSource.S3DataSource.S3Uri).toBe(stack.svc.blobs.uri(`models/${id}/`));
      const container = join(work, 'container');
      const modelDir = await materializeChannel(stack.svc.blobs, channel, container);
      expect(modelDir).toBe(join(container, CHANNEL_ROOT, 'model'));
      expect(JSON.stringify(prepared.hyperParameters)).toContain(`${CHANNEL_ROOT}/model`);

      const published = await treeOf(dir);
      published.delete('.build.lock');
      const seen = await treeOf(modelDir);
      expect([...seen.keys()].sort()).toEqual([...published.keys()].sort());
      for (const [rel, bytes] of published) expect(seen.get(rel)!.equals(bytes)).toBe(true);
    },
  );
});

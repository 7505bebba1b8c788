/**
 * The decoder image's start (containers/decoder/entrypoint.sh), run for real from the replayed image
 * against the S3 emulator: it copies the base weights `sift models publish` put under
 * `models/<id>/` (the prefix training reads as its `model` channel) to local disk with the AWS CLI the
 * image installs, and starts vLLM on that directory under the catalog id — or, without a published
 * copy, stops with a message naming the command that publishes it (no download from Hugging Face).
 *
 * vLLM itself is the one stand-in: a `vllm.entrypoints.openai.api_server` module that records its
 * argv and environment (no GPU here). The sync is the real `aws s3 sync` (aws-cli v1 on this machine;
 * the image pins the same release).
 */
import { spawn } from 'node:child_process';
import {
  closeSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { S3Client } from '@aws-sdk/client-s3';
import { createS3Client } from '../../src/adapters/aws';
import { publishModelDirs } from '../../src/adapters/modelPublisher';
import { S3BlobStore } from '../../src/adapters/s3/blobStore';
import { defaultConfig } from '../../src/core/context';
import { baseModelPrefix, modelDirName } from '../../src/core/modelLayout';
import { startEmulators, type Emulators } from '../../src/local/emulators';
import { DEFAULT_MODELS_DIR } from '../../src/paths';
import { hostEnv, hostPath, replayImage, type ReplayedImage } from './rehearsal';

const BUCKET = 'sift-models-test';
const MODEL = defaultConfig.generationModel;
let tmp: string;
let image: ReplayedImage;
let emulators: Emulators;
let s3: S3Client;

/** The checkpoint prepare_decoder.py writes (file names and manifest; contents are placeholders). */
function decoderDir(root: string): string {
  const dir = join(root, modelDirName(MODEL));
  mkdirSync(dir, { recursive: true });
  const files = {
    config: 'config.json',
    weights: 'model.safetensors',
    tokenizer: 'tokenizer.json',
    tokenizer_config: 'tokenizer_config.json',
  };
  writeFileSync(
    join(dir, 'manifest.json'),
    JSON.stringify({ format: 'sift-model/1', family: 'decoder', model_id: MODEL, files }),
  );
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'] }));
  for (const f of ['model.safetensors', 'tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja'])
    writeFileSync(join(dir, f), f);
  writeFileSync(join(dir, 'SmolLM2-135M-Instruct.Q4_1.gguf'), 'gguf');
  return dir;
}

/** vLLM's API server module, standing in: records what it was started with. */
function vllmStandIn(root: string): string {
  const dir = join(root, 'stand-in');
  const server = join(dir, 'vllm', 'entrypoints', 'openai');
  mkdirSync(server, { recursive: true });
  for (const d of ['vllm', 'vllm/entrypoints', 'vllm/entrypoints/openai'])
    writeFileSync(join(dir, d, '__init__.py'), '');
  writeFileSync(
    join(server, 'api_server.py'),
    'import json, os, sys\n' +
      'json.dump({"argv": sys.argv[1:], "HF_HUB_OFFLINE": os.environ.get("HF_HUB_OFFLINE")}, open(os.environ["STAND_IN_RECORD"], "w"))\n',
  );
  return dir;
}

/** Runs the image's entry program; asynchronously, as the S3 emulator answers from this process. */
function start(
  model: string,
  record: string,
  extra: Record<string, string> = {},
): Promise<{ status: number | null; stderr: string }> {
  const env = hostEnv(image);
  const child = spawn(hostPath(image, image.entry[0]!), [], {
    env: {
      ...env,
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: tmp,
      PYTHONPATH: vllmStandIn(tmp),
      STAND_IN_RECORD: record,
      // what the ECS task definition sets (lib/inference-stack.ts; checked in test/cdk/inference.test.ts)
      SIFT_BUCKET: BUCKET,
      SIFT_DECODER_MODEL: model,
      SIFT_DECODER_MODEL_PREFIX: baseModelPrefix(model),
      SIFT_KEEP_ALIVE_SECONDS: '75',
      // the task role's credentials, here the emulator's
      AWS_ACCESS_KEY_ID: emulators.credentials.accessKeyId,
      AWS_SECRET_ACCESS_KEY: emulators.credentials.secretAccessKey,
      AWS_DEFAULT_REGION: 'us-east-1',
      AWS_ENDPOINT_URL_S3: emulators.s3Endpoint,
      ...extra,
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stderr }));
  });
}

beforeAll(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'sift-decoder-start-'));
  image = replayImage('decoder');
  emulators = await startEmulators(join(tmp, 's3'), { bucket: BUCKET });
  s3 = createS3Client({ credentials: emulators.credentials, endpoint: emulators.s3Endpoint });
  const blobs = new S3BlobStore(s3, BUCKET);
  await blobs.ensureBucket();
  // as `sift models publish` uploads it (src/cli/models.ts)
  await publishModelDirs(blobs, [decoderDir(tmp)], { root: 'models/' });
}, 60_000);

afterAll(async () => {
  s3?.destroy();
  await emulators?.close();
  rmSync(tmp, { recursive: true, force: true });
});

it('serves the published copy from local disk under the catalog id, offline from the hub', async () => {
  const record = join(tmp, 'started.json');
  const run = await start(MODEL, record);
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
  const started = JSON.parse(readFileSync(record, 'utf8')) as { argv: string[]; HF_HUB_OFFLINE: string };
  const arg = (flag: string) => started.argv[started.argv.indexOf(flag) + 1];
  const dir = hostEnv(image).SIFT_DECODER_MODEL_DIR!;
  expect(arg('--model')).toBe(dir);
  expect(arg('--served-model-name')).toBe(MODEL);
  expect(started.HF_HUB_OFFLINE).toBe('1');
  // what vLLM loads (config, safetensors, tokenizer, chat template); the GGUF is llama.cpp's and stays behind
  expect(readdirSync(dir).sort()).toEqual([
    'chat_template.jinja',
    'config.json',
    'manifest.json',
    'model.safetensors',
    'tokenizer.json',
    'tokenizer_config.json',
  ]);
}, 60_000);

it('stops with the command that publishes the weights when the bucket has no copy', async () => {
  const record = join(tmp, 'not-started.json');
  const other = 'example/unpublished-decoder';
  const run = await start(other, record, { SIFT_DECODER_MODEL_DIR: join(tmp, 'empty-copy') });
  expect(run.status).toBe(1);
  expect(run.stderr).toContain(
    `sift-decoder: no servable copy of ${other} at s3://${BUCKET}/models/${other}/ (missing: manifest.json config.json tokenizer.json *.safetensors); publish it with \`sift models publish ${other} --bucket ${BUCKET}\``,
  );
  expect(() => readFileSync(record)).toThrow(); // vLLM never started
}, 60_000);

it('publishes, from the checkpoint the trainer build dequantized (prepare_decoder.py), the layout vLLM loads', () => {
  // the model store `npm test` builds; this is what `sift models publish` uploads from it
  const dir = join(DEFAULT_MODELS_DIR, modelDirName(MODEL));
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as {
    parameters: number;
    files: Record<string, string>;
  };
  expect(manifest.files).toMatchObject({
    config: 'config.json',
    weights: 'model.safetensors',
    tokenizer: 'tokenizer.json',
  });
  // an architecture vLLM implements, read from config.json (no remote code)
  expect(JSON.parse(readFileSync(join(dir, 'config.json'), 'utf8')).architectures).toEqual(['LlamaForCausalLM']);
  expect(readdirSync(dir)).toEqual(expect.arrayContaining(['tokenizer_config.json', 'chat_template.jinja']));
  // safetensors: an 8-byte little-endian header length, then the JSON header naming every tensor
  const fd = openSync(join(dir, 'model.safetensors'), 'r');
  let header: Record<string, { dtype: string; shape: number[] }>;
  try {
    const size = Buffer.alloc(8);
    readSync(fd, size, 0, 8, 0);
    const json = Buffer.alloc(Number(size.readBigUInt64LE()));
    readSync(fd, json, 0, json.length, 8);
    header = JSON.parse(json.toString('utf8'));
  } finally {
    closeSync(fd);
  }
  delete header.__metadata__;
  const tensors = Object.values(header);
  // the dequantized weights, whole: every tensor fp32, as many parameters as the build counted
  expect(new Set(tensors.map((t) => t.dtype))).toEqual(new Set(['F32']));
  expect(tensors.reduce((n, t) => n + t.shape.reduce((a, b) => a * b, 1), 0)).toBe(manifest.parameters);
});

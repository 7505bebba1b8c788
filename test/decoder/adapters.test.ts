/**
 * Fine-tuned decoders on the local backend: a decoder job's `adapter.gguf` (llama.cpp LoRA) is
 * fetched from the blob store (s3rver, the same S3 SDK code as on AWS) and applied on top of the
 * SmolLM2-135M-Instruct GGUF by node-llama-cpp. The adapters are real: PEFT LoRAs built by
 * test/decoder/make_lora_fixture.py and exported by the trainer's own GGUF exporter, cached under
 * test/.cache (first run ~10 s per adapter with the training venv).
 */
import type { S3Client } from '@aws-sdk/client-s3';
import { jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { S3BlobStore } from '../../src/adapters/s3/blobStore';
import { createS3Client } from '../../src/adapters/aws';
import { LlamaCppDecoder } from '../../src/adapters/decoder/llamaCpp';
import type { CachePlan, DecoderAdapterSpec, GenerationEvent } from '../../src/core/decoder/types';
import { ServiceUnavailableError } from '../../src/core/errors';
import { modelPrefix } from '../../src/core/training/artifacts';
import { startEmulators, type Emulators } from '../../src/local/emulators';
import { DEFAULT_MODELS_DIR, DEFAULT_PYTHON, REPO_ROOT } from '../../src/paths';

jest.setTimeout(600_000);

const BASE = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const TEAM = 'team-adapters';
const JOB_RANDOM = '5b0c3c1e-1111-4a4a-8a8a-000000000001';
const JOB_ZERO = '5b0c3c1e-2222-4a4a-8a8a-000000000002';
const JOB_NO_GGUF = '5b0c3c1e-3333-4a4a-8a8a-000000000003';
const SCRIPT = join(REPO_ROOT, 'test', 'decoder', 'make_lora_fixture.py');
const EXPORTER = join(REPO_ROOT, 'containers', 'training', 'sift_trainer', 'decoder', 'gguf_lora.py');

/** Builds (once; cached by the generator's and exporter's source) a LoRA fixture directory. */
async function fixture(init: 'random' | 'zero'): Promise<string> {
  const hash = createHash('sha256')
    .update(readFileSync(SCRIPT))
    .update(readFileSync(EXPORTER))
    .update(init)
    .digest('hex')
    .slice(0, 12);
  const out = join(REPO_ROOT, 'test', '.cache', 'lora', `${init}-${hash}`);
  if (!existsSync(join(out, 'adapter.gguf'))) {
    const base = join(DEFAULT_MODELS_DIR, BASE.replace('/', '--'));
    await promisify(execFile)(DEFAULT_PYTHON, [SCRIPT, '--base', base, '--out', out, '--init', init], {
      timeout: 300_000,
      maxBuffer: 16 << 20,
    });
  }
  return out;
}

const spec = (id: string): DecoderAdapterSpec => ({ id, baseModel: BASE, blobPrefix: modelPrefix(TEAM, id) });
const noCache = {
  plan: (): CachePlan => ({ readTokens: 0, writes: [], writeTokens: 0, write5mTokens: 0, write1hTokens: 0 }),
};
const PROMPT = {
  kind: 'chat' as const,
  messages: [{ role: 'user' as const, parts: [{ text: 'Name three colours of the rainbow.' }] }],
};

async function greedy(d: LlamaCppDecoder, model: string): Promise<{ text: string; completionTokens: number }> {
  let text = '';
  let completionTokens = -1;
  for await (const ev of d.generate({
    model,
    scope: TEAM,
    prompt: PROMPT,
    params: { maxTokens: 16, temperature: 0, stop: [] },
    cache: noCache,
  })) {
    if (ev.type === 'text') text += ev.text;
    if (ev.type === 'done') completionTokens = ev.usage.completionTokens;
  }
  return { text, completionTokens };
}

let dir: string;
let emulators: Emulators;
let s3: S3Client;
let blobs: S3BlobStore;
let decoder: LlamaCppDecoder;
let streams: string[];

beforeAll(async () => {
  const [random, zero] = [await fixture('random'), await fixture('zero')];
  dir = await mkdtemp(join(tmpdir(), 'sift-adapters-'));
  emulators = await startEmulators(join(dir, 's3'), { bucket: 'adapters-bucket' });
  // the production client factory, pointed at the emulator
  s3 = createS3Client({ credentials: emulators.credentials, endpoint: emulators.s3Endpoint });
  blobs = new S3BlobStore(s3, 'adapters-bucket');
  await blobs.ensureBucket();
  // Laid out as a decoder training job publishes its model dir (trainingRunner: putDirectory).
  await blobs.putDirectory(random, modelPrefix(TEAM, JOB_RANDOM));
  await blobs.putDirectory(zero, modelPrefix(TEAM, JOB_ZERO));
  await blobs.putDirectory(join(random, 'adapter'), `${modelPrefix(TEAM, JOB_NO_GGUF)}adapter/`);
  streams = [];
  const stream = blobs.stream.bind(blobs);
  blobs.stream = async (key: string) => {
    streams.push(key);
    return stream(key);
  };
  decoder = new LlamaCppDecoder({
    modelDirs: [DEFAULT_MODELS_DIR],
    threads: 1,
    slots: 1,
    adapterSlots: 1,
    contextSize: 512,
    maxAdapterContexts: 1,
    stateDir: join(dir, 'kv'),
    adapterDir: join(dir, 'adapters'),
  });
});

afterAll(async () => {
  await decoder?.close();
  s3?.destroy();
  await emulators?.close();
  await rm(dir, { recursive: true, force: true });
});

describe('LlamaCppDecoder.ensureAdapter', () => {
  // Greedy text is compared between runs that evaluate the prompt the same way (a fresh context,
  // the whole prompt in one batch): a LoRA with random weights leaves near-tied logits, and llama.cpp's
  // batched and one-token kernels differ in the last bits, so a run that reuses the slot's prefix
  // KV (evaluating one token) may pick another near-tied token.
  let baseline: { text: string; completionTokens: number };
  let tuned: { text: string; completionTokens: number };

  it('serves a job id once ensured: hasModel, contextSize, and the LoRA really changes greedy output', async () => {
    baseline = await greedy(decoder, BASE);
    expect(baseline.completionTokens).toBeGreaterThan(0);
    expect(await decoder.hasModel(JOB_RANDOM)).toBe(false);

    await decoder.ensureAdapter(spec(JOB_RANDOM), blobs);
    expect(await decoder.hasModel(JOB_RANDOM)).toBe(true);
    expect(await decoder.contextSize(JOB_RANDOM)).toBe(512);
    tuned = await greedy(decoder, JOB_RANDOM);
    expect(tuned.completionTokens).toBeGreaterThan(0);
    expect(tuned.text).not.toBe(baseline.text);
    // The base model's own context is untouched by the adapter context sharing its weights.
    expect((await greedy(decoder, BASE)).text).toBe(baseline.text);
  });

  it('an adapter whose weights are zero (PEFT default init) leaves the output identical', async () => {
    await decoder.ensureAdapter(spec(JOB_ZERO), blobs);
    expect((await greedy(decoder, JOB_ZERO)).text).toBe(baseline.text);
  });

  it('downloads each adapter once: later calls (and a restarted decoder on the same cache) reuse the file', async () => {
    const before = streams.length;
    await decoder.ensureAdapter(spec(JOB_RANDOM), blobs);
    await Promise.all([decoder.ensureAdapter(spec(JOB_RANDOM), blobs), decoder.ensureAdapter(spec(JOB_ZERO), blobs)]);
    expect(streams.length).toBe(before);
    expect(streams.filter((k) => k.endsWith('adapter.gguf')).sort()).toEqual([
      `${modelPrefix(TEAM, JOB_RANDOM)}adapter.gguf`,
      `${modelPrefix(TEAM, JOB_ZERO)}adapter.gguf`,
    ]);
    // No temp files left behind: the download was renamed into place.
    expect((await readdir(join(dir, 'adapters'))).filter((n) => n.endsWith('.tmp'))).toEqual([]);

    const restarted = new LlamaCppDecoder({
      modelDirs: [DEFAULT_MODELS_DIR],
      stateDir: join(dir, 'kv2'),
      adapterDir: join(dir, 'adapters'),
    });
    try {
      await restarted.ensureAdapter(spec(JOB_RANDOM), blobs);
      expect(restarted.adapterDownloads).toBe(0);
      expect(await restarted.hasModel(JOB_RANDOM)).toBe(true);
    } finally {
      await restarted.close();
    }
    expect(streams.length).toBe(before);
  });

  it('keeps at most maxAdapterContexts adapter contexts, never disposing one a generation holds', async () => {
    // maxAdapterContexts is 1 here. Hold a generation on the random adapter mid-stream…
    const held = decoder
      .generate({
        model: JOB_RANDOM,
        scope: TEAM,
        prompt: PROMPT,
        params: { maxTokens: 16, temperature: 0, stop: [] },
        cache: noCache,
      })
      [Symbol.asyncIterator]();
    const first = await held.next();
    expect((first.value as GenerationEvent).type).toBe('start');
    // …while another adapter runs: over the limit, but the held context must survive it.
    expect((await greedy(decoder, JOB_ZERO)).text).toBe(baseline.text);
    expect(decoder.adapterContexts().attached).toContain(JOB_RANDOM);
    let text = '';
    for (let r = await held.next(); !r.done; r = await held.next()) if (r.value.type === 'text') text += r.value.text;
    // (A fresh context, as in the first test: the random adapter was evicted by the zero one there.)
    expect(text).toBe(tuned.text);
    // The idle one was disposed; only one adapter context is left.
    for (let i = 0; i < 100 && decoder.adapterContexts().live > 1; i++) await new Promise((ok) => setTimeout(ok, 20));
    expect(decoder.adapterContexts()).toEqual({ attached: [JOB_RANDOM], live: 1 });
    // An evicted adapter comes back (new context, same file, same output) without a download.
    const before = streams.length;
    expect((await greedy(decoder, JOB_ZERO)).text).toBe(baseline.text);
    expect(streams.length).toBe(before);
  });

  it('a rewritten adapter.gguf is a new version: fetched again, served by a new context, the old file removed', async () => {
    const JOB = '5b0c3c1e-4444-4a4a-8a8a-000000000004';
    const key = `${modelPrefix(TEAM, JOB)}adapter.gguf`;
    await blobs.put(key, readFileSync(join(await fixture('zero'), 'adapter.gguf')));
    const d = new LlamaCppDecoder({
      modelDirs: [DEFAULT_MODELS_DIR],
      threads: 1,
      slots: 1,
      contextSize: 512,
      adapterRecheckMs: 0,
      stateDir: join(dir, 'kv3'),
      adapterDir: join(dir, 'adapters3'),
    });
    try {
      await d.ensureAdapter(spec(JOB), blobs);
      expect((await greedy(d, JOB)).text).toBe(baseline.text);
      await d.ensureAdapter(spec(JOB), blobs);
      expect(d.adapterDownloads).toBe(1);
      await blobs.put(key, readFileSync(join(await fixture('random'), 'adapter.gguf')));
      await d.ensureAdapter(spec(JOB), blobs);
      expect(d.adapterDownloads).toBe(2);
      expect((await greedy(d, JOB)).text).toBe(tuned.text);
      for (let i = 0; i < 100 && (await readdir(join(dir, 'adapters3'))).length > 1; i++)
        await new Promise((ok) => setTimeout(ok, 20));
      expect(await readdir(join(dir, 'adapters3'))).toHaveLength(1);
      expect(d.adapterContexts()).toEqual({ attached: [JOB], live: 1 });
    } finally {
      await d.close();
    }
  });

  it('a job without adapter.gguf is a clear 503 naming the job', async () => {
    const err = await decoder.ensureAdapter(spec(JOB_NO_GGUF), blobs).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ServiceUnavailableError);
    expect((err as Error).message).toContain(JOB_NO_GGUF);
    expect((err as Error).message).toContain('adapter.gguf');
    expect(await decoder.hasModel(JOB_NO_GGUF)).toBe(false);
  });
});

/**
 * The pooled classifier route (docs/reference/encoder.md "Pooled classifier") on the real mini
 * encoder: a model directory holding the mini model plus the fixture head
 * (test/fixtures/pooled/make_head.py, fitted on 16 texts of 4 intents) answers covered tasks through
 * the pooled head and everything else through GLiNER2 exactly as the plain model does.
 */
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EncoderModel } from '../../src/encoder/engine';
import type { EncoderSchema } from '../../src/encoder/schema';
import { MINI_MODEL_DIR, useMiniModel } from '../helpers/miniModel';

const FIXTURE = fileURLToPath(new URL('../fixtures/pooled', import.meta.url));
const LABELS = ['lost_card', 'balance', 'weather', 'play_music'];
// none of these is a row the head was fitted on
const HELD_OUT: Array<[string, string]> = [
  ['I misplaced my credit card on the bus', 'lost_card'],
  ['how much money is in my checking account', 'balance'],
  ['will it snow in Oslo tomorrow', 'weather'],
  ['play a song by Queen', 'play_music'],
];

const schemaOf = (over: Partial<EncoderSchema> = {}): EncoderSchema => ({
  entities: [],
  classifications: [],
  structures: [],
  relations: [],
  ...over,
});

/** The mini model's files (linked) plus the pooled fragment; `json` replaces the fixture's metadata. */
function modelDir(root: string, name: string, json?: string | null): string {
  const dir = join(root, name);
  mkdirSync(join(dir, 'onnx'), { recursive: true });
  for (const f of readdirSync(MINI_MODEL_DIR)) if (f !== 'onnx') symlinkSync(join(MINI_MODEL_DIR, f), join(dir, f));
  for (const f of readdirSync(join(MINI_MODEL_DIR, 'onnx')))
    symlinkSync(join(MINI_MODEL_DIR, 'onnx', f), join(dir, 'onnx', f));
  copyFileSync(join(FIXTURE, 'pooled_classifier.onnx'), join(dir, 'onnx/pooled_classifier.onnx'));
  if (json === undefined)
    copyFileSync(join(FIXTURE, 'pooled_classifier.json'), join(dir, 'onnx/pooled_classifier.json'));
  else if (json !== null) writeFileSync(join(dir, 'onnx/pooled_classifier.json'), json);
  return dir;
}

const plain = useMiniModel();
let root: string;
let pooled: EncoderModel;
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'sift-pooled-'));
  pooled = await EncoderModel.load(modelDir(root, 'pooled'));
}, 120_000);
afterAll(async () => {
  await pooled?.release();
  rmSync(root, { recursive: true, force: true });
});

describe('pooled classifier route', () => {
  it('answers a task whose labels are all trained, from the text alone (no GLiNER2 prompt pass)', async () => {
    const schema = schemaOf({ classifications: [{ task: 'intent', labels: LABELS, multiLabel: false }] });
    const out = await pooled.infer(
      HELD_OUT.map(([t]) => t),
      schema,
    );
    expect(out.routes).toEqual({ intent: 'pooled' });
    expect(out.results.map((r) => r.classifications.intent!.map((x) => x.label))).toEqual(HELD_OUT.map(([, l]) => [l]));
    // input tokens are the text alone with [CLS]/[SEP]: the prompt was never built
    expect(out.textTokens).toEqual(
      await pooled.pooled!.tokenize(HELD_OUT.map(([t]) => t)).then((r) => r.map((x) => x.length)),
    );
    expect(out.inputTokens).toBe(out.textTokens.reduce((a, b) => a + b, 0));
  });

  it('runs on the int8 encoder too', async () => {
    const int8 = await EncoderModel.load(join(root, 'pooled'), { precision: 'int8' });
    try {
      const out = await int8.infer(
        HELD_OUT.map(([t]) => t),
        schemaOf({ classifications: [{ task: 'intent', labels: LABELS, multiLabel: false }] }),
      );
      expect(out.routes).toEqual({ intent: 'pooled' });
      expect(out.results.map((r) => r.classifications.intent![0]!.label)).toEqual(HELD_OUT.map(([, l]) => l));
    } finally {
      await int8.release();
    }
  });

  it('scores only the asked labels (any task name) and honours top_k', async () => {
    const schema = schemaOf({
      classifications: [{ task: 'topic', labels: ['balance', 'weather'], multiLabel: false, topK: 2 }],
    });
    const out = await pooled.infer(['will it snow in Oslo tomorrow'], schema);
    expect(out.routes).toEqual({ topic: 'pooled' });
    const got = out.results[0]!.classifications.topic!;
    expect(got.map((x) => x.label)).toEqual(['weather', 'balance']);
    expect(got[0]!.score + got[1]!.score).toBeCloseTo(1, 5);
  });

  it('a multi-label request to a softmax-trained head: softmax over the asked labels, then the threshold', async () => {
    const schema = schemaOf({ classifications: [{ task: 'intent', labels: LABELS, multiLabel: true }] });
    const [low, high] = await Promise.all([
      pooled.infer(['play a song by Queen'], schema, { threshold: 0 }),
      pooled.infer(['play a song by Queen'], schema, { threshold: 0.999999 }),
    ]);
    const all = low.results[0]!.classifications.intent!;
    expect(all[0]!.label).toBe('play_music');
    expect(all).toHaveLength(4);
    expect(all.reduce((n, x) => n + x.score, 0)).toBeCloseTo(1, 5);
    expect(high.results[0]!.classifications.intent).toEqual([]);
  });

  it('a multi-label request to a head trained multi-label: per-label sigmoid', async () => {
    const meta = JSON.parse(readFileSync(join(FIXTURE, 'pooled_classifier.json'), 'utf8'));
    const multi = await EncoderModel.load(modelDir(root, 'multi', JSON.stringify({ ...meta, multi_label: true })));
    try {
      const schema = schemaOf({ classifications: [{ task: 'intent', labels: LABELS, multiLabel: true }] });
      const [sig, soft] = await Promise.all([
        multi.infer(['play a song by Queen'], schema, { threshold: 0 }),
        pooled.infer(['play a song by Queen'], schema, { threshold: 0 }),
      ]);
      const sum = (r: typeof sig) => r.results[0]!.classifications.intent!.reduce((n, x) => n + x.score, 0);
      expect(sig.results[0]!.classifications.intent!.map((x) => x.label)[0]).toBe('play_music');
      expect(sum(soft)).toBeCloseTo(1, 5);
      expect(Math.abs(sum(sig) - 1)).toBeGreaterThan(0.01); // independent per-label probabilities
    } finally {
      await multi.release();
    }
  });

  it('a label outside the vocabulary sends the task to GLiNER2; other heads answer as the plain model answers them', async () => {
    const other = { task: 'other', labels: ['weather', 'complaint'], multiLabel: false };
    const entities = [{ name: 'person' }, { name: 'location' }];
    const schema = schemaOf({
      entities,
      classifications: [{ task: 'intent', labels: LABELS, multiLabel: false }, other],
    });
    const texts = ['Tim Cook lost his card in Zürich', 'will it snow in Oslo tomorrow'];
    // the GLiNER2 prompt of the pooled model leaves the pooled task out
    const [mixed, ref] = await Promise.all([
      pooled.infer(texts, schema),
      plain().infer(texts, schemaOf({ entities, classifications: [other] })),
    ]);
    expect(mixed.routes).toEqual({ intent: 'pooled', other: 'gliner2' });
    mixed.results.forEach((r, i) => {
      const { intent, ...rest } = r.classifications;
      expect({ ...r, classifications: rest }).toEqual(ref.results[i]);
      expect(Object.keys(r.classifications)).toEqual(['intent', 'other']);
      expect(intent).toHaveLength(1);
    });
    expect(mixed.results[1]!.classifications.intent![0]!.label).toBe('weather');
    expect(mixed.inputTokens).toBeGreaterThan(ref.inputTokens);
  });

  it('a model without the fragment routes everything to GLiNER2', async () => {
    const out = await plain().infer(
      ['play a song by Queen'],
      schemaOf({ classifications: [{ task: 'intent', labels: LABELS, multiLabel: false }] }),
    );
    expect(out.routes).toEqual({ intent: 'gliner2' });
    expect(plain().pooled).toBeUndefined();
  });

  it('truncates a long text to max_tokens, keeping the special tokens', async () => {
    const [ids] = await pooled.pooled!.tokenize([Array.from({ length: 200 }, () => 'balance').join(' ')]);
    expect(ids).toHaveLength(pooled.pooled!.meta.max_tokens);
    expect([ids![0], ids![ids!.length - 1]]).toEqual([101, 102]);
  });

  it('counts the fragment in the loaded bytes', () => {
    expect(pooled.bytes).toBeGreaterThan(plain().bytes);
  });

  it('fails the load naming a bad or missing metadata file', async () => {
    const bad = JSON.stringify({
      format: 1,
      labels: ['a', 'a'],
      multi_label: false,
      pooling: 'mean',
      max_tokens: 64,
      trained_rows: 2,
    });
    await expect(EncoderModel.load(modelDir(root, 'dupes', bad))).rejects.toThrow(
      /onnx\/pooled_classifier\.json labels: labels must be unique/,
    );
    await expect(EncoderModel.load(modelDir(root, 'nojson', null))).rejects.toThrow(
      /onnx\/pooled_classifier\.onnx without onnx\/pooled_classifier\.json/,
    );
    await expect(EncoderModel.load(modelDir(root, 'notjson', '{'))).rejects.toThrow(
      /onnx\/pooled_classifier\.json is not JSON/,
    );
  });
});

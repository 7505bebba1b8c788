/**
 * Every released GLiNER2 architecture the service serves (issue #27 item 1), on random-initialised
 * checkpoints built offline at the real config shapes (test/helpers/architectureCheckpoints.ts; the
 * MiniLM/BERT mini model is test/local/modelImport.test.ts's):
 *
 * | --arch                   | imported as (stands for)    | trained here            |
 * |--------------------------|-----------------------------|-------------------------|
 * | deberta-v3-count_lstm_v2 | fastino/gliner2-base-v1     | LoRA (query_proj, …)    |
 * | deberta-v3-count_lstm    | fastino/gliner2-large-v1    | full                    |
 * | mdeberta-v3 (250k vocab) | fastino/gliner2-multi-v1    | not here (see below)    |
 *
 * mDeBERTa-v3 is not fine-tuned in `npm test`: measured with it as a third LoRA job (this suite, two
 * cores, two jobs at a time) the suite went from 126 s to 149 s — its job ran ~35 s after waiting for
 * a slot — past the ~2.5 minutes this suite may add. Its backbone is the DeBERTa-v2 code the two
 * trained ones run (only the vocabulary and tokenizer differ, and import, parity and serving cover those);
 * the LoRA run passed, served, with the same target modules.
 *
 * Each is built once, imported with `importCheckpoint` (python conversion + the TS engine's parity
 * against the gliner2 library, every head non-empty), served by a local stack through POST /inference,
 * /gliner-2/extract and the OpenAI-compatible `schema` path — each answer equal to the engine's own —
 * and fine-tuned through the real training path (`python -m sift_trainer.job` under the local
 * runner), the fine-tuned model served after.
 *
 * Parity cases: the import's own (src/local/importParityCases.ts), except that the order's `product`
 * field is a single span (`str`), not a list. With random weights a span ending in a word and the
 * same span with the following `.` score within one float32 ulp of each other (measured: "to Berlin"
 * 0.52100623 vs "to Berlin." 0.52100629 in gliner2, the reverse order in onnxruntime), and a list
 * field's greedy overlap suppression keeps whichever ranks first, so the import refuses a model for a
 * 6e-8 difference. Trained heads are nowhere near such ties (the mini model's list fields pass).
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { x as extractTar } from 'tar';
import { formatResult, toEncoderSchema } from '../../src/core/extraction/api';
import { EncoderModel } from '../../src/encoder/engine';
import { canonResult } from '../../src/encoder/parity';
import { IMPORT_PARITY_CASES, type ParityCase } from '../../src/local/importParityCases';
import { importCheckpoint, type ImportResult } from '../../src/local/modelImport';
import {
  buildArchitectureCheckpoints,
  SERVED_ARCHITECTURES,
  type BuiltCheckpoint,
  type ServedArchitecture,
} from '../helpers/architectureCheckpoints';
import { jsonl, TestStack } from '../helpers/localStack';

const ARCHS = Object.keys(SERVED_ARCHITECTURES) as ServedArchitecture[];

const CASES: ParityCase[] = IMPORT_PARITY_CASES.map((c) =>
  c.name === 'structures'
    ? {
        ...c,
        schema: {
          ...c.schema,
          structures: c.schema.structures.map((s) => ({
            ...s,
            fields: s.fields.map((f) => (f.name === 'product' ? { ...f, dtype: 'str' as const } : f)),
          })),
        },
      }
    : c,
);

/** What each parity case must have produced (reference = engine once parity passed): every head answered. */
const HEADS: Record<string, RegExp[]> = {
  entities: [/^E\|[^|]+\|\d+\|/],
  classification: [/^C\|sentiment\|0\|/, /^C\|topics\|0\|/],
  structures: [/^S\|order\|0\|product\|0\|\d/, /^S\|order\|0\|shipping\|0\|choice\|/],
  relations: [/^R\|[^|]+\|0\|head\|/, /^R\|[^|]+\|0\|tail\|/],
};

let work: string;
let modelsDir: string;
let built: Record<string, BuiltCheckpoint>;
const imported: Partial<Record<ServedArchitecture, ImportResult & { heads: Record<string, number> }>> = {};
const timings: Record<string, number> = {};

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'sift-archs-'));
  modelsDir = join(work, 'models');
  const t0 = performance.now();
  built = await buildArchitectureCheckpoints(join(work, 'checkpoints'), ARCHS);
  timings.build = (performance.now() - t0) / 1000;
}, 120_000);
afterAll(async () => {
  // the per-architecture numbers of the issue's table, in the test output
  const summary = ARCHS.map((a) => ({ arch: a, parity: imported[a]?.parity, heads: imported[a]?.heads }));
  console.log(JSON.stringify({ seconds: timings, summary }));
  await rm(work, { recursive: true, force: true });
});

describe.each(ARCHS)('%s', (arch) => {
  it('imports with parity on every head', async () => {
    const t0 = performance.now();
    const result = await importCheckpoint({
      checkpointDir: built[arch]!.dir,
      modelId: SERVED_ARCHITECTURES[arch],
      modelsDir,
      cases: CASES,
    });
    timings[`import ${arch}`] = (performance.now() - t0) / 1000;
    expect(result.parity.maxDiff).toBeLessThanOrEqual(1e-4);
    const manifest = JSON.parse(await readFile(join(result.dir, 'manifest.json'), 'utf8'));
    expect(manifest.architecture_details).toBeDefined();
    // parity passed, so the engine's answers are the library's: count them per head, none may be empty
    const model = await EncoderModel.load(result.dir);
    const heads: Record<string, number> = {};
    try {
      for (const c of CASES) {
        const out = await model.infer(c.texts, c.schema, { threshold: c.threshold });
        const keys = out.results.flatMap((r) => Object.keys(canonResult(r, c.schema)));
        for (const [i, re] of HEADS[c.name]!.entries()) {
          heads[`${c.name}${HEADS[c.name]!.length > 1 ? `[${i}]` : ''}`] = keys.filter((k) => re.test(k)).length;
        }
      }
    } finally {
      await model.release();
    }
    for (const n of Object.values(heads)) expect(n).toBeGreaterThan(0);
    imported[arch] = { ...result, heads };
  }, 180_000);
});

const people = ['Tim Cook', 'Satya Nadella', 'Lisa Su', 'Mary Barra', 'Jensen Huang'];
const companies = ['Apple', 'Microsoft', 'AMD', 'General Motors', 'Nvidia'];
const cities = ['Paris', 'Berlin', 'Tokyo', 'Austin'];
const nerRows = Array.from({ length: 20 }, (_, i) => {
  const p = people[i % people.length]!;
  const c = companies[(i * 2) % companies.length]!;
  const city = cities[i % cities.length]!;
  return {
    text: `${p} visited the ${c} office in ${city} last week.`,
    entities: [
      [p, 'person'],
      [c, 'company'],
      [city, 'city'],
    ],
  };
});

const TEXT = 'Satya Nadella of Microsoft flew to Berlin on Monday; the trip was a success.';
const SCHEMA = {
  entities: ['person', 'company', 'city'],
  classifications: [{ task: 'sentiment', labels: ['positive', 'negative'] }],
  structures: {
    trip: {
      fields: [
        { name: 'who', dtype: 'str' },
        { name: 'where', dtype: 'str' },
      ],
    },
  },
  relations: ['works for'],
};
const THRESHOLD = 0.3;

/** The engine's own answer on a model directory, as POST /inference formats it. */
async function engineAnswer(dir: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
  const model = await EncoderModel.load(dir);
  try {
    const schema = toEncoderSchema(body as never);
    return formatResult((await model.infer([TEXT], schema, { threshold: THRESHOLD })).results[0]!, schema);
  } finally {
    await model.release();
  }
}

describe('served by a local stack, and fine-tuned', () => {
  let stack: TestStack;
  beforeAll(async () => {
    for (const arch of ARCHS) if (!imported[arch]) throw new Error(`${arch} was not imported`);
    // the stack publishes the imported models from its models dir into its store at start
    stack = await TestStack.start({ modelsDir, maxTrainingJobs: 2 });
  }, 120_000);
  afterAll(async () => stack?.stop());

  it.each(ARCHS)('%s: /inference, /gliner-2/extract and the compat schema answer as the engine does', async (arch) => {
    const id = SERVED_ARCHITECTURES[arch];
    const expected = await engineAnswer(imported[arch]!.dir, SCHEMA);
    expect((expected.entities as unknown[]).length).toBeGreaterThan(0);
    const inference = await stack.call('POST', '/inference', {
      body: { model_id: id, text: TEXT, schema: SCHEMA, threshold: THRESHOLD },
    });
    expect(inference.status).toBe(200);
    expect(inference.body.result).toEqual(expected);
    const gliner = await stack.call('POST', '/gliner-2/extract', {
      body: { model_id: id, text: TEXT, schema: SCHEMA, threshold: THRESHOLD },
    });
    expect(gliner.status).toBe(200);
    expect(gliner.body.result).toEqual(expected);
    const compat = await stack.call('POST', '/v1/chat/completions', {
      body: { model: id, schema: SCHEMA, threshold: THRESHOLD, messages: [{ role: 'user', content: TEXT }] },
    });
    expect(compat.status).toBe(200);
    expect(JSON.parse(compat.body.choices[0].message.content)).toEqual(expected);
  });

  it('fine-tunes count_lstm_v2 with LoRA (DeBERTa targets) and count_lstm in full; both served', async () => {
    expect((await stack.uploadDataset('people', jsonl(nerRows))).status).toBe('ready');
    const plans = [
      { arch: 'deberta-v3-count_lstm_v2', training_type: 'lora' },
      { arch: 'deberta-v3-count_lstm', training_type: 'full' },
    ] as const;
    const t0 = performance.now();
    const jobs = await Promise.all(
      plans.map(async (p) => {
        const created = await stack.call('POST', '/core/training-jobs', {
          body: {
            model_name: `${p.arch}-${p.training_type}`,
            base_model: SERVED_ARCHITECTURES[p.arch],
            datasets: [{ name: 'people' }],
            training_type: p.training_type,
            nr_epochs: 1,
          },
        });
        expect(created.status).toBe(201);
        for (;;) {
          const job = (await stack.call('GET', `/core/training-jobs/${created.body.id}`)).body;
          if (['complete', 'failed', 'stopped'].includes(job.status)) {
            timings[`train ${p.arch} ${p.training_type}`] = (performance.now() - t0) / 1000;
            return job;
          }
          await new Promise((r) => setTimeout(r, 500));
        }
      }),
    );
    const teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
    for (const [i, job] of jobs.entries()) {
      expect({ status: job.status, error: job.error }).toEqual({ status: 'complete', error: null });
      const manifest = JSON.parse(await stack.svc.blobs.getText(`jobs/${teamId}/${job.id}/model/manifest.json`));
      expect(manifest.files.onnx_dir).toBe('onnx/');
      if (plans[i]!.training_type === 'lora') {
        const adapter = JSON.parse(
          await stack.svc.blobs.getText(`jobs/${teamId}/${job.id}/model/adapter/adapter_config.json`),
        );
        // DeBERTa's attention and feed-forward names (gliner2's _resolve_targets), beside the heads
        expect([...adapter.target_modules].sort()).toEqual(
          expect.arrayContaining(['dense', 'key_proj', 'query_proj', 'value_proj']),
        );
      }
      // served once deployed, answering as the engine does on the job's own archive
      expect((await stack.call('POST', `/core/training-jobs/${job.id}/deploy`)).status).toBe(200);
      const res = await stack.call('POST', '/inference', {
        body: { model_id: job.id, text: TEXT, schema: { entities: SCHEMA.entities }, threshold: THRESHOLD },
      });
      expect(res.status).toBe(200);
      expect(res.body.model_id).toBe(job.id);
      const dir = join(work, `job-${job.id}`);
      await mkdir(dir);
      const link = await stack.call('GET', `/core/training-jobs/${job.id}/download`, {
        headers: { accept: 'application/json' },
      });
      await writeFile(join(dir, 'model.tar.gz'), Buffer.from(await (await fetch(link.body.url)).arrayBuffer()));
      await extractTar({ file: join(dir, 'model.tar.gz'), cwd: dir });
      expect(res.body.result).toEqual(await engineAnswer(dir, { entities: SCHEMA.entities }));
      // and the job trained: its model no longer answers as the base it started from
      expect(res.body.result).not.toEqual(
        await engineAnswer(imported[plans[i]!.arch]!.dir, { entities: SCHEMA.entities }),
      );
    }
  }, 300_000);
});

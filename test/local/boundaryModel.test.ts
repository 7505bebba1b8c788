/**
 * The GLiNER2 boundary architecture (issue #32; the GLiNER2.5 family) on a random-initialised checkpoint built
 * offline (`sift_trainer.build.architectures --arch boundary`): imported with parity against the gliner2
 * library — entities, single- and multi-label classification, structures with a choice field, relations, and a
 * long text the library reads in chunks (`batch_extract_long`) where the engine reads windows, offsets global —
 * then served by a local stack as the engine answers, fine-tuned with LoRA and in full through the API (the real
 * trainer) and each tuned model served.
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
import { buildArchitectureCheckpoints } from '../helpers/architectureCheckpoints';
import { jsonl, TestStack } from '../helpers/localStack';

const MODEL = 'acme/gliner25-tiny';
const sentence = 'Lisa Su of AMD met Jensen Huang in Taipei on Monday to talk about chips. ';
const LONG: ParityCase = {
  name: 'long',
  // 640 words: the engine's windows and the library's chunks alike
  texts: [sentence.repeat(40).trim()],
  schema: {
    entities: ['person', 'organization', 'location', 'date'].map((name) => ({ name })),
    classifications: [],
    structures: [],
    relations: [],
  },
  threshold: 0.3,
  // the tiny checkpoint's 259-piece tokenizer needs many tokens per word: 48-word windows fit its 512 tokens
  chunked: [2],
  chunk_words: 48,
  chunk_overlap: 12,
};
const CASES: ParityCase[] = [...IMPORT_PARITY_CASES, LONG];

let work: string;
let imported: ImportResult;

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'sift-boundary-'));
  const built = await buildArchitectureCheckpoints(join(work, 'checkpoints'), ['boundary']);
  imported = await importCheckpoint({
    checkpointDir: built['boundary']!.dir,
    modelId: MODEL,
    modelsDir: join(work, 'models'),
    languages: ['en'],
    cases: CASES,
  });
}, 180_000);
afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

describe('a boundary checkpoint', () => {
  it('imports with parity on entities, classification, structures and a windowed long text', async () => {
    expect(imported.parity.maxDiff).toBeLessThanOrEqual(1e-4);
    const manifest = JSON.parse(await readFile(join(imported.dir, 'manifest.json'), 'utf8'));
    expect(manifest.architecture).toBe('gliner2-boundary');
    expect(manifest.registry.architecture).toBe('gliner2-boundary');
    // parity passed, so the engine's answers are the library's: each head answered something
    const model = await EncoderModel.load(imported.dir);
    try {
      const keys: string[] = [];
      let windows = 0;
      for (const c of CASES) {
        const out = await model.infer(c.texts, c.schema, {
          threshold: c.threshold,
          ...(c.chunk_words ? { chunkWords: c.chunk_words, chunkOverlap: c.chunk_overlap } : {}),
        });
        out.results.forEach((r) => {
          keys.push(...Object.keys(canonResult(r, c.schema)));
        });
        if (c.name === 'long') {
          windows = out.chunks[0]!;
          const starts = Object.values(out.results[0]!.entities ?? {}).flatMap((s) => s.map((x) => x.start));
          expect(Math.max(...starts)).toBeGreaterThan(sentence.length * 30); // offsets into the whole text
        }
      }
      expect(windows).toBe(18); // 640 words in 48-word windows, 36 apart
      for (const head of [
        /^E\|/,
        /^C\|sentiment\|0\|/,
        /^C\|topics\|/,
        /^S\|order\|0\|product\|/,
        /^S\|order\|0\|shipping\|/,
      ])
        expect(keys.filter((k) => head.test(k)).length).toBeGreaterThan(0);
    } finally {
      await model.release();
    }
  });

  describe('served by a local stack', () => {
    let stack: TestStack;
    beforeAll(async () => {
      stack = await TestStack.start({ modelsDir: join(work, 'models'), maxTrainingJobs: 1 });
    }, 120_000);
    afterAll(async () => stack?.stop());

    const TEXT = 'Satya Nadella of Microsoft flew to Berlin on Monday; the trip was a success.';
    const SCHEMA = {
      entities: ['person', 'company', 'city'],
      classifications: [{ task: 'sentiment', labels: ['positive', 'negative'] }],
      relations: ['works for'],
      structures: {
        trip: {
          fields: [
            { name: 'who', dtype: 'str' },
            { name: 'where', dtype: 'list' },
            { name: 'mode', dtype: 'str', choices: ['air', 'rail'] },
          ],
        },
      },
    };

    /** The engine's own answer on a model directory, as POST /inference formats it. */
    async function engineAnswer(dir: string, body: Record<string, unknown>): Promise<Record<string, unknown>> {
      const model = await EncoderModel.load(dir);
      try {
        const schema = toEncoderSchema(body as never);
        return formatResult((await model.infer([TEXT], schema, { threshold: 0.3 })).results[0]!, schema);
      } finally {
        await model.release();
      }
    }

    it('answers /inference, /gliner-2/extract and the compat schema path as the engine does', async () => {
      const expected = await engineAnswer(imported.dir, SCHEMA);
      expect(Object.keys(expected)).toEqual(['entities', 'classifications', 'structures', 'relations']);
      expect(Object.keys((expected.structures as { trip: object[] }).trip[0]!)).toEqual(['who', 'where', 'mode']);
      for (const path of ['/inference', '/gliner-2/extract']) {
        const res = await stack.call('POST', path, {
          body: { model_id: MODEL, text: TEXT, schema: SCHEMA, threshold: 0.3 },
        });
        expect(res.status).toBe(200);
        expect(res.body.result).toEqual(expected);
      }
      const compat = await stack.call('POST', '/v1/chat/completions', {
        body: { model: MODEL, schema: SCHEMA, threshold: 0.3, messages: [{ role: 'user', content: TEXT }] },
      });
      expect(compat.status).toBe(200);
      expect(JSON.parse(compat.body.choices[0].message.content)).toEqual(expected);
    });

    it.each(['lora', 'full'] as const)(
      'fine-tunes (%s) through the API and serves the tuned model as its archive answers',
      async (trainingType) => {
        const people = ['Tim Cook', 'Satya Nadella', 'Lisa Su', 'Mary Barra'];
        const rows = Array.from({ length: 16 }, (_, i) => ({
          text: `${people[i % 4]} visited the office in ${['Paris', 'Berlin'][i % 2]} last week.`,
          entities: [
            [people[i % 4], 'person'],
            [['Paris', 'Berlin'][i % 2], 'city'],
          ],
          label: ['paris', 'berlin'][i % 2], // a label column: the job fits the pooled classifier too
        }));
        const dataset = `people-${trainingType}`;
        expect((await stack.uploadDataset(dataset, jsonl(rows))).status).toBe('ready');
        const created = await stack.call('POST', '/core/training-jobs', {
          body: {
            model_name: `boundary-${trainingType}`,
            base_model: MODEL,
            datasets: [{ name: dataset }],
            training_type: trainingType,
            nr_epochs: 2,
          },
        });
        expect(created.status).toBe(201);
        let job: Record<string, unknown>;
        for (;;) {
          job = (await stack.call('GET', `/core/training-jobs/${created.body.id}`)).body;
          if (['complete', 'failed', 'stopped'].includes(String(job.status))) break;
          await new Promise((r) => setTimeout(r, 500));
        }
        expect({ status: job.status, error: job.error }).toEqual({ status: 'complete', error: null });
        const teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
        const stored = (key: string) => stack.svc.blobs.getText(`jobs/${teamId}/${job.id}/model/${key}`);
        const manifest = JSON.parse(await stored('manifest.json'));
        expect(manifest.architecture).toBe('gliner2-boundary');
        expect(manifest.files.pooled_classifier).toBe('onnx/pooled_classifier.onnx');
        if (trainingType === 'lora')
          // the encoder's attention and the boundary head's projections (gliner2's "all_task_heads")
          expect(JSON.parse(await stored('adapter/adapter_config.json')).target_modules).toEqual(
            expect.arrayContaining([
              'query_proj',
              'left_projection',
              'start_boundary_projection',
              'start_endpoint_projection',
              'classifier.0',
            ]),
          );
        expect((await stack.call('POST', `/core/training-jobs/${job.id}/deploy`)).status).toBe(200);
        const body = {
          text: TEXT,
          schema: { entities: ['person', 'city'], classifications: [{ task: 'label', labels: ['paris', 'berlin'] }] },
          threshold: 0.3,
        };
        const tuned = await stack.call('POST', '/inference', { body: { model_id: job.id, ...body } });
        expect(tuned.status).toBe(200);
        // the classification was answered by the job's pooled classifier (the inference record says which route)
        expect((await stack.call('GET', `/inferences/${tuned.body.inference_id}`)).body.routes).toEqual({
          label: 'pooled',
        });
        const dir = join(work, `tuned-${trainingType}`);
        await mkdir(dir);
        const link = await stack.call('GET', `/core/training-jobs/${job.id}/download`, {
          headers: { accept: 'application/json' },
        });
        await writeFile(join(dir, 'model.tar.gz'), Buffer.from(await (await fetch(link.body.url)).arrayBuffer()));
        await extractTar({ file: join(dir, 'model.tar.gz'), cwd: dir });
        expect(tuned.body.result).toEqual(await engineAnswer(dir, body.schema));
        // and it trained: the tuned model no longer answers as the imported base does
        expect(tuned.body.result).not.toEqual(await engineAnswer(imported.dir, body.schema));
      },
      300_000,
    );
  });
});

/**
 * Encoder extraction through HTTP on the built mini model (sift/gliner2-mini-v1): every head via
 * POST /inference and /gliner-2/*, offsets in code points, chunking, persistence, bad input.
 * Needs the set-up's mini model in the model store (published at local start); fails if absent.
 */
import { jsonl, TestStack } from '../helpers/localStack';

const MODEL = 'sift/gliner2-mini-v1';
let stack: TestStack;

beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
  const models = (await stack.call('GET', '/base-models')).body;
  const list = Array.isArray(models) ? models : (models.models ?? models.data ?? models.base_models);
  const mini = list.find((m: any) => m.id === MODEL);
  if (!mini?.available)
    throw new Error(
      `${MODEL} is not in the model store (${process.env.SIFT_MODELS_DIR ?? '~/.cache/sift/models'}): build it with \`node scripts/setup.mjs\` (npm test does) or set SIFT_MODELS_DIR`,
    );
}, 180_000);
afterAll(async () => {
  await stack?.stop();
});

const cp = (s: string, start: number, end: number) => Array.from(s).slice(start, end).join('');
const infer = (body: Record<string, unknown>) =>
  stack.call('POST', '/inference', { body: { model_id: MODEL, ...body } });

describe('POST /inference (encoder)', () => {
  it('extracts entities with code-point offsets, usage and a stored record', async () => {
    const text = 'Hi 😀👩‍👩‍👧 Tim Cook met Satya Nadella in Zürich.';
    const res = await infer({ text, schema: { entities: ['person', 'location'] }, threshold: 0.3 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ model_id: MODEL, type: 'encoder', usage: { input_tokens: expect.any(Number) } });
    expect(res.body.inference_id).toMatch(/^inf_/);
    expect(res.body.usage.input_tokens).toBeGreaterThan(10);
    const ents = res.body.result.entities as any[];
    expect(ents.length).toBeGreaterThan(0);
    for (const e of ents) {
      expect(['person', 'location']).toContain(e.label);
      expect(cp(text, e.start, e.end)).toBe(e.text);
      expect(e.score).toBeGreaterThanOrEqual(0.3);
    }
    expect(ents.map((e) => e.start)).toEqual([...ents.map((e) => e.start)].sort((a, b) => a - b));
    expect(ents.some((e) => e.text === 'Tim Cook' && e.label === 'person' && e.start === 10)).toBe(true);
    const stored = await stack.call('GET', `/inferences/${res.body.inference_id}`);
    expect(stored.status).toBe(200);
    expect(stored.body.model_id).toBe(MODEL);
  });

  it('store:false returns an id but persists nothing', async () => {
    const res = await infer({
      text: 'Tim Cook leads Apple.',
      schema: { entities: { person: 'names of people' } },
      store: false,
    });
    expect(res.status).toBe(200);
    expect((await stack.call('GET', `/inferences/${res.body.inference_id}`)).status).toBe(404);
  });

  it('thresholds: lowering surfaces more candidates, raising returns fewer', async () => {
    const text = 'Maria Gonzalez of Siemens met delegates from Brazil and Japan in Geneva on Tuesday.';
    const schema = { entities: ['person', 'organization', 'location'] };
    const [lo, mid, hi] = await Promise.all([0.1, 0.5, 0.95].map((threshold) => infer({ text, schema, threshold })));
    expect(lo!.body.result.entities.length).toBeGreaterThanOrEqual(mid!.body.result.entities.length);
    expect(mid!.body.result.entities.length).toBeGreaterThanOrEqual(hi!.body.result.entities.length);
    expect(lo!.body.result.entities.length).toBeGreaterThan(hi!.body.result.entities.length);
  });

  it('classifies: single-label always one label, multi-label with threshold and top_k', async () => {
    const res = await infer({
      text: 'The service was terrible and the food was cold.',
      schema: {
        classifications: [
          { task: 'sentiment', labels: ['positive', 'negative', 'neutral'] },
          { task: 'aspects', labels: ['service', 'food', 'price', 'location'], multi_label: true, top_k: 2 },
          { task: 'sentiment3', labels: ['positive', 'negative', 'neutral'], top_k: 3 },
        ],
      },
      threshold: 0.99,
    });
    if (res.status !== 200) console.log(res.text);
    expect(res.status).toBe(200);
    const c = res.body.result.classifications;
    expect(c.sentiment).toHaveLength(1);
    expect(['positive', 'negative', 'neutral']).toContain(c.sentiment[0].label);
    // multi-label: only labels at or above the threshold (none is a valid answer), at most top_k
    expect(c.aspects.length).toBeLessThanOrEqual(2);
    for (const a of c.aspects) expect(a.score).toBeGreaterThanOrEqual(0.99);
    expect(c.sentiment3.map((x: any) => x.label).sort()).toEqual(['negative', 'neutral', 'positive']);
    const scores = c.sentiment3.map((x: any) => x.score);
    expect(scores).toEqual([...scores].sort((a: number, b: number) => b - a));
    expect(scores.reduce((a: number, b: number) => a + b, 0)).toBeCloseTo(1, 5);
    // the record says which head answered each task: a base model has no pooled classifier
    const stored = await stack.call('GET', `/inferences/${res.body.inference_id}`);
    expect(stored.body.routes).toEqual({ sentiment: 'gliner2', aspects: 'gliner2', sentiment3: 'gliner2' });
  });

  it('multi-label returns every label at or above the threshold and nothing else, an empty list when none is', async () => {
    const labels = ['service', 'food', 'price', 'location'];
    const ask = (threshold: number) =>
      infer({
        text: 'The service was terrible and the food was cold.',
        schema: { classifications: [{ task: 'aspects', labels, multi_label: true }] },
        threshold,
      });
    const all = (await ask(0)).body.result.classifications.aspects;
    expect(all.map((x: any) => x.label).sort()).toEqual([...labels].sort());
    const scores = new Map<string, number>(all.map((x: any) => [x.label, x.score]));
    const none = (await ask(1)).body.result.classifications.aspects;
    expect(none.filter((x: any) => x.score < 1)).toEqual([]);
    // a threshold between two labels' scores keeps exactly those above it
    const sorted = [...scores.values()].sort((a, b) => b - a);
    const cut = (sorted[1]! + sorted[2]!) / 2;
    const some = (await ask(cut)).body.result.classifications.aspects;
    expect(some.map((x: any) => x.label).sort()).toEqual(
      [...scores]
        .filter(([, s]) => s >= cut)
        .map(([l]) => l)
        .sort(),
    );
  });

  it('extracts structures (str/list fields, choices) and relations, batch in input order', async () => {
    const texts = [
      'Book a table for 4 people at 7pm tomorrow under the name Smith, outdoor seating please.',
      'John Smith works for Acme Corp in Berlin.',
    ];
    const res = await infer({
      text: texts,
      schema: {
        structures: {
          reservation: {
            fields: [
              { name: 'people', dtype: 'str' },
              { name: 'time', dtype: 'str', description: 'time of day' },
              { name: 'names', dtype: 'list' },
              { name: 'seating', choices: ['indoor', 'outdoor'] },
            ],
          },
        },
        relations: ['works for', { name: 'located in' }],
      },
      threshold: 0.2,
    });
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body.result)).toBe(true);
    expect(res.body.result).toHaveLength(2);
    res.body.result.forEach((r: any, i: number) => {
      expect(Object.keys(r).sort()).toEqual(['relations', 'structures']);
      for (const inst of r.structures.reservation) {
        expect(Object.keys(inst)).toEqual(['people', 'time', 'names', 'seating']);
        expect(Array.isArray(inst.names)).toBe(true);
        for (const f of ['people', 'time'])
          if (inst[f] !== null) expect(cp(texts[i]!, inst[f].start, inst[f].end)).toBe(inst[f].text);
        if (inst.seating !== null) expect(['indoor', 'outdoor']).toContain(inst.seating.text);
      }
      expect(Object.keys(r.relations).sort()).toEqual(['located in', 'works for']);
      for (const rel of [...r.relations['works for'], ...r.relations['located in']]) {
        expect(cp(texts[i]!, rel.head.start, rel.head.end)).toBe(rel.head.text);
        expect(cp(texts[i]!, rel.tail.start, rel.tail.end)).toBe(rel.tail.text);
        expect(rel.score).toBeCloseTo(Math.min(rel.head.score, rel.tail.score), 6);
      }
    });
    // a batch gives what each text gives alone
    const alone = await infer({
      text: texts[1],
      schema: {
        relations: ['works for', { name: 'located in' }],
        structures: {
          reservation: {
            fields: [
              { name: 'people', dtype: 'str' },
              { name: 'time', dtype: 'str', description: 'time of day' },
              { name: 'names', dtype: 'list' },
              { name: 'seating', choices: ['indoor', 'outdoor'] },
            ],
          },
        },
      },
      threshold: 0.2,
    });
    expect(JSON.stringify(alone.body.result)).toBe(JSON.stringify(res.body.result[1]));
  });

  it('reads a long text in windows (no truncation), says how many, and keeps offsets global', async () => {
    const sentence = 'Maria Gonzalez of Siemens visited Geneva and Kraków on Tuesday. ';
    // an astral character first: every later offset differs in code points and UTF-16 units
    const text = `😀 ${sentence.repeat(120)}Finally Olaf Scholz arrived in Berlin 😀.`;
    const res = await infer({ text, schema: { entities: ['person', 'location'] }, threshold: 0.4 });
    expect(res.status).toBe(200);
    expect(res.body.usage.input_tokens).toBeGreaterThan(512);
    expect(res.body.windows).toBeGreaterThan(1);
    const ents = res.body.result.entities as any[];
    for (const e of ents) expect(cp(text, e.start, e.end)).toBe(e.text);
    // the last words of the document are read in its last window, and come back at their own characters
    const chars = Array.from(text);
    const at = (word: string) => Array.from(text.slice(0, text.lastIndexOf(word))).length;
    const berlin = ents.find((e) => e.text === 'Berlin');
    expect(berlin).toMatchObject({ label: 'location', start: at('Berlin'), end: at('Berlin') + 6 });
    expect(chars.slice(berlin.start, berlin.end).join('')).toBe('Berlin');
    expect(ents.some((e) => e.label === 'person' && e.start === at('Olaf Scholz'))).toBe(true);
    // a batch: one count per text, in input order, beside `result`
    const batch = await infer({ text: ['Tim Cook leads Apple.', text], schema: { entities: ['person'] } });
    expect(batch.status).toBe(200);
    expect(batch.body.windows).toEqual([1, res.body.windows]);
  });
});

describe('/gliner-2/*', () => {
  it('serves every head with the gliner rate-limit class', async () => {
    const text = 'Tim Cook, the CEO of Apple, announced record profits in Cupertino.';
    const calls = await Promise.all([
      stack.call('POST', '/gliner-2/entities', { body: { model_id: MODEL, text, entities: ['person', 'company'] } }),
      stack.call('POST', '/gliner-2/classify', {
        body: { model_id: MODEL, text, classifications: [{ task: 'topic', labels: ['business', 'sports'] }] },
      }),
      stack.call('POST', '/gliner-2/extract-json', {
        body: {
          model_id: MODEL,
          text,
          structures: { announcement: { fields: [{ name: 'who', dtype: 'str' }, 'where'] } },
        },
      }),
      stack.call('POST', '/gliner-2/relations', { body: { model_id: MODEL, text, relations: ['works for'] } }),
      stack.call('POST', '/gliner-2/extract', {
        body: {
          model_id: MODEL,
          text,
          schema: { entities: ['person'], classifications: [{ task: 'topic', labels: ['business', 'sports'] }] },
        },
      }),
    ]);
    for (const c of calls) {
      expect(c.status).toBe(200);
      expect(c.body.inference_id).toMatch(/^inf_/);
      expect(c.body.windows).toBe(1); // a short text: one encoder pass
    }
    expect(Object.keys(calls[0]!.body.result)).toEqual(['entities']);
    expect(Object.keys(calls[1]!.body.result)).toEqual(['classifications']);
    expect(Object.keys(calls[2]!.body.result)).toEqual(['structures']);
    expect(Object.keys(calls[3]!.body.result)).toEqual(['relations']);
    expect(Object.keys(calls[4]!.body.result).sort()).toEqual(['classifications', 'entities']);
    // each call is billed once, under its own route and the model it named, with the tokens it reported
    const rows = (await stack.call('GET', '/billing/usage/requests/list?limit=500')).body.data as any[];
    const paths = [
      '/gliner-2/entities',
      '/gliner-2/classify',
      '/gliner-2/extract-json',
      '/gliner-2/relations',
      '/gliner-2/extract',
    ];
    calls.forEach((c, i) => {
      const row = rows.filter((r) => r.inference_id === c.body.inference_id);
      expect(row).toHaveLength(1);
      expect(row[0]).toMatchObject({ endpoint: paths[i], model: MODEL, input_tokens: c.body.usage.input_tokens });
      expect(row[0].cost_usd).toBeGreaterThan(0);
    });
    const usage = (await stack.call('GET', '/billing/usage/requests')).body;
    expect(usage.today.requests_by_endpoint.gliner).toBeGreaterThanOrEqual(5);
    for (const p of paths)
      expect(usage.today.by_endpoint.find((e: any) => e.endpoint === p)?.requests).toBeGreaterThanOrEqual(1);
  });
});

describe('compatible routes with a schema', () => {
  it('extract through /v1/chat/completions and /v1/messages', async () => {
    const chat = await stack.call('POST', '/v1/chat/completions', {
      body: {
        model: MODEL,
        messages: [{ role: 'user', content: 'Tim Cook leads Apple.' }],
        schema: { entities: ['person'] },
      },
    });
    expect(chat.status).toBe(200);
    const content = JSON.parse(chat.body.choices[0].message.content);
    expect(Object.keys(content)).toEqual(['entities']); // the content is the result alone
    expect(chat.body.windows).toBe(1); // beside inference_id, Sift's own top-level fields
    expect(content.entities[0]).toMatchObject({ text: 'Tim Cook', label: 'person', start: 0, end: 8 });
    const msg = await stack.call('POST', '/v1/messages', {
      body: {
        model: MODEL,
        max_tokens: 16,
        messages: [{ role: 'user', content: 'Tim Cook leads Apple.' }],
        schema: { entities: ['person'] },
      },
    });
    expect(msg.status).toBe(200);
    expect(JSON.parse(msg.body.content[0].text).entities[0].text).toBe('Tim Cook');
    expect(msg.body.windows).toBe(1);
  });
});

describe('bad input: clear 4xx, never 500', () => {
  const cases: Array<[string, Record<string, unknown>, number, RegExp]> = [
    ['empty text', { text: '', schema: { entities: ['person'] } }, 422, /empty/],
    ['whitespace text', { text: '   ', schema: { entities: ['person'] } }, 422, /empty/],
    ['1 MB text', { text: 'word '.repeat(200_000), schema: { entities: ['person'] } }, 413, /at most 100000/],
    ['empty schema', { text: 'hello', schema: {} }, 422, /schema is empty/],
    ['empty entity list only', { text: 'hello', schema: { entities: [] } }, 422, /schema is empty/],
    [
      '1,000 labels',
      { text: 'hello', schema: { entities: Array.from({ length: 1000 }, (_, i) => `label ${i}`) } },
      422,
      /at most 200/,
    ],
    [
      'duplicate labels',
      { text: 'hello', schema: { entities: ['person', 'person'] } },
      422,
      /duplicate entity type 'person'/,
    ],
    [
      'duplicate class labels',
      { text: 'hello', schema: { classifications: [{ task: 't', labels: ['a', 'a'] }] } },
      422,
      /duplicate label 'a'/,
    ],
    [
      'bad dtype',
      { text: 'hello', schema: { structures: { s: { fields: [{ name: 'f', dtype: 'int' }] } } } },
      422,
      /dtype/,
    ],
    [
      'choices on a list field',
      { text: 'hello', schema: { structures: { s: { fields: [{ name: 'f', dtype: 'list', choices: ['a', 'b'] }] } } } },
      422,
      /choices are only allowed on a 'str' field/,
    ],
    [
      'decoder model',
      { model_id: 'HuggingFaceTB/SmolLM2-135M-Instruct', text: 'hello', schema: { entities: ['person'] } },
      422,
      /decoder/,
    ],
    [
      'unknown model',
      { model_id: 'nobody/nothing', text: 'hello', schema: { entities: ['person'] } },
      404,
      /does not exist/,
    ],
    [
      'weights absent',
      { model_id: 'fastino/gliner2-large-v1', text: 'hello', schema: { entities: ['person'] } },
      503,
      /fastino\/gliner2-large-v1.*not in the model store/,
    ],
    ['unknown task', { task: 'summarize', text: 'hello', schema: { entities: ['person'] } }, 422, /unknown task/],
    // a long schema runs in label groups (docs/reference/encoder.md "Large label sets"); one label that cannot fit even alone is refused
    [
      'a label too long for the model even alone',
      { text: 'hello', schema: { entities: { person: 'names', ['!'.repeat(100)]: '?'.repeat(500) } } },
      422,
      /entity type '!+' alone serializes to \d+ tokens; the model accepts 512/,
    ],
  ];
  it.each(cases)('%s', async (_name, body, status, detail) => {
    const res = await stack.call('POST', '/inference', { body: { model_id: MODEL, ...body } });
    expect(res.status).toBe(status);
    expect(res.body.detail).toMatch(detail);
  });

  it('a schema longer than the encoder (200 labels, 40 long descriptions) is run in label groups: 200', async () => {
    const many = await infer({
      text: 'Tim Cook met Satya Nadella in Paris.',
      schema: { entities: ['person', ...Array.from({ length: 198 }, (_, i) => `archive record type ${i}`), 'city'] },
    });
    expect(many.status).toBe(200);
    const labels = many.body.result.entities.map((e: any) => `${e.label}:${e.text}`);
    expect(labels).toEqual(expect.arrayContaining(['person:Tim Cook', 'city:Paris']));
    const described = await infer({
      text: 'hello',
      schema: {
        entities: Object.fromEntries(
          Array.from({ length: 40 }, (_, i) => [`type ${i}`, 'a very long description '.repeat(20).slice(0, 480)]),
        ),
      },
    });
    expect(described.status).toBe(200);
    expect(described.body.usage.input_tokens).toBeGreaterThan(512);
  });

  it('a training job id without an active deployment is 409', async () => {
    const rows = [{ text: 'Tim Cook leads Apple.', entities: [{ text: 'Tim Cook', label: 'person' }] }];
    expect((await stack.uploadDataset('enc-people', jsonl(rows))).status).toBe('ready');
    const job = await stack.call('POST', '/core/training-jobs', {
      body: { model_name: 'enc-job', base_model: MODEL, datasets: [{ name: 'enc-people' }], nr_epochs: 1 },
    });
    expect(job.status).toBe(201);
    for (const path of ['/inference', '/gliner-2/entities']) {
      const body = path === '/inference' ? { schema: { entities: ['person'] } } : { entities: ['person'] };
      const res = await stack.call('POST', path, {
        body: { model_id: job.body.id, text: 'Tim Cook leads Apple.', ...body },
      });
      expect(res.status).toBe(409);
      expect(res.body.detail).toMatch(/has no active inference deployment/);
    }
  });

  it('per-head bodies are validated: 422', async () => {
    const r = await stack.call('POST', '/gliner-2/entities', { body: { model_id: MODEL, text: 'x' } });
    expect(r.status).toBe(422);
    const r2 = await stack.call('POST', '/gliner-2/classify', {
      body: { model_id: MODEL, text: 'x', classifications: [{ task: 't', labels: [] }] },
    });
    expect(r2.status).toBe(422);
  });
});

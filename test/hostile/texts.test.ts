/**
 * Hostile texts against the real HTTP server and the mini encoder (issue #25, security review F1):
 * long runs of punctuation, a 100,000-character word, deep combining sequences, lone surrogates
 * sent as JSON escapes, emoji before the entities. Each answers 200 with well-formed results (offsets
 * are code points into the text as sent) or a 4xx whose `detail` names the field, and the server
 * still answers `/health` afterwards.
 *
 * Full-size runs of punctuation (4 × 100,000 characters, which the old splitter regex took minutes
 * of the event loop to split) go through the server's whole splitting path with a schema the
 * engine refuses only after splitting (an entity type too long for the encoder even alone: 422), so
 * no encoder pass runs: on CPU each 200-word window is one, and 100,000 dots are ~600 windows —
 * bench:hostile-text sends those for a 200 and times them. The answers that run the encoder use
 * short runs. The splitter's linear time is asserted step by step in test/encoder/splitter.test.ts.
 */
import { TestStack } from '../helpers/localStack';

const MODEL = 'sift/gliner2-mini-v1';
const SCHEMA = { entities: ['person', 'organization', 'location'] };

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
}, 180_000);
afterAll(async () => stack?.stop());

interface Entity {
  text: string;
  label: string;
  score: number;
  start: number;
  end: number;
}

const infer = (text: string | string[], extra: Record<string, unknown> = {}) =>
  stack.call('POST', '/inference', { body: { model_id: MODEL, text, schema: SCHEMA, store: false, ...extra } });

/** Every entity's offsets are code points into `text`, and its text is that slice. */
function expectWellFormed(entities: Entity[], text: string): void {
  const cps = [...text];
  expect(Array.isArray(entities)).toBe(true);
  for (const e of entities) {
    expect(SCHEMA.entities).toContain(e.label);
    expect(e.score).toBeGreaterThanOrEqual(0);
    expect(e.score).toBeLessThanOrEqual(1);
    expect(0 <= e.start && e.start < e.end && e.end <= cps.length).toBe(true);
    expect(e.text).toBe(cps.slice(e.start, e.end).join(''));
  }
}

async function expectHealthy(): Promise<void> {
  const res = await stack.call('GET', '/health', { key: null });
  expect(res.status).toBe(200);
  expect(res.body).toEqual({ status: 'ok' });
}

/** An entity type whose prompt alone exceeds the encoder (100 + 500 one-token characters): the engine splits the texts, then refuses it. */
const TOO_LONG_TYPE = '!'.repeat(100);
const REFUSED_SCHEMA = { entities: { person: '', [TOO_LONG_TYPE]: '?'.repeat(500) } };
const N = 100_000;

describe('hostile texts on POST /inference', () => {
  it.each([
    ['100,000 dots', ['.'.repeat(N)]],
    [
      '4 × 100,000 characters of . / %+-. / a. / +-',
      ['.'.repeat(N), '%+-.'.repeat(N / 4), 'a.'.repeat(N / 2), '+-'.repeat(N / 2)],
    ],
  ])('%s, split whole, then a schema too long for the encoder: 422 naming the entity type', async (_name, texts) => {
    const res = await infer(texts, { schema: REFUSED_SCHEMA });
    expect(res.status).toBe(422);
    expect(res.body.detail).toMatch(/entity type '!{100}' alone serializes to \d+ tokens/);
    expect(res.body.errors[0].loc).toEqual(['body', 'schema']);
    await expectHealthy();
  });

  it.each([
    ['.', '.'.repeat(300)],
    ['%', '%'.repeat(300)],
    ['+-', '+-'.repeat(150)],
    ['a.', `Tim Cook ${'a.'.repeat(150)}`],
    ['. before an @', `${'.'.repeat(300)}@example.com Satya Nadella`],
  ])('a run of %s through the encoder: 200, well-formed', async (_name, text) => {
    const res = await infer(text);
    expect(res.status).toBe(200);
    expectWellFormed(res.body.result.entities, text);
    await expectHealthy();
  });

  it('one 100,000-character word: 200', async () => {
    const text = `Tim ${'a'.repeat(N - 9)} Cook`;
    const res = await infer(text);
    expect(res.status).toBe(200);
    expectWellFormed(res.body.result.entities, text);
    await expectHealthy();
  });

  it('a letter with 5,000 combining accents, and one with 2,500 pairs of them, among words: 200', async () => {
    const text = `Tim Cook e${'\u0301'.repeat(5_000)} met Satya Nadella x${'\u0308\u0301'.repeat(2_500)} in Paris`;
    const res = await infer(text);
    expect(res.status).toBe(200);
    expectWellFormed(res.body.result.entities, text);
    await expectHealthy();
  });

  it('lone surrogates sent as JSON escapes: 200, each one code point, stored and read back whole', async () => {
    const raw = `{"model_id":"${MODEL}","schema":{"entities":["person","organization","location"]},"threshold":0.01,"text":"\\ud800 Tim Cook \\udc00\\udbff met Satya Nadella \\ud83d\\ude00 in Paris \\udfff"}`;
    const text = JSON.parse(raw).text as string;
    expect(text.length).toBe([...text].length + 1); // one real pair (😀), four lone halves
    const res = await stack.call('POST', '/inference', {
      rawBody: raw,
      headers: { 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
    expect(res.body.result.entities.length).toBeGreaterThan(0);
    expectWellFormed(res.body.result.entities, text);
    const stored = await stack.call('GET', `/inferences/${res.body.inference_id}`);
    expect(stored.status).toBe(200);
    expect(stored.body.input.text).toBe(text);
    await expectHealthy();
  });

  it('emoji, flags, ZWJ sequences and astral letters before the entities: offsets in code points', async () => {
    const text = '😀👩‍👩‍👧🇨🇭 Tim Cook 𝐀𝐁 met Satya Nadella in Zürich 🇨🇭 on Monday';
    const res = await infer(text, { threshold: 0.01 });
    expect(res.status).toBe(200);
    expect(res.body.result.entities.length).toBeGreaterThan(0);
    expectWellFormed(res.body.result.entities, text);
    await expectHealthy();
  });

  it('a text over 100,000 characters: 413 naming text[i]', async () => {
    const res = await infer(['Tim Cook', '.'.repeat(N + 1)]);
    expect(res.status).toBe(413);
    expect(res.body.detail).toMatch(/text\[1\] has 100001 characters/);
    await expectHealthy();
  });

  it('more than 400,000 characters in one request: 413 naming the texts', async () => {
    const res = await infer(Array.from({ length: 5 }, () => '.'.repeat(90_000)));
    expect(res.status).toBe(413);
    expect(res.body.detail).toMatch(/the texts have 450000 characters/);
    await expectHealthy();
  });
});

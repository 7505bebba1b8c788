/**
 * Batching across requests over HTTP on the built mini model: concurrent `POST /inference`,
 * `/gliner-2/entities` and compat (`/v1/chat/completions` with `schema`) requests for the same model and
 * schema share one engine call; each answer, and each request's billed usage, is what the same request
 * gets sent alone; a bad request in the batch gets its own 422 while its batch-mates succeed.
 * The batcher is set to wait long for a batch exactly as big as the load, so the batch forms whatever
 * the machine's speed. Needs the set-up's mini model in the model store; fails if absent.
 */
import type { OnnxEncoderRuntime } from '../../src/adapters/onnx/encoderRuntime';
import { requireRuntime } from '../../src/core/models';
import { TestStack } from '../helpers/localStack';

const MODEL = 'sift/gliner2-mini-v1';
const ENV = { SIFT_ENCODER_BATCH_WAIT_MS: '1500', SIFT_ENCODER_BATCH_MAX_TEXTS: '6' };
let stack: TestStack;
const saved: Record<string, string | undefined> = {};

beforeAll(async () => {
  for (const [k, v] of Object.entries(ENV)) {
    saved[k] = process.env[k];
    process.env[k] = v;
  }
  stack = await TestStack.start({ withModels: true });
}, 180_000);
afterAll(async () => {
  await stack?.stop();
  for (const [k, v] of Object.entries(saved)) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
});

const TYPES = ['person', 'location', 'organization'];
/** Words of ~60 word pieces each: no window of the text fits the encoder, so the engine rejects it. */
const HARD_WORD = Array.from({ length: 99 }, (_, i) => 'qxzjvkwy'[(i * 5) % 8]).join('');

/** Six texts in all: exactly one batch's worth (SIFT_ENCODER_BATCH_MAX_TEXTS). */
const CALLS: Array<{ path: string; body: Record<string, unknown> }> = [
  {
    path: '/inference',
    body: { model_id: MODEL, text: 'Tim Cook met Satya Nadella in Zürich.', schema: { entities: TYPES }, store: false },
  },
  {
    path: '/inference',
    body: {
      model_id: MODEL,
      text: ['Hi 😀 Sundar Pichai spoke at Google I/O.', 'Marie Curie moved to Paris.'],
      schema: { entities: TYPES },
    },
  },
  {
    path: '/gliner-2/entities',
    body: { model_id: MODEL, text: 'Ada Lovelace worked with Charles Babbage in London.', entities: TYPES },
  },
  {
    path: '/v1/chat/completions',
    body: {
      model: MODEL,
      schema: { entities: TYPES },
      messages: [{ role: 'user', content: 'Angela Merkel visited the European Commission in Brussels.' }],
    },
  },
  {
    path: '/inference',
    body: { model_id: MODEL, text: Array(40).fill(HARD_WORD).join(' '), schema: { entities: TYPES } },
  },
];

/** What must not differ between a batched and an unbatched answer: everything but ids and timing. */
function answer(res: { status: number; body: any }) {
  const b = res.body;
  if (res.status !== 200) return { status: res.status, body: b };
  if (b.choices) return { status: 200, content: JSON.parse(b.choices[0].message.content), usage: b.usage };
  return { status: 200, result: b.result, usage: b.usage, model_id: b.model_id };
}
const idOf = (res: { body: any }) =>
  (res.body.choices ? /inf_[0-9A-Z]+/.exec(res.body.id)?.[0] : res.body.inference_id) as string | undefined;

describe('batching across requests over HTTP', () => {
  it('concurrent requests from three routes share a batch and answer exactly as they do one by one; each is billed its own tokens', async () => {
    const team = await stack.newTeam('batching');
    const send = (c: (typeof CALLS)[number]) => stack.call('POST', c.path, { key: team.key, body: c.body });
    const batcher = (requireRuntime(stack.svc, 'encoder') as OnnxEncoderRuntime).batcher;
    const before = batcher.stats();

    const together = await Promise.all(CALLS.map(send));
    const stats = batcher.stats();
    expect(stats.requestsPerBatch[CALLS.length]).toBe((before.requestsPerBatch[CALLS.length] ?? 0) + 1);
    expect(stats.splitAfterFailure).toBe(before.splitAfterFailure + 1); // the bad text failed the shared call, then ran alone

    const oneByOne = [];
    for (const c of CALLS) oneByOne.push(await send(c));
    expect(together.map(answer)).toEqual(oneByOne.map(answer));

    expect(together.map((r) => r.status)).toEqual([200, 200, 200, 200, 422]);
    expect(together[4]!.body.detail).toMatch(/body\.schema: text cannot be split into windows/);
    expect(together[0]!.body.result.entities.some((e: any) => e.text === 'Tim Cook' && e.label === 'person')).toBe(
      true,
    );
    expect(together[1]!.body.result).toHaveLength(2);

    // usage: one row per successful request, with that request's own input tokens
    const rows: any[] = (await stack.call('GET', '/billing/usage/requests/list?limit=100', { key: team.key })).body
      .data;
    expect(rows).toHaveLength(8);
    for (const res of together.slice(0, 4)) {
      const row = rows.find((r) => r.inference_id === idOf(res));
      expect(row).toBeDefined();
      expect(row.input_tokens).toBe(res.body.usage.input_tokens ?? res.body.usage.prompt_tokens);
    }
    const tokens = (rs: typeof together) =>
      rs.slice(0, 4).map((r) => r.body.usage.input_tokens ?? r.body.usage.prompt_tokens);
    expect(tokens(together)).toEqual(tokens(oneByOne));
    expect(new Set(tokens(together)).size).toBeGreaterThan(1); // not the batch's total split evenly
  }, 120_000);
});

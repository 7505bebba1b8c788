/**
 * Batching across requests (src/encoder/batcher.ts) on the built mini model: concurrent requests
 * with the same schema share one engine call, each gets exactly what the engine gives it alone (its
 * own results and input tokens), a bad request fails alone, aborted requests leave, and a lone request
 * starts after the bounded wait. Batches start when full or when the wait ends, so the assertions on
 * batch sizes use a long wait and an exact batch size: they never depend on timing.
 * Needs the set-up's mini model (~/.cache/sift/models or SIFT_MODELS_DIR); fails if absent.
 */
import { EncoderBatcher } from '../../src/encoder/batcher';
import { EncoderInputError, type InferOutput } from '../../src/encoder/engine';
import type { EncoderSchema } from '../../src/encoder/schema';
import { useMiniModel } from '../helpers/miniModel';

const miniModel = useMiniModel();

const schema = (s: Partial<EncoderSchema>): EncoderSchema => ({
  entities: [],
  classifications: [],
  structures: [],
  relations: [],
  ...s,
});
const PEOPLE = schema({ entities: [{ name: 'person' }, { name: 'location' }, { name: 'organization' }] });
const MIXED = schema({
  entities: [{ name: 'person' }],
  classifications: [{ task: 'sentiment', labels: ['positive', 'negative'], multiLabel: false }],
});
/** Over 512 positions with the prompt: the engine splits it into windows. */
const LONG = Array.from(
  { length: 90 },
  (_, i) => `Report ${i}: Angela Merkel visited Paris with Emmanuel Macron.`,
).join(' ');
const REQUESTS: Array<{ texts: string[]; schema: EncoderSchema; threshold?: number }> = [
  { texts: ['Tim Cook met Satya Nadella in Zürich.'], schema: PEOPLE },
  {
    texts: ['Ada Lovelace worked with Charles Babbage in London on the Analytical Engine, a mechanical computer.'],
    schema: PEOPLE,
  },
  {
    texts: ['Hi 😀 Sundar Pichai spoke at Google I/O.', 'Nothing to see here.', 'Marie Curie moved to Paris.'],
    schema: PEOPLE,
  },
  { texts: [LONG], schema: PEOPLE },
  { texts: ['The staff at the Ritz in Madrid were wonderful.'], schema: MIXED },
  { texts: ['Tim Cook met Satya Nadella in Zürich.'], schema: PEOPLE, threshold: 0.2 },
  { texts: ['Barack Obama flew to Nairobi.'], schema: MIXED },
];
/** Words of ~60 word pieces each: not even an 8-word window fits the encoder, so the engine rejects the text. */
const HARD_WORD = Array.from({ length: 99 }, (_, i) => 'qxzjvkwy'[(i * 5) % 8]).join('');
const UNSPLITTABLE = Array(40).fill(HARD_WORD).join(' ');
const totalTexts = (rs: Array<{ texts: string[] }>) => rs.reduce((n, r) => n + r.texts.length, 0);

/** What a request would get from the engine called on its own (today's unbatched path). */
const alone = (r: (typeof REQUESTS)[number]) => miniModel().infer(r.texts, r.schema, { threshold: r.threshold ?? 0.5 });

describe('EncoderBatcher', () => {
  it('coalesces concurrent requests with the same schema into one engine call, and each gets what it gets alone', async () => {
    const people = REQUESTS.filter((r) => r.schema === PEOPLE && r.threshold === undefined);
    // a long wait and a batch exactly the size of the load: the batch starts when the last one arrives
    const b = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: totalTexts(people) });
    try {
      const batched = await Promise.all(people.map((r) => b.infer(miniModel(), r.texts, r.schema)));
      expect(b.stats()).toMatchObject({
        batches: 1,
        requests: people.length,
        texts: totalTexts(people),
        requestsPerBatch: { [people.length]: 1 },
      });
      const expected: InferOutput[] = [];
      for (const r of people) expected.push(await alone(r));
      expect(batched).toEqual(expected);
      // billing: each request's own tokens, which add up to the batch's
      for (const [i, out] of batched.entries()) {
        expect(out.inputTokens).toBe(expected[i]!.inputTokens);
        expect(out.textTokens).toHaveLength(people[i]!.texts.length);
      }
      expect(batched[2]!.textTokens.reduce((a, c) => a + c, 0)).toBe(batched[2]!.inputTokens);
      expect(batched[3]!.chunks[0]).toBeGreaterThan(1); // the long text was windowed inside the shared call
    } finally {
      b.close();
    }
  }, 120_000);

  it('the encoder pass size inside a shared call does not change any answer (padding is masked)', async () => {
    const people = REQUESTS.filter((r) => r.schema === PEOPLE && r.threshold === undefined);
    const outs: InferOutput[][] = [];
    for (const passTexts of [1, 32]) {
      const b = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: totalTexts(people), passTexts });
      try {
        outs.push(await Promise.all(people.map((r) => b.infer(miniModel(), r.texts, r.schema))));
        expect(b.stats().requestsPerBatch).toEqual({ [people.length]: 1 });
      } finally {
        b.close();
      }
    }
    expect(outs[0]).toEqual(outs[1]);
  }, 120_000);

  it('keeps different schemas and thresholds in separate batches, with unbatched results for all', async () => {
    const b = new EncoderBatcher({ maxWaitMs: 0, maxBatchTexts: 64 });
    try {
      const batched = await Promise.all(
        REQUESTS.map((r) => b.infer(miniModel(), r.texts, r.schema, { threshold: r.threshold })),
      );
      const expected: InferOutput[] = [];
      for (const r of REQUESTS) expected.push(await alone(r));
      expect(batched).toEqual(expected);
      const s = b.stats();
      expect(s.requests).toBe(REQUESTS.length);
      // three keys (PEOPLE@0.5, MIXED@0.5, PEOPLE@0.2): at least one call each, and never one call for all
      expect(s.batches).toBeGreaterThanOrEqual(3);
      expect(s.maxRequestsInBatch).toBeLessThanOrEqual(4);
    } finally {
      b.close();
    }
  }, 120_000);

  it('a request the engine rejects fails alone; its batch-mates get their results', async () => {
    const good = REQUESTS.slice(0, 3);
    const b = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: totalTexts(good) + 1 });
    try {
      const bad = b.infer(miniModel(), [UNSPLITTABLE], PEOPLE);
      const settled = await Promise.allSettled([...good.map((r) => b.infer(miniModel(), r.texts, r.schema)), bad]);
      expect(settled.slice(0, 3).every((s) => s.status === 'fulfilled')).toBe(true);
      expect(settled[3]!.status).toBe('rejected');
      expect((settled[3] as PromiseRejectedResult).reason).toBeInstanceOf(EncoderInputError);
      await expect(miniModel().infer([UNSPLITTABLE], PEOPLE)).rejects.toThrow(
        (settled[3] as PromiseRejectedResult).reason.message,
      );
      const expected: InferOutput[] = [];
      for (const r of good) expected.push(await alone(r));
      expect(settled.slice(0, 3).map((s) => (s as PromiseFulfilledResult<InferOutput>).value)).toEqual(expected);
      const s = b.stats();
      expect(s.splitAfterFailure).toBe(1);
      expect(s.requestsPerBatch[4]).toBe(1); // they were batched together first
    } finally {
      b.close();
    }
  }, 120_000);

  it('an aborted request leaves the queue (or its running batch) and the rest still run', async () => {
    const b = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: 3 });
    try {
      const ac = new AbortController();
      const text = (i: number) => [`Angela Merkel met Joe Biden in Berlin, meeting ${i}.`];
      const first = b.infer(miniModel(), text(1), PEOPLE);
      const leaving = b.infer(miniModel(), text(2), PEOPLE, { signal: ac.signal });
      ac.abort();
      await expect(leaving).rejects.toMatchObject({ name: 'AbortError' });
      // the aborted one no longer counts towards the batch: two more fill it
      const outs = await Promise.all([
        first,
        b.infer(miniModel(), text(3), PEOPLE),
        b.infer(miniModel(), text(4), PEOPLE),
      ]);
      expect(outs).toEqual([
        await alone({ texts: text(1), schema: PEOPLE }),
        await alone({ texts: text(3), schema: PEOPLE }),
        await alone({ texts: text(4), schema: PEOPLE }),
      ]);
      expect(b.stats()).toMatchObject({ batches: 1, requestsPerBatch: { 3: 1 }, aborted: 1 });

      // aborted while its batch runs: it rejects, its batch-mates resolve
      const ac2 = new AbortController();
      const running = [
        b.infer(miniModel(), text(5), PEOPLE, { signal: ac2.signal }),
        b.infer(miniModel(), text(6), PEOPLE),
        b.infer(miniModel(), text(7), PEOPLE),
      ];
      ac2.abort();
      const settled = await Promise.allSettled(running);
      expect(settled.map((s) => s.status)).toEqual(['rejected', 'fulfilled', 'fulfilled']);
      // a signal aborted before the call never queues
      await expect(b.infer(miniModel(), text(8), PEOPLE, { signal: AbortSignal.abort() })).rejects.toMatchObject({
        name: 'AbortError',
      });
    } finally {
      b.close();
    }
  }, 120_000);

  it('a lone request starts after the bounded wait; a full batch starts without it', async () => {
    const b = new EncoderBatcher({ maxWaitMs: 20, maxBatchTexts: 32 });
    try {
      // nobody else comes: without the bound this would wait forever (the test would time out)
      const out = await b.infer(miniModel(), ['Tim Cook met Satya Nadella in Zürich.'], PEOPLE);
      expect(out.results).toHaveLength(1);
      expect(b.stats().requestsPerBatch).toEqual({ 1: 1 });
    } finally {
      b.close();
    }
    const full = new EncoderBatcher({ maxWaitMs: 3_600_000, maxBatchTexts: 2 });
    try {
      // an hour's wait, but two texts fill the batch: it starts at once
      const outs = await Promise.all([
        full.infer(miniModel(), ['Tim Cook spoke.'], PEOPLE),
        full.infer(miniModel(), ['Satya Nadella listened.'], PEOPLE),
      ]);
      expect(outs).toHaveLength(2);
      expect(full.stats().requestsPerBatch).toEqual({ 2: 1 });
    } finally {
      full.close();
    }
  }, 120_000);

  it('bounds a batch by texts and characters; a request over the bound runs alone', async () => {
    const b = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: 2, maxBatchChars: 10_000 });
    try {
      const three = REQUESTS[2]!; // 3 texts > 2: alone, at once
      const outs = await Promise.all([
        b.infer(miniModel(), three.texts, three.schema),
        b.infer(miniModel(), ['Tim Cook spoke.'], PEOPLE),
        b.infer(miniModel(), ['Satya Nadella listened.'], PEOPLE),
      ]);
      expect(outs[0]).toEqual(await alone(three));
      expect(b.stats().requestsPerBatch).toEqual({ 1: 1, 2: 1 });
    } finally {
      b.close();
    }
    const c = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: 32, maxBatchChars: 40 });
    try {
      // 25 + 25 characters > 40: two batches of one (each fills the character bound on its own)
      await Promise.all([
        c.infer(miniModel(), ['Tim Cook spoke in Berlin.'], PEOPLE),
        c.infer(miniModel(), ['Ada Lovelace wrote notes.'], PEOPLE),
      ]);
      expect(c.stats().requestsPerBatch).toEqual({ 1: 2 });
    } finally {
      c.close();
    }
  }, 120_000);

  it('close() rejects requests still queued', async () => {
    const b = new EncoderBatcher({ maxWaitMs: 60_000, maxBatchTexts: 32 });
    const pending = b.infer(miniModel(), ['Tim Cook spoke.'], PEOPLE);
    b.close();
    await expect(pending).rejects.toThrow(/closed/);
  });
});

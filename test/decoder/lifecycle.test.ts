/**
 * The local llama.cpp backend (SmolLM2-135M GGUF, `npm run fetch:decoder`) behind the request
 * pipeline on the in-memory service graph: a client that leaves at any stage gives its slot back,
 * is billed once for what was computed and its inference is stored (#25 F7); and computed prompt
 * state is reused, and reported, only within a team (#25 F8). Over real sockets:
 * test/hostile/streams.test.ts; the same chain on a reduced backend: generationLifecycle.test.ts.
 */
import { jest } from '@jest/globals';
import { LlamaCppDecoder, modelDirs } from '../../src/adapters/decoder';
import type { CachePlan, GenerateRequest, GenerationEvent } from '../../src/core/decoder/types';
import { getInference } from '../../src/core/inferences';
import { silentLogger } from '../../src/http/logger';
import { billedRows, memoryPipeline, runRequest, type Pipeline, type Stage } from './pipeline';

jest.setTimeout(120_000);

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const SLOTS = 2;

let decoder: LlamaCppDecoder;
let p: Pipeline;

beforeAll(async () => {
  decoder = new LlamaCppDecoder({
    modelDirs: modelDirs(),
    slots: SLOTS,
    threads: 1,
    contextSize: 2048,
    logger: silentLogger,
  });
  if (!(await decoder.hasModel(MODEL)))
    throw new Error(`the ${MODEL} GGUF is not installed: run npm run fetch:decoder (or wait for the model build)`);
  p = await memoryPipeline({ backend: decoder, minCacheTokens: 16 });
});

afterAll(async () => decoder?.close());

/** A cacheable system prompt, different per call so every request really computes its prefix. */
let unique = 0;
const system = () =>
  `Request ${++unique}. You are a careful assistant who answers in one short sentence and never uses lists. `.repeat(4);

const BODIES: Record<string, (stream: boolean) => Record<string, unknown>> = {
  '/v1/chat/completions': (stream) => ({
    model: MODEL,
    stream,
    max_tokens: 24,
    temperature: 0,
    messages: [
      { role: 'system', content: [{ type: 'text', text: system(), cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: 'Tell me about the sea.' },
    ],
  }),
  '/v1/completions': (stream) => ({
    model: MODEL,
    stream,
    max_tokens: 24,
    temperature: 0,
    prompt: `${system()}\nOnce upon a time`,
  }),
  '/v1/messages': (stream) => ({
    model: MODEL,
    stream,
    max_tokens: 24,
    temperature: 0,
    system: [{ type: 'text', text: system(), cache_control: { type: 'ephemeral' } }],
    messages: [{ role: 'user', content: 'Tell me about the sea.' }],
  }),
  '/v1/responses': (stream) => ({
    model: MODEL,
    stream,
    max_output_tokens: 24,
    temperature: 0,
    instructions: system(),
    input: 'Tell me about the sea.',
  }),
  '/inference': () => ({
    model_id: MODEL,
    task: 'generate',
    max_tokens: 24,
    temperature: 0,
    messages: [
      { role: 'system', content: [{ type: 'text', text: system(), cache_control: { type: 'ephemeral' } }] },
      { role: 'user', content: 'Tell me about the sea.' },
    ],
  }),
};

/** Chunks that carry generated text (not a header event): SSE data with a non-empty delta or text. */
const isText = (chunk: string) =>
  /"(content|text|delta)":"[^"]/.test(chunk) && !/"role":"assistant","content":""/.test(chunk);

/**
 * One request; for `prefill` the client leaves at the moment the engine asks the cache ledger for
 * its plan: the slot is taken and the prompt is about to be computed.
 */
async function leaveAt(path: string, stage: Stage) {
  const cache = p.svc.decoder!.cache;
  const plan = cache.plan.bind(cache);
  let left = false;
  return runRequest(p, path, BODIES[path]!(path !== '/inference'), {
    stage,
    isText,
    onPrefill: (abort) =>
      new Promise<void>((reached) => {
        cache.plan = (...args) => {
          cache.plan = plan;
          abort();
          left = true;
          reached();
          return plan(...args);
        };
      }),
  }).then((r) => ({ ...r, left: stage !== 'prefill' || left }));
}

async function expectEnded(inferenceId: string | undefined) {
  expect(inferenceId).toMatch(/^inf_/);
  // Reported by the adapter: nothing generating, nothing queued.
  expect(decoder.slotUse()).toEqual({ busy: 0, waiting: 0 });
  const rows = await billedRows(p, inferenceId!);
  expect(rows).toHaveLength(1);
  // The prompt was computed (or read from cache): it is billed, as input or cache tokens.
  expect(rows[0]!.cost_usd).toBeGreaterThan(0);
  return { row: rows[0]!, stored: await getInference(p.svc, p.teamId, inferenceId!) };
}

describe('llama.cpp behind the pipeline: a client that leaves', () => {
  it.each(['/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/responses', '/inference'])(
    '%s, during prefill: slot released, prompt billed once, stored as cancelled, nothing generated',
    async (path) => {
      const { inferenceId, left } = await leaveAt(path, 'prefill');
      expect(left).toBe(true);
      const { row, stored } = await expectEnded(inferenceId);
      expect(row.output_tokens).toBe(0);
      expect(stored.output).toMatchObject({ finish_reason: 'cancelled', completion: '' });
    },
  );

  it.each<[string, Stage]>([
    ['/v1/chat/completions', 'headers'],
    ['/v1/chat/completions', 'first-chunk'],
    ['/v1/messages', 'first-chunk'],
    ['/v1/responses', 'first-chunk'],
    ['/v1/completions', 'mid-stream'],
    ['/v1/messages', 'mid-stream'],
  ])('%s, at %s: slot released, billed once for the tokens produced, stored as cancelled', async (path, stage) => {
    const { inferenceId, written } = await leaveAt(path, stage);
    const { row, stored } = await expectEnded(inferenceId);
    expect(stored.output).toMatchObject({ finish_reason: 'cancelled' });
    expect(row.output_tokens).toBeGreaterThanOrEqual(written.filter(isText).length);
    expect(row.output_tokens).toBeLessThan(24);
  });

  it('after all of that, more requests than slots at once all complete', async () => {
    const results = await Promise.all(
      Array.from({ length: SLOTS + 2 }, (_, i) =>
        p.app.handle({
          method: 'POST',
          path: '/v1/completions',
          query: {},
          headers: { 'x-api-key': p.key, 'content-type': 'application/json' },
          body: Buffer.from(JSON.stringify({ model: MODEL, max_tokens: 2, prompt: `Number ${i}:` })),
          sourceIp: '127.0.0.1',
        }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(SLOTS + 2).fill(200));
    expect(decoder.slotUse()).toEqual({ busy: 0, waiting: 0 });
  });
});

describe('llama.cpp: computed prompt state stays within a team (F8)', () => {
  const noCache = {
    plan: (): CachePlan => ({ readTokens: 0, writes: [], writeTokens: 0, write5mTokens: 0, write1hTokens: 0 }),
  };
  const shared = 'The launch code for project Falcon is 7 3 9 1 and the backup site is in Lisbon. '.repeat(6);
  const req = (scope: string, tail: string): GenerateRequest => ({
    model: MODEL,
    scope,
    prompt: {
      kind: 'chat',
      messages: [
        { role: 'system', parts: [{ text: shared }] },
        { role: 'user', parts: [{ text: tail }] },
      ],
    },
    params: { maxTokens: 1, temperature: 0, stop: [] },
    cache: noCache,
  });
  const reused = async (d: LlamaCppDecoder, r: GenerateRequest): Promise<number> => {
    let start: Extract<GenerationEvent, { type: 'start' }> | undefined;
    for await (const ev of d.generate(r)) if (ev.type === 'start') start = ev;
    return start!.usage.engineReusedTokens;
  };

  it('another team sharing a long prefix reuses (and is told) nothing; the first team keeps its reuse', async () => {
    // Two slots: A's prompt stays in one while B takes the other (least recently used).
    expect(await reused(decoder, req('team-a', 'Hello?'))).toBe(0);
    expect(await reused(decoder, req('team-b', 'Hi there?'))).toBe(0);
    expect(await reused(decoder, req('team-a', 'Anything else?'))).toBeGreaterThan(100);
    expect(await reused(decoder, req('team-b', 'More?'))).toBeGreaterThan(100);
    // A third team takes A's slot (now the least recently used): it starts empty, so C reuses
    // nothing of A's prompt, and A, back on B's slot, nothing of B's.
    expect(await reused(decoder, req('team-c', 'Hello?'))).toBe(0);
    expect(await reused(decoder, req('team-a', 'Back?'))).toBe(0);
    expect(decoder.slotUse()).toEqual({ busy: 0, waiting: 0 });
  });
});

/**
 * The generation chain — backend → core (startGeneration) → route (stream rendering) → node:http
 * adapter (writeApiResponse) — on a reduced backend that holds a slot the way the llama.cpp one
 * does: taken before prefill, released in the generator's `finally`, so only a consumer that reads
 * on (or returns a started generator) frees it. Every stage a client can leave at, and every route:
 * the slot comes back, the request is billed exactly once for what was computed, and the inference
 * is stored. On the chain before #25 a client that left before the first text chunk left
 * `{slotStillBusy: true, billed: false}` (security review F7).
 *
 * The real engine, the real server and real sockets: test/decoder/lifecycle.test.ts and
 * test/hostile/streams.test.ts.
 */
import { startGeneration } from '../../src/core/decoder/service';
import type { DecoderBackend, GenerateRequest, GenerationEvent, GenerationUsage } from '../../src/core/decoder/types';
import { getInference } from '../../src/core/inferences';
import { resolveModel } from '../../src/core/models';
import { allBilledRows, billedRows, memoryPipeline, runRequest, type Pipeline, type Stage } from './pipeline';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const PROMPT_TOKENS = 40;

interface Deferred {
  promise: Promise<void>;
  resolve: () => void;
}
const deferred = (): Deferred => {
  let resolve!: () => void;
  const promise = new Promise<void>((ok) => (resolve = ok));
  return { promise, resolve };
};

/**
 * A backend with `slots` slots, shaped like llamaCpp/generation.ts before #25: the slot is held
 * across `yield start` and every `yield text`, and given back only in its `finally`. Prefill waits
 * for the test when `holdPrefill` is set; `failAt` throws after that many text pieces.
 */
class SlotBackend implements DecoderBackend {
  readonly name = 'reduced';
  readonly cachesAutomatically = false;
  busy = 0;
  holdPrefill: { reached: Deferred; release: Deferred } | undefined;
  failAt: number | undefined;
  /** Throws instead of reporting `done` when it finds the request cancelled (a failing wind-down). */
  failOnCancel = false;
  /** Requests that started with a `start` usage whose engineReusedTokens throws when first read. */
  poisonStart = false;
  async hasModel(): Promise<boolean> {
    return true;
  }
  async contextSize(): Promise<number> {
    return 8192;
  }
  async *generate(req: GenerateRequest, signal?: AbortSignal): AsyncGenerator<GenerationEvent> {
    if (signal?.aborted) throw new Error('cancelled before a slot');
    this.busy++;
    let completion = 0;
    let finishReason: 'stop' | 'length' | 'cancelled' = 'length';
    const usage = (): GenerationUsage => ({
      promptTokens: PROMPT_TOKENS,
      completionTokens: completion,
      cacheReadTokens: 0,
      cacheWriteTokens: 0,
      cacheWrite5mTokens: 0,
      cacheWrite1hTokens: 0,
      engineReusedTokens: 0,
    });
    try {
      const hold = this.holdPrefill;
      if (hold) {
        hold.reached.resolve();
        await hold.release.promise;
      }
      const start = usage();
      if (this.poisonStart) {
        let reads = 0;
        Object.defineProperty(start, 'engineReusedTokens', {
          get() {
            if (reads++ === 0) throw new Error('route failure after startGeneration');
            return 0;
          },
        });
      }
      yield { type: 'start', usage: start };
      for (let i = 0; i < req.params.maxTokens; i++) {
        if (signal?.aborted) {
          if (this.failOnCancel) throw new Error('engine failure while cancelling');
          finishReason = 'cancelled';
          break;
        }
        if (this.failAt === i) throw new Error('engine failure mid-generation');
        completion++;
        yield { type: 'text', text: `t${i} ` };
      }
    } finally {
      this.busy--;
    }
    yield { type: 'done', finishReason, stopSequence: null, usage: usage() };
  }
  async close(): Promise<void> {}
}

let p: Pipeline;
let backend: SlotBackend;

beforeEach(async () => {
  backend = new SlotBackend();
  p = await memoryPipeline({ backend });
});

const MAX_TOKENS = 6;
const ALL_TEXT = Array.from({ length: MAX_TOKENS }, (_, i) => `t${i} `).join('');
const LAST_TEXT = `t${MAX_TOKENS - 1} `;

/** The request body of each decoder route, streamed or not. */
const ROUTES: Record<string, (stream: boolean) => Record<string, unknown>> = {
  '/v1/chat/completions': (stream) => ({
    model: MODEL,
    stream,
    max_tokens: MAX_TOKENS,
    messages: [{ role: 'user', content: 'Hi' }],
  }),
  '/v1/completions': (stream) => ({ model: MODEL, stream, max_tokens: MAX_TOKENS, prompt: 'Once upon a time' }),
  '/v1/messages': (stream) => ({
    model: MODEL,
    stream,
    max_tokens: MAX_TOKENS,
    messages: [{ role: 'user', content: 'Hi' }],
  }),
  '/v1/responses': (stream) => ({ model: MODEL, stream, max_output_tokens: MAX_TOKENS, input: 'Hi' }),
};

/** One request; for `prefill` the client leaves while the backend holds its slot and computes the prompt. */
async function run(path: string, body: Record<string, unknown>, stage: Stage) {
  if (stage === 'prefill') backend.holdPrefill = { reached: deferred(), release: deferred() };
  return runRequest(p, path, body, {
    stage,
    isText: (w) => /t\d/.test(w),
    lastText: LAST_TEXT,
    onPrefill: async (abort) => {
      const hold = backend.holdPrefill!;
      await hold.reached.promise;
      abort();
      hold.release.resolve();
      backend.holdPrefill = undefined;
    },
  });
}

const allRows = () => allBilledRows(p);

/** The invariant after any request: no slot held, one billed row with the prompt, the inference stored. */
async function expectEnded(id: string | undefined, finishReason: string, completionTokens?: number) {
  expect(id).toMatch(/^inf_/);
  const ended = { slotStillBusy: backend.busy > 0, billed: (await billedRows(p, id!)).length };
  expect(ended).toEqual({ slotStillBusy: false, billed: 1 });
  const [row] = await billedRows(p, id!);
  expect(row!.input_tokens).toBe(PROMPT_TOKENS);
  if (completionTokens !== undefined) expect(row!.output_tokens).toBe(completionTokens);
  const stored = await getInference(p.svc, p.teamId, id!);
  expect(stored.output).toMatchObject({ finish_reason: finishReason });
  return { row: row!, stored };
}

describe.each(Object.keys(ROUTES))('%s, streamed: the generation ends wherever the client leaves', (path) => {
  it.each<Stage>(['prefill', 'headers'])(
    'client gone at %s: slot released, prompt billed once, stored as cancelled',
    async (stage) => {
      const { response, inferenceId } = await run(path, ROUTES[path]!(true), stage);
      expect(response.status).toBe(200);
      await expectEnded(inferenceId, 'cancelled', 0);
    },
  );

  it.each<Stage>(['first-chunk', 'mid-stream', 'last-chunk'])(
    'client gone at %s: slot released, billed once for what was produced',
    async (stage) => {
      const { written, inferenceId } = await run(path, ROUTES[path]!(true), stage);
      const delivered = written.filter((w) => /t\d/.test(w)).length;
      const { row, stored } = await expectEnded(
        inferenceId,
        stage === 'last-chunk' ? expect.stringMatching(/^(cancelled|length)$/) : 'cancelled',
      );
      // Every token produced is billed, one the client never saw included; the record keeps what was sent.
      expect(row.output_tokens).toBeGreaterThanOrEqual(delivered);
      expect(row.output_tokens).toBeLessThanOrEqual(MAX_TOKENS);
      const completion = (stored.output as { completion: string }).completion;
      expect(ALL_TEXT.startsWith(completion)).toBe(true);
      if (stage !== 'first-chunk') expect(completion).toMatch(/^t0 t1 /);
    },
  );

  it('a client that stays gets everything; billed once', async () => {
    const { written, inferenceId } = await run(path, ROUTES[path]!(true), 'none');
    expect(written.join('')).toContain(LAST_TEXT);
    await expectEnded(inferenceId, 'length', MAX_TOKENS);
  });

  it('a route failure after startGeneration (building the response) still ends the generation: 500, slot released, billed once', async () => {
    backend.poisonStart = true;
    const { response } = await run(path, ROUTES[path]!(true), 'none');
    expect(response.status).toBe(500);
    expect(backend.busy).toBe(0);
    const rows = await allRows();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ input_tokens: PROMPT_TOKENS, output_tokens: 0 });
    expect((await getInference(p.svc, p.teamId, rows[0]!.inference_id)).output).toMatchObject({
      finish_reason: 'cancelled',
    });
  });

  it('an engine failure mid-stream: reported in-stream, slot released, prompt and produced pieces billed, stored as error', async () => {
    backend.failAt = 2;
    const { written, inferenceId } = await run(path, ROUTES[path]!(true), 'none');
    expect(written.join('')).toMatch(/error/);
    await expectEnded(inferenceId, 'error', 2);
  });

  it('an engine failure while winding down a cancelled stream: billed and stored first, then the failure surfaces', async () => {
    backend.failOnCancel = true;
    await expect(run(path, ROUTES[path]!(true), 'headers')).rejects.toThrow('engine failure while cancelling');
    expect(backend.busy).toBe(0);
    const rows = await allRows();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ input_tokens: PROMPT_TOKENS, output_tokens: 0 });
    expect((await getInference(p.svc, p.teamId, rows[0]!.inference_id)).output).toMatchObject({
      finish_reason: 'error',
    });
  });

  it('client gone during prefill of a non-streamed request: billed once, stored as cancelled', async () => {
    const { response, inferenceId } = await run(path, ROUTES[path]!(false), 'prefill');
    expect(response.status).toBe(200);
    await expectEnded(inferenceId, 'cancelled', 0);
  });
});

describe('POST /inference (decoder)', () => {
  const body = {
    model_id: MODEL,
    task: 'generate',
    max_tokens: MAX_TOKENS,
    messages: [{ role: 'user', content: 'Hi' }],
  };

  it('client gone during prefill: slot released, prompt billed once, stored as cancelled', async () => {
    const { inferenceId } = await run('/inference', body, 'prefill');
    await expectEnded(inferenceId, 'cancelled', 0);
  });

  it('an engine failure: 500, slot released, billed once, stored as error', async () => {
    backend.failAt = 3;
    const { response } = await run('/inference', body, 'none');
    expect(response.status).toBe(500);
    expect(backend.busy).toBe(0);
    const rows = await allRows();
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ input_tokens: PROMPT_TOKENS, output_tokens: 3 });
    expect((await getInference(p.svc, p.teamId, rows[0]!.inference_id)).output).toMatchObject({
      finish_reason: 'error',
    });
  });
});

describe('Generation.close', () => {
  it('is idempotent and works on a stream that never started: one billed row, however many closes', async () => {
    const model = await resolveModel(p.svc, { team_id: p.teamId }, MODEL);
    if (model.type !== 'decoder') throw new Error('decoder expected');
    const gen = await startGeneration({
      svc: p.svc,
      runtime: p.svc.decoder!,
      principal: { team_id: p.teamId } as never,
      model,
      prompt: { kind: 'text', text: 'x' },
      params: { maxTokens: MAX_TOKENS, stop: [] },
      endpoint: '/v1/completions',
      limitClass: 'compat',
      store: true,
      recordInput: {},
    });
    expect(backend.busy).toBe(1);
    const results = await Promise.all([gen.close(), gen.stream.return(), gen.close()]);
    expect(backend.busy).toBe(0);
    expect(results[1]).toEqual({ done: true, value: results[0] });
    expect(results[0]).toMatchObject({
      finishReason: 'cancelled',
      usage: { promptTokens: PROMPT_TOKENS, completionTokens: 0 },
    });
    expect(await gen.stream.next()).toEqual({ done: true, value: results[0] });
    expect(await billedRows(p, gen.inferenceId)).toHaveLength(1);
  });
});

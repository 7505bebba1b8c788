/**
 * Cancelled generations against the real HTTP server and the real local decoder (issue #25 items
 * 5 and 7, security review F7). For each of /v1/chat/completions, /v1/messages, /v1/responses,
 * /v1/completions and /inference, a client sends a request and destroys its socket (node:http
 * `req.destroy()`) at each stage: before any byte arrives, while the engine computes a long
 * cache-marked prefix; once the response headers arrived; after the first chunk (for /inference,
 * which answers whole, while it generates). Before #25 a stream abandoned before its first chunk
 * kept its llama.cpp slot and was never billed: four of them wedged the decoder until a restart.
 *
 * After each: the server answers /health, and the decoder gives every slot back. After all:
 * more requests than there are slots, at once, all complete; each abandoned request appears once
 * in the billed usage list and its inference is stored as cancelled. Waits are for conditions
 * (a slot taken, slots free, rows written), never timed; durations are not asserted.
 */
import { jest } from '@jest/globals';
import { request as httpRequest, type ClientRequest, type IncomingMessage } from 'node:http';
import { configureDecoder, LlamaCppDecoder, modelDirs } from '../../src/adapters/decoder';
import { silentLogger } from '../../src/http/logger';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';

jest.setTimeout(180_000);

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const SLOTS = 4;

let stack: TestStack;
let decoder: LlamaCppDecoder;

beforeAll(async () => {
  stack = await TestStack.start();
  decoder = new LlamaCppDecoder({
    modelDirs: modelDirs(),
    slots: SLOTS,
    threads: 1,
    contextSize: 2048,
    logger: silentLogger,
  });
  if (!(await decoder.hasModel(MODEL)))
    throw new Error(`the ${MODEL} GGUF is not installed: run npm run fetch:decoder (or wait for the model build)`);
  configureDecoder(stack.svc, { backend: decoder, minCacheTokens: 16 });
});

afterAll(async () => stack?.stop());

/** Polls a condition the server reaches on its own (a slot taken, slots freed, a row written). */
async function until(what: string, cond: () => boolean | Promise<boolean>): Promise<void> {
  while (!(await cond())) {
    if (!stack) throw new Error(`gave up waiting for ${what}`);
    await new Promise((ok) => setTimeout(ok, 20));
  }
}

/** A cache-marked prefix of ~150 tokens, different each time so the engine really computes it. */
let unique = 0;
const longPrefix = () =>
  `Reference document ${++unique}: the harbour opens at dawn, the ferries run every hour, and the fish market closes at noon. `.repeat(
    6,
  );

type Stage = 'during-prefill' | 'after-headers' | 'after-first-chunk' | 'during-generation';

/** Each route's body: a long marked prefix (its prefill is what the client walks out of) or a long answer. */
function body(path: string, stage: Stage): Record<string, unknown> {
  const long = stage === 'during-prefill';
  const system = long ? longPrefix() : 'You are a storyteller.';
  const marked = { type: 'text', text: system, ...(long ? { cache_control: { type: 'ephemeral' } } : {}) };
  const question = 'Tell me a long story about a lighthouse keeper.';
  const common = { max_tokens: 200, temperature: 0 };
  switch (path) {
    case '/v1/chat/completions':
      return {
        model: MODEL,
        stream: true,
        ...common,
        messages: [
          { role: 'system', content: [marked] },
          { role: 'user', content: question },
        ],
      };
    case '/v1/messages':
      return {
        model: MODEL,
        stream: true,
        ...common,
        system: [marked],
        messages: [{ role: 'user', content: question }],
      };
    case '/v1/responses':
      return {
        model: MODEL,
        stream: true,
        temperature: 0,
        max_output_tokens: 200,
        input: [
          { role: 'system', content: [{ ...marked, type: 'input_text' }] },
          { role: 'user', content: question },
        ],
      };
    case '/v1/completions':
      // Text completions take no markers: the long prompt is computed whole before the first token.
      return { model: MODEL, stream: true, ...common, prompt: `${system}\n${question}\n` };
    default:
      return {
        model_id: MODEL,
        task: 'generate',
        ...common,
        messages: [
          { role: 'system', content: [marked] },
          { role: 'user', content: question },
        ],
      };
  }
}

/**
 * Sends one request and destroys the socket at `stage`. Resolves with the inference id when the
 * response headers carried one (they arrive only for the later stages).
 */
function abandon(path: string, stage: Stage): Promise<string | undefined> {
  const url = new URL(stack.url);
  const payload = JSON.stringify(body(path, stage));
  return new Promise((resolve, reject) => {
    let inferenceId: string | undefined;
    const req: ClientRequest = httpRequest({
      host: url.hostname,
      port: url.port,
      path,
      method: 'POST',
      headers: {
        'x-api-key': OPERATOR_KEY,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(payload),
      },
    });
    const leave = () => {
      req.destroy();
      resolve(inferenceId);
    };
    // The socket is destroyed on purpose: its errors are the expected end of this request.
    req.on('error', () => resolve(inferenceId));
    req.on('response', (res: IncomingMessage) => {
      inferenceId = res.headers['x-inference-id'] as string | undefined;
      if (res.statusCode !== 200) reject(new Error(`${path} answered ${res.statusCode}`));
      else if (stage === 'after-headers') leave();
      else if (stage === 'after-first-chunk') res.once('data', leave);
      else res.resume();
      res.on('end', () => resolve(inferenceId));
    });
    req.end(payload);
    if (stage === 'during-prefill' || stage === 'during-generation') {
      // The request reached the engine (a slot is taken, so its prefill is under way): leave now.
      void until(`${path} to take a slot`, () => decoder.slotUse().busy > 0).then(leave);
    }
  });
}

async function expectHealthy(): Promise<void> {
  const health = await stack.call('GET', '/health', { key: null });
  expect(health.status).toBe(200);
}

const PLAN: [string, Stage[]][] = [
  ['/v1/chat/completions', ['during-prefill', 'after-headers', 'after-first-chunk']],
  ['/v1/messages', ['during-prefill', 'after-headers', 'after-first-chunk']],
  ['/v1/responses', ['during-prefill', 'after-headers', 'after-first-chunk']],
  ['/v1/completions', ['during-prefill', 'after-headers', 'after-first-chunk']],
  ['/inference', ['during-prefill', 'during-generation']],
];

const seenIds: string[] = [];

describe('a client that destroys its socket while a generation runs', () => {
  for (const [path, stages] of PLAN) {
    it.each(stages)(`${path}, %s: the slot comes back and the server answers`, async (stage) => {
      const id = await abandon(path, stage);
      if (id) seenIds.push(id);
      await until('every slot to be free again', () => decoder.slotUse().busy === 0);
      expect(decoder.slotUse()).toEqual({ busy: 0, waiting: 0 });
      await expectHealthy();
    });
  }

  it(`then ${SLOTS + 2} requests at once (more than the ${SLOTS} slots) all complete`, async () => {
    const answers = await Promise.all(
      Array.from({ length: SLOTS + 2 }, (_, i) =>
        stack.call('POST', '/v1/completions', { body: { model: MODEL, max_tokens: 2, prompt: `Count to ${i}:` } }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(SLOTS + 2).fill(200));
    await expectHealthy();
  });

  it('each abandoned request is billed exactly once and stored as cancelled', async () => {
    const expected = new Map(PLAN.map(([path, stages]) => [path, stages.length]));
    const abandonedRows = async () => {
      const rows = (await stack.call('GET', '/billing/usage/requests/list?limit=500')).body.data as {
        inference_id: string;
        endpoint: string;
        output_tokens: number;
      }[];
      // The concurrent completions above answered in full (2 tokens, max_tokens); the abandoned ones were cut short.
      return rows.filter(
        (r) => !(r.endpoint === '/v1/completions' && r.output_tokens === 2 && !seenIds.includes(r.inference_id)),
      );
    };
    // Billing is written in the background once the generation ended: wait for every row.
    const total = [...expected.values()].reduce((a, b) => a + b, 0);
    await until('every abandoned request to be billed', async () => (await abandonedRows()).length >= total);
    const rows = await abandonedRows();
    expect(rows).toHaveLength(total);
    for (const [path, count] of expected) expect(rows.filter((r) => r.endpoint === path)).toHaveLength(count);
    // Once each: no inference id twice, and every id a client saw is among them.
    expect(new Set(rows.map((r) => r.inference_id)).size).toBe(total);
    for (const id of seenIds) expect(rows.filter((r) => r.inference_id === id)).toHaveLength(1);
    for (const r of rows) {
      const stored = await stack.call('GET', `/inferences/${r.inference_id}`);
      expect(stored.status).toBe(200);
      expect(stored.body.output.finish_reason).toBe('cancelled');
    }
  });
});

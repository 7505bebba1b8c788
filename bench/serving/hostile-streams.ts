/**
 * The streams area of bench/serving/hostile.ts (#25 items 5 and 7, security review F7): decoder requests
 * whose client goes away, then an ordinary request. Before #25, streams abandoned before their
 * first chunk each kept a llama.cpp slot: as many as the decoder has slots (4 by default) wedged it,
 * and the next request never got an answer. The case's status is the follow-up's (or `wedged`
 * when it had none within FOLLOW_UP_LIMIT_MS); its time covers the abandoned requests and the
 * follow-up. test/hostile/streams.test.ts asserts the mechanism; this file only measures.
 *
 *   npm run bench:hostile -- --only abandoned
 */
import { request as httpRequest } from 'node:http';
import type { Area, HostileCase, Target } from './hostile';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
/** The local decoder's default slot count (SIFT_DECODER_SLOTS). */
const SLOTS = 4;
/** Long enough for four abandoned prefills to finish on a busy 2-core machine; a leaked slot never returns. */
const FOLLOW_UP_LIMIT_MS = 300_000;

let unique = 0;
/**
 * ~450 tokens behind a cache marker: a prefill during which nothing is sent. It runs to its end
 * (and is billed) even when the client has gone, so the slot comes back when it is done.
 */
const longPrefix = () => `Reference ${++unique} (${Date.now()}): the harbour opens at dawn and the ferries run every hour. `.repeat(24);

function chatBody(system: string, marked: boolean): string {
  return JSON.stringify({
    model: MODEL,
    stream: true,
    max_tokens: 200,
    messages: [{ role: 'system', content: [{ type: 'text', text: system, ...(marked ? { cache_control: { type: 'ephemeral' } } : {}) }] }, { role: 'user', content: 'Tell me a story.' }],
  });
}

/** Sends a streamed chat request and destroys the socket `when` it says; resolves once it has. */
function abandon(t: Target, body: string, when: 'after-ms' | 'first-chunk', ms = 0): Promise<void> {
  return new Promise((done) => {
    const req = httpRequest({
      host: '127.0.0.1',
      port: t.port,
      path: '/v1/chat/completions',
      method: 'POST',
      headers: { 'x-api-key': t.key, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    });
    const leave = () => {
      clearTimeout(timer);
      req.destroy();
      done();
    };
    // A wedged decoder never sends a first chunk: give up on it as on the follow-up.
    const timer = setTimeout(leave, when === 'after-ms' ? ms : FOLLOW_UP_LIMIT_MS);
    // The socket is destroyed on purpose: its error is the expected end.
    req.on('error', leave);
    req.on('response', (res) => (when === 'first-chunk' ? res.once('data', leave) : res.resume()));
    req.end(body);
  });
}

/** An ordinary non-streamed request; its status, or `wedged` when no answer came in time. */
async function followUp(t: Target): Promise<number | string> {
  const res = await fetch(`${t.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'x-api-key': t.key, 'content-type': 'application/json' },
    body: JSON.stringify({ model: MODEL, max_tokens: 2, messages: [{ role: 'user', content: 'Hi' }] }),
    signal: AbortSignal.timeout(FOLLOW_UP_LIMIT_MS),
  }).catch(() => undefined);
  if (!res) return 'wedged';
  await res.arrayBuffer();
  return res.status;
}

/** The model loads on the first request: a client gone before that never reaches a slot, so load it first. */
export const streamCases: Area = async (t): Promise<HostileCase[]> => {
  const warm = await followUp(t);
  if (warm !== 200) throw new Error(`the decoder did not answer a warm-up request (${warm}): is the ${MODEL} GGUF installed (npm run fetch:decoder)?`);
  return cases;
};

const cases: HostileCase[] = [
  {
    area: 'streams',
    name: `${SLOTS} streams abandoned during a cache-marked prefill, then a request`,
    async send(t) {
      for (let i = 0; i < SLOTS; i++) await abandon(t, chatBody(longPrefix(), true), 'after-ms', 500);
      return followUp(t);
    },
  },
  {
    area: 'streams',
    name: `${SLOTS} streams abandoned after their first chunk, then a request`,
    async send(t) {
      for (let i = 0; i < SLOTS; i++) await abandon(t, chatBody('You are a storyteller.', false), 'first-chunk');
      return followUp(t);
    },
  },
];

/**
 * The vLLM upstream adapter at its HTTP boundary (an injected `fetch` answering as vLLM's
 * OpenAI-compatible server does): tenant isolation of vLLM's automatic prefix cache (`cache_salt`),
 * billing of a prefill whose caller left before the first byte, and an unreachable upstream being a
 * 503 rather than "model not installed". The same server over real HTTP: test/compat/upstream.test.ts.
 */
import { configureDecoder, OpenAiUpstreamDecoder } from '../../src/adapters/decoder';
import { cacheSalt } from '../../src/adapters/decoder/openAiUpstream';
import { createMemoryServices } from '../../src/adapters/memory/services';
import { startGeneration } from '../../src/core/decoder/service';
import type { GenerateRequest, GenerationEvent } from '../../src/core/decoder/types';
import { ServiceUnavailableError } from '../../src/core/errors';
import { silentLogger } from '../../src/http/logger';
import { getInference } from '../../src/core/inferences';
import { resolveModel } from '../../src/core/models';
import { createTeam } from '../../src/core/teams';
import { listUsageRequests } from '../../src/core/usage';

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const PROMPT_TOKENS = 321;

interface Sent {
  url: string;
  body: Record<string, unknown>;
}

/**
 * vLLM's wire protocol, reduced: /v1/models, /tokenize, and generation that either streams two
 * pieces and a usage chunk, or (`holdHeaders`) sends nothing until the caller aborts — the prefill
 * of a long prompt, during which no header is written.
 */
function fakeVllm(opts: { holdHeaders?: boolean; tokenize?: 'ok' | 'fail'; down?: boolean } = {}) {
  const sent: Sent[] = [];
  let generationStarted!: () => void;
  const started = new Promise<void>((ok) => (generationStarted = ok));
  const fetchImpl = (async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const url = String(input);
    if (opts.down) throw new TypeError('fetch failed: connect ECONNREFUSED');
    const body = init?.body ? (JSON.parse(String(init.body)) as Record<string, unknown>) : {};
    sent.push({ url, body });
    if (url.endsWith('/v1/models')) return Response.json({ data: [{ id: MODEL, max_model_len: 2048 }] });
    if (url.endsWith('/tokenize')) {
      return opts.tokenize === 'fail' ? new Response('no', { status: 404 }) : Response.json({ count: PROMPT_TOKENS });
    }
    generationStarted();
    if (opts.holdHeaders) {
      const signal = init?.signal;
      return new Promise<Response>((_, reject) => {
        signal?.addEventListener('abort', () => reject(new DOMException('This operation was aborted', 'AbortError')), {
          once: true,
        });
      });
    }
    const chunks = [
      { choices: [{ index: 0, delta: { content: 'Hel' } }] },
      { choices: [{ index: 0, delta: { content: 'lo' }, finish_reason: 'stop' }] },
      {
        choices: [],
        usage: { prompt_tokens: PROMPT_TOKENS, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 0 } },
      },
    ];
    const sse = `${chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join('')}data: [DONE]\n\n`;
    return new Response(sse, { headers: { 'content-type': 'text/event-stream' } });
  }) as typeof fetch;
  return {
    sent,
    started,
    backend: new OpenAiUpstreamDecoder({ baseUrl: 'http://vllm.test', fetch: fetchImpl, logger: silentLogger }),
  };
}

const request = (scope: string, text = 'Hello'): GenerateRequest => ({
  model: MODEL,
  scope,
  prompt: text.startsWith('raw:')
    ? { kind: 'text', text: text.slice(4) }
    : { kind: 'chat', messages: [{ role: 'user', parts: [{ text }] }] },
  params: { maxTokens: 8, stop: [] },
  cache: { plan: () => ({ readTokens: 0, writes: [], writeTokens: 0, write5mTokens: 0, write1hTokens: 0 }) },
});

async function drain(events: AsyncIterable<GenerationEvent>): Promise<GenerationEvent[]> {
  const out: GenerationEvent[] = [];
  for await (const ev of events) out.push(ev);
  return out;
}

describe('OpenAiUpstreamDecoder: tenant isolation of the upstream prefix cache', () => {
  it('sends each team its own cache_salt on chat and text completions, the same one every time, never the team id itself', async () => {
    const { sent, backend } = fakeVllm();
    await drain(backend.generate(request('team-a')));
    await drain(backend.generate(request('team-a', 'raw:Once')));
    await drain(backend.generate(request('team-b')));
    const generations = sent.filter((s) => s.url.endsWith('/completions'));
    expect(generations.map((s) => s.url.replace('http://vllm.test', ''))).toEqual([
      '/v1/chat/completions',
      '/v1/completions',
      '/v1/chat/completions',
    ]);
    const [a1, a2, b] = generations.map((s) => s.body.cache_salt);
    expect(a1).toBe(cacheSalt('team-a'));
    expect(a2).toBe(a1);
    expect(b).toBe(cacheSalt('team-b'));
    expect(b).not.toBe(a1);
    expect(String(a1)).not.toContain('team-a');
  });
});

describe('OpenAiUpstreamDecoder: a caller who leaves during the upstream prefill', () => {
  it('reports the prompt as computed: start, then done(cancelled) with the prompt tokens', async () => {
    const { started, backend } = fakeVllm({ holdHeaders: true });
    const abort = new AbortController();
    const events = drain(backend.generate(request('team-a'), abort.signal));
    await started;
    abort.abort();
    const got = await events;
    expect(got.map((e) => e.type)).toEqual(['start', 'done']);
    expect(got[1]).toMatchObject({
      finishReason: 'cancelled',
      usage: { promptTokens: PROMPT_TOKENS, completionTokens: 0 },
    });
  });

  it('is billed once through the core, and the inference stored as cancelled', async () => {
    const svc = createMemoryServices();
    const { started, backend } = fakeVllm({ holdHeaders: true });
    configureDecoder(svc, { backend });
    const team = await createTeam(svc, { name: 'acme' });
    const model = await resolveModel(svc, { team_id: team.id }, MODEL);
    if (model.type !== 'decoder') throw new Error('decoder expected');
    const abort = new AbortController();
    const starting = startGeneration({
      svc,
      runtime: svc.decoder!,
      principal: { team_id: team.id } as never,
      model,
      prompt: { kind: 'chat', messages: [{ role: 'user', parts: [{ text: 'Hello' }] }] },
      params: { maxTokens: 8, stop: [] },
      endpoint: '/v1/chat/completions',
      limitClass: 'compat',
      store: true,
      recordInput: {},
      signal: abort.signal,
    });
    await started;
    abort.abort();
    const gen = await starting;
    await gen.stream.return();
    const rows = (await listUsageRequests(svc, team.id, { limit: 10 })).data;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ inference_id: gen.inferenceId, input_tokens: PROMPT_TOKENS, output_tokens: 0 });
    expect((await getInference(svc, team.id, gen.inferenceId)).output).toMatchObject({ finish_reason: 'cancelled' });
  });

  it('a caller gone before the request was sent costs nothing: no request upstream, nothing billed', async () => {
    const { sent, backend } = fakeVllm();
    const abort = new AbortController();
    abort.abort();
    await expect(drain(backend.generate(request('team-a'), abort.signal))).rejects.toBeInstanceOf(
      ServiceUnavailableError,
    );
    expect(sent.filter((s) => s.url.endsWith('/completions'))).toEqual([]);
  });
});

describe('OpenAiUpstreamDecoder: failures are not "not found"', () => {
  it('an unreachable upstream is a 503 from hasModel and contextSize, not false (which would read as "model not installed")', async () => {
    const { backend } = fakeVllm({ down: true });
    await expect(backend.hasModel(MODEL)).rejects.toBeInstanceOf(ServiceUnavailableError);
    await expect(backend.contextSize(MODEL)).rejects.toBeInstanceOf(ServiceUnavailableError);
  });

  it('resolving a model while the upstream is down answers 503 with the reason', async () => {
    const svc = createMemoryServices();
    configureDecoder(svc, { backend: fakeVllm({ down: true }).backend });
    const team = await createTeam(svc, { name: 'acme' });
    await expect(resolveModel(svc, { team_id: team.id }, MODEL)).rejects.toMatchObject({
      status: 503,
      message: expect.stringMatching(/unreachable/),
    });
  });
});

/**
 * Structured outputs, tool constraints and logprobs through the vLLM upstream adapter, rehearsed over
 * real HTTP against the vLLM stand-in (test/helpers/fakeVllm.ts, which follows vLLM's documented
 * rules: only `response_format` constrains its output). What is checked is what Sift sends and how it
 * reads the answer back; the stand-in records every request.
 */
import { z } from 'zod';
import { configureDecoder, OpenAiUpstreamDecoder } from '../../src/adapters/decoder';
import { createMemoryServices } from '../../src/adapters/memory/services';
import { startGeneration } from '../../src/core/decoder/service';
import { checkJsonSchema } from '../../src/core/decoder/structured';
import { planToolUse, readToolOutput } from '../../src/core/decoder/tools';
import type { DecoderBackend, DecoderPrompt, OutputConstraint, SamplingParams } from '../../src/core/decoder/types';
import { getInference } from '../../src/core/inferences';
import { resolveModel } from '../../src/core/models';
import { createTeam } from '../../src/core/teams';
import { silentLogger } from '../../src/http/logger';
import { FAKE_MODEL, startFakeVllm, type FakeVllm } from '../helpers/fakeVllm';

let vllm: FakeVllm;
beforeAll(async () => {
  vllm = await startFakeVllm({ promptTokens: 12, completionTokens: 5 });
});
afterAll(() => vllm.close());

const SCHEMA = checkJsonSchema(
  {
    type: 'object',
    properties: { city: { type: 'string' }, population: { type: ['integer', 'null'] } },
    required: ['city', 'population'],
    additionalProperties: false,
  },
  'schema',
);
const valid = (text: string) => z.fromJSONSchema(SCHEMA as never).safeParse(JSON.parse(text)).success;

/** One generation through the core (spend check, billing, storage) on a fresh in-memory service graph. */
async function generate(
  opts: {
    backend?: DecoderBackend;
    prompt?: DecoderPrompt;
    constraint?: OutputConstraint;
    params?: Partial<SamplingParams>;
  } = {},
) {
  const svc = createMemoryServices();
  configureDecoder(svc, {
    backend: opts.backend ?? new OpenAiUpstreamDecoder({ baseUrl: vllm.url, logger: silentLogger }),
  });
  const team = await createTeam(svc, { name: 'acme' });
  const model = await resolveModel(svc, { team_id: team.id }, FAKE_MODEL);
  if (model.type !== 'decoder') throw new Error('decoder expected');
  const gen = await startGeneration({
    svc,
    runtime: svc.decoder!,
    principal: { team_id: team.id } as never,
    model,
    prompt: opts.prompt ?? { kind: 'chat', messages: [{ role: 'user', parts: [{ text: 'Paris?' }] }] },
    params: { maxTokens: 16, stop: [], temperature: 0, seed: 1, ...opts.params },
    constraint: opts.constraint,
    endpoint: '/v1/chat/completions',
    limitClass: 'compat',
    store: true,
    recordInput: {},
  });
  const pieces: { text: string; logprobs: number }[] = [];
  for (;;) {
    const seen = gen.logprobs.length;
    const next = await gen.stream.next();
    if (next.done) break;
    pieces.push({ text: next.value, logprobs: gen.logprobs.length - seen });
  }
  const result = await gen.close();
  return { svc, team, gen, result, pieces, sent: vllm.requests.at(-1)! };
}

describe('vLLM upstream: structured outputs', () => {
  it('sends a json_schema constraint as response_format, and the output is valid JSON for the schema', async () => {
    const { result, sent, svc, team, gen } = await generate({ constraint: { kind: 'json_schema', schema: SCHEMA } });
    expect(sent.path).toBe('/v1/chat/completions');
    expect(sent.body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema: SCHEMA } });
    expect(valid(result.text)).toBe(true);
    // History shows that the output was constrained (the kind; the schema is in the caller's request).
    const stored = await getInference(svc, team.id, gen.inferenceId);
    expect(stored.output).toMatchObject({ constraint: 'json_schema' });
  });

  it('without the constraint the same request carries no response_format, and the output is free text', async () => {
    const { result, sent } = await generate();
    expect(sent.body).not.toHaveProperty('response_format');
    expect(() => valid(result.text)).toThrow(SyntaxError);
  });

  it('sends json_object as response_format json_object, on text completions too', async () => {
    const { result, sent } = await generate({
      prompt: { kind: 'text', text: 'JSON:' },
      constraint: { kind: 'json_object' },
    });
    expect(sent.path).toBe('/v1/completions');
    expect(sent.body.response_format).toEqual({ type: 'json_object' });
    expect(JSON.parse(result.text)).toEqual({});
  });

  it('a required tool call is a json_schema constraint that vLLM holds, read back as a call', async () => {
    const tools = [
      {
        name: 'get_weather',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
    ];
    const plan = planToolUse(
      [{ role: 'user', parts: [{ text: 'Weather in Paris?' }] }],
      tools,
      { type: 'required' },
      'tools',
    );
    const { result, sent } = await generate({
      prompt: { kind: 'chat', messages: plan.messages },
      constraint: plan.constraint!,
    });
    expect(sent.body.messages[0].role).toBe('system');
    expect(sent.body.messages[0].content).toContain('get_weather');
    expect(sent.body).not.toHaveProperty('tools');
    expect(readToolOutput(result.text, tools, { type: 'required' }, () => 'call_1')).toEqual({
      text: null,
      calls: [{ id: 'call_1', name: 'get_weather', arguments: '{"city":"x"}' }],
    });
  });
});

describe('vLLM upstream: logprobs', () => {
  it('forwards logprobs/top_logprobs on chat and maps each chunk back to its piece', async () => {
    const { sent, pieces, gen } = await generate({ params: { logprobs: 2 } });
    expect(sent.body).toMatchObject({ logprobs: true, top_logprobs: 2 });
    expect(pieces.every((p) => p.logprobs === 1)).toBe(true);
    expect(gen.logprobs[0]).toEqual({
      token: 'w0 ',
      logprob: -0.5,
      top: [
        { token: 'w0 ', logprob: -0.5 },
        { token: 'alt1', logprob: -1.5 },
      ],
    });
  });

  it('forwards logprobs: n on text completions and reads the completions shape back', async () => {
    const { sent, gen } = await generate({ prompt: { kind: 'text', text: 'Once' }, params: { logprobs: 1 } });
    expect(sent.body.logprobs).toBe(1);
    expect(sent.body).not.toHaveProperty('top_logprobs');
    expect(gen.logprobs.map((l) => l.token)).toEqual(['w0 ', 'w1 ', 'w2 ', 'w3 ', 'w4 ']);
    expect(gen.logprobs[0]!.top).toEqual([{ token: 'w0 ', logprob: -0.5 }]);
  });

  it('asks for the chosen token only with logprobs 0, and for none when not asked', async () => {
    expect((await generate({ params: { logprobs: 0 } })).sent.body).toMatchObject({ logprobs: true });
    expect((await generate({ params: { logprobs: 0 } })).sent.body).not.toHaveProperty('top_logprobs');
    const plain = await generate();
    expect(plain.sent.body).not.toHaveProperty('logprobs');
    expect(plain.gen.logprobs).toEqual([]);
  });

  it('is refused with a 400 naming logprobs beyond 20 alternatives, before anything is sent', async () => {
    const before = vllm.requests.length;
    await expect(generate({ params: { logprobs: 21 } })).rejects.toMatchObject({ status: 400, param: 'logprobs' });
    expect(vllm.requests.length).toBe(before);
  });

  it('is refused with a 400 naming logprobs on a backend that cannot give them', async () => {
    const upstream = new OpenAiUpstreamDecoder({ baseUrl: vllm.url, logger: silentLogger });
    const without: DecoderBackend = Object.assign(Object.create(upstream) as OpenAiUpstreamDecoder, {
      supportsLogprobs: false,
    });
    const before = vllm.requests.length;
    await expect(generate({ backend: without, params: { logprobs: 1 } })).rejects.toMatchObject({
      status: 400,
      param: 'logprobs',
    });
    expect(vllm.requests.length).toBe(before);
  });
});

describe('a constraint holds the whole answer', () => {
  const constraint: OutputConstraint = { kind: 'json_schema', schema: SCHEMA };
  it('refuses stop sequences with a constraint (they would cut the JSON), before the upstream is asked', async () => {
    const before = vllm.requests.length;
    await expect(generate({ constraint, params: { stop: ['}'] } })).rejects.toMatchObject({
      status: 400,
      param: 'stop',
    });
    expect(vllm.requests.length).toBe(before);
  });
  it('refuses a prefilled final assistant turn with a constraint (the answer would start outside the grammar)', async () => {
    const prompt: DecoderPrompt = {
      kind: 'chat',
      continueFinal: true,
      messages: [
        { role: 'user', parts: [{ text: 'Paris?' }] },
        { role: 'assistant', parts: [{ text: '{"city": "' }] },
      ],
    };
    await expect(generate({ constraint, prompt })).rejects.toMatchObject({ status: 400, param: 'messages' });
    // The same prefill without a constraint is an ordinary continuation.
    const { result } = await generate({ prompt });
    expect(result.finishReason).not.toBe('error');
  });
});

/**
 * Constrained decoding and logprobs on the local llama.cpp backend, with the catalog decoder
 * (SmolLM2-135M-Instruct GGUF) and greedy decoding: a JSON Schema grammar makes the tiny model write
 * JSON valid against the schema — the same request without the grammar does not — a tool grammar
 * makes it write a call, and per-token logprobs are the sampler's real distribution.
 */
import { jest } from '@jest/globals';
import { z } from 'zod';
import { LlamaCppDecoder } from '../../src/adapters/decoder/llamaCpp';
import { checkJsonSchema, structuredOutputMessages } from '../../src/core/decoder/structured';
import { planToolUse, readToolOutput } from '../../src/core/decoder/tools';
import type {
  DecoderMessage,
  GenerationEvent,
  OutputConstraint,
  SamplingParams,
  TokenLogprob,
} from '../../src/core/decoder/types';
import { DEFAULT_MODELS_DIR } from '../../src/paths';

jest.setTimeout(300_000);

const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';
let decoder: LlamaCppDecoder;

beforeAll(() => {
  decoder = new LlamaCppDecoder({ modelDirs: [DEFAULT_MODELS_DIR], threads: 1, slots: 1, contextSize: 1024 });
});
afterAll(() => decoder.close());

async function run(messages: DecoderMessage[], constraint?: OutputConstraint, params: Partial<SamplingParams> = {}) {
  let text = '';
  const pieces: { text: string; logprobs?: TokenLogprob[] }[] = [];
  let done: Extract<GenerationEvent, { type: 'done' }> | undefined;
  for await (const ev of decoder.generate({
    model: MODEL,
    scope: 'team-constrained',
    prompt: { kind: 'chat', messages },
    params: { maxTokens: 48, temperature: 0, seed: 7, stop: [], ...params },
    cache: { plan: () => ({ readTokens: 0, writes: [], writeTokens: 0, write5mTokens: 0, write1hTokens: 0 }) },
    constraint,
  })) {
    if (ev.type === 'text') {
      text += ev.text;
      pieces.push(ev);
    }
    if (ev.type === 'done') done = ev;
  }
  return { text, pieces, done: done! };
}

const ask = (text: string): DecoderMessage[] => [{ role: 'user', parts: [{ text }] }];

describe('llama.cpp: JSON Schema constraint', () => {
  const schema = checkJsonSchema(
    {
      type: 'object',
      properties: {
        city: { type: 'string', maxLength: 20 },
        country: { type: 'string', maxLength: 20 },
        capital: { type: 'boolean' },
        size: { type: 'string', enum: ['small', 'large'] },
      },
      required: ['city', 'country', 'capital', 'size'],
      additionalProperties: false,
    },
    'response_format.json_schema.schema',
  );
  const constraint: OutputConstraint = { kind: 'json_schema', schema };
  const validator = z.fromJSONSchema(schema as never);
  // The prompt tells the model about the schema either way: only the grammar differs.
  const messages = structuredOutputMessages(ask('Describe Paris.'), constraint);

  it('writes JSON valid against the schema, ending where the value ends', async () => {
    const { text, done } = await run(messages, constraint);
    expect(validator.safeParse(JSON.parse(text)).error).toBeUndefined();
    expect(text).toBe(text.trim());
    expect(done.finishReason).toBe('stop');
  });

  it('the same request without the constraint is not that JSON', async () => {
    const { text } = await run(messages);
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    expect(parsed !== undefined && validator.safeParse(parsed).success).toBe(false);
  });
});

describe('llama.cpp: tool calls by grammar', () => {
  const tools = [
    {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: {
        type: 'object',
        properties: { city: { type: 'string', maxLength: 30 } },
        required: ['city'],
        additionalProperties: false,
      },
    },
  ];

  it('tool_choice required makes the model call the tool with arguments valid against its parameters', async () => {
    const plan = planToolUse(ask('What is the weather in Paris?'), tools, { type: 'required' }, 'tools');
    const { text } = await run(plan.messages, plan.constraint);
    const out = readToolOutput(text, tools, { type: 'required' }, () => 'call_1');
    expect(out.text).toBeNull();
    expect(out.calls).toHaveLength(1);
    expect(out.calls[0]!.name).toBe('get_weather');
    expect(z.fromJSONSchema(tools[0]!.parameters as never).safeParse(JSON.parse(out.calls[0]!.arguments)).success).toBe(
      true,
    );
  });
});

describe('llama.cpp: logprobs', () => {
  it('gives each token its natural-log probability and top alternatives, greedy choosing the most likely', async () => {
    const { pieces, done } = await run(ask('Name a colour.'), undefined, { maxTokens: 12, logprobs: 3 });
    const all = pieces.flatMap((p) => p.logprobs ?? []);
    // Every piece of text carries the tokens behind it, and every generated token is accounted for.
    expect(pieces.every((p) => (p.logprobs?.length ?? 0) > 0)).toBe(true);
    expect(all.length).toBe(done.usage.completionTokens);
    expect(all.map((t) => t.token).join('')).toBe(pieces.map((p) => p.text).join(''));
    for (const t of all) {
      expect(t.top).toHaveLength(3);
      const mass = t.top.reduce((sum, a) => sum + Math.exp(a.logprob), 0);
      expect(mass).toBeLessThanOrEqual(1 + 1e-6);
      expect(t.logprob).toBeLessThanOrEqual(0);
      expect(t.top.map((a) => a.token)).toContain(t.token);
      expect(t.top[0]).toEqual({ token: t.token, logprob: t.logprob });
    }
  });

  it('gives the chosen token only with logprobs 0, and nothing when not asked', async () => {
    const chosen = await run(ask('Name a colour.'), undefined, { maxTokens: 4, logprobs: 0 });
    expect(chosen.pieces.flatMap((p) => p.logprobs ?? []).every((t) => t.top.length === 0)).toBe(true);
    const none = await run(ask('Name a colour.'), undefined, { maxTokens: 4 });
    expect(none.pieces.some((p) => p.logprobs)).toBe(false);
  });
});

/**
 * The generation workflow's TextGenerator (src/core/syntheticData/decoderTextGenerator.ts) reports what each
 * completion read and wrote — the `done` event's usage — so a generation job is billed by its tokens
 * (core/billing/compute.ts), and names the model whose prices apply.
 */
import { createMemoryServices } from '../../src/adapters/memory/services';
import { decoderTextGenerator } from '../../src/core/syntheticData/decoderTextGenerator';
import type { DecoderBackend, GenerateRequest, GenerationEvent, GenerationUsage } from '../../src/core/decoder/types';

const usage = (promptTokens: number, completionTokens: number): GenerationUsage => ({
  promptTokens,
  completionTokens,
  cacheReadTokens: 0,
  cacheWriteTokens: 0,
  cacheWrite5mTokens: 0,
  cacheWrite1hTokens: 0,
  engineReusedTokens: 0,
});

/** Streams two pieces; the tokens are only in `start` (prompt) and `done` (both). */
const backend: DecoderBackend = {
  name: 'stand-in',
  cachesAutomatically: false,
  hasModel: async () => true,
  contextSize: async () => 8192,
  async *generate(req: GenerateRequest): AsyncGenerator<GenerationEvent> {
    expect(req.params.maxTokens).toBe(60);
    yield { type: 'start', usage: usage(41, 0) };
    yield { type: 'text', text: 'Where is ' };
    yield { type: 'text', text: 'my parcel?' };
    yield { type: 'done', finishReason: 'stop', stopSequence: null, usage: usage(41, 5) };
  },
  close: async () => {},
};

it('returns the text with the tokens the decoder read and wrote, and names its model', async () => {
  const svc = createMemoryServices();
  svc.decoder = { backend, cache: {} as never };
  const generator = decoderTextGenerator(svc, 'HuggingFaceTB/SmolLM2-135M-Instruct');
  expect(generator.model).toBe('HuggingFaceTB/SmolLM2-135M-Instruct');
  expect(await generator.complete('system', 'user', { seed: 1, maxTokens: 60, temperature: 0.9 })).toEqual({
    text: 'Where is my parcel?',
    inputTokens: 41,
    outputTokens: 5,
  });
});

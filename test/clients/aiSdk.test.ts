/**
 * Vercel's AI SDK (ai + @ai-sdk/openai-compatible, supportsStructuredOutputs) as users write it:
 * `generateObject({ schema })` and `streamText` with one tool and a forced `toolChoice`, each once
 * more with the constraint switched off, where the same code fails.
 */
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { generateObject, NoObjectGeneratedError, streamText, ToolChoiceViolationError, tool } from 'ai';
import { jest } from '@jest/globals';
import { TestStack } from '../helpers/localStack';
import { Landmark, MODEL, OPERATOR_KEY, QUESTION, SAMPLING, TOOL, unconstrainedHeaders } from './helpers';

// The first request loads the model and builds the grammar (seconds on a busy 2-core machine).
jest.setTimeout(120_000);

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack?.stop());

const sift = (off = false) =>
  createOpenAICompatible({
    name: 'sift',
    baseURL: `${stack.url}/v1`,
    apiKey: OPERATOR_KEY,
    headers: unconstrainedHeaders(off),
    supportsStructuredOutputs: true,
  });

const settings = {
  temperature: SAMPLING.temperature,
  seed: SAMPLING.seed,
  maxOutputTokens: SAMPLING.max_tokens,
  maxRetries: 0,
};

const object = (off = false) =>
  generateObject({ model: sift(off)(MODEL), schema: Landmark, schemaName: 'landmark', prompt: QUESTION, ...settings });

/** Streams one forced call of the tool: the inputs its `execute` received (validated by the SDK), and the stream's errors. */
async function streamedCall(off = false): Promise<{ received: unknown[]; errors: unknown[] }> {
  const received: unknown[] = [];
  const errors: unknown[] = [];
  const result = streamText({
    model: sift(off)(MODEL),
    prompt: QUESTION,
    tools: {
      [TOOL.name]: tool({
        description: TOOL.description,
        inputSchema: Landmark,
        execute: async (input) => {
          received.push(input);
          return 'recorded';
        },
      }),
    },
    toolChoice: { type: 'tool', toolName: TOOL.name },
    onError: ({ error }) => {
      errors.push(error);
    },
    ...settings,
  });
  await result.consumeStream();
  return { received, errors };
}

describe('AI SDK: generateObject', () => {
  it('returns an object that validates', async () => {
    const { object: got } = await object();
    expect(Landmark.safeParse(got).success).toBe(true);
  });

  it('without the constraint the same call throws NoObjectGeneratedError', async () => {
    const err = await object(true).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(NoObjectGeneratedError.isInstance(err)).toBe(true);
  });
});

describe('AI SDK: streamText with a tool', () => {
  it('the forced tool is called with an input that validates', async () => {
    const { received, errors } = await streamedCall();
    expect(errors).toEqual([]);
    expect(received).toHaveLength(1);
    expect(Landmark.safeParse(received[0]).success).toBe(true);
  });

  it('without the constraint the tool is never executed: the stream reports ToolChoiceViolationError', async () => {
    const { received, errors } = await streamedCall(true);
    expect(received).toEqual([]);
    expect(errors).toHaveLength(1);
    expect(ToolChoiceViolationError.isInstance(errors[0])).toBe(true);
  });
});

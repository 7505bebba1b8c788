/**
 * LangChain JS (@langchain/openai ChatOpenAI) as users write it: `withStructuredOutput(zodSchema)`
 * (default method: json_schema) and `.bindTools([...], { tool_choice })`, each once more with the
 * constraint switched off, where the same code fails; and `withStructuredOutput` on the mini encoder,
 * which answers a schema of nullable strings by extraction.
 */
import { tool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { z } from 'zod';
import { jest } from '@jest/globals';
import { TestStack } from '../helpers/localStack';
import { ENCODER, Landmark, MODEL, OPERATOR_KEY, QUESTION, SAMPLING, TOOL, unconstrainedHeaders } from './helpers';

// The first request loads the model and builds the grammar (seconds on a busy 2-core machine).
jest.setTimeout(120_000);

let stack: TestStack;
beforeAll(async () => {
  // the built models published: the mini encoder's weights are in the store
  stack = await TestStack.start({ withModels: true });
}, 180_000);
afterAll(async () => stack?.stop());

const chat = (model: string, off = false) =>
  new ChatOpenAI({
    model,
    apiKey: OPERATOR_KEY,
    temperature: SAMPLING.temperature,
    maxTokens: SAMPLING.max_tokens,
    maxRetries: 0,
    modelKwargs: { seed: SAMPLING.seed },
    configuration: { baseURL: `${stack.url}/v1`, defaultHeaders: unconstrainedHeaders(off) },
  });

const structured = (off = false) =>
  chat(MODEL, off).withStructuredOutput(Landmark, { name: 'landmark' }).invoke(QUESTION);

const recordLandmark = tool(async (args) => JSON.stringify(args), { ...TOOL, schema: Landmark });
const toolCall = (off = false) =>
  chat(MODEL, off).bindTools([recordLandmark], { tool_choice: TOOL.name }).invoke(QUESTION);

describe('LangChain ChatOpenAI: withStructuredOutput (json_schema)', () => {
  it('returns an object that validates', async () => {
    expect(Landmark.safeParse(await structured()).success).toBe(true);
  });

  it('without the constraint the same call throws: the content is not JSON', async () => {
    await expect(structured(true)).rejects.toThrow(SyntaxError);
  });
});

describe('LangChain ChatOpenAI: bindTools with a forced tool_choice', () => {
  it('the AI message carries one call of the tool whose args validate', async () => {
    const msg = await toolCall();
    expect(msg.tool_calls).toHaveLength(1);
    expect(msg.tool_calls?.[0]?.name).toBe(TOOL.name);
    expect(Landmark.safeParse(msg.tool_calls?.[0]?.args).success).toBe(true);
  });

  it('without the constraint there is no valid call', async () => {
    const msg = await toolCall(true);
    expect(msg.tool_calls ?? []).toEqual([]);
  });
});

describe('LangChain ChatOpenAI: withStructuredOutput on the encoder (extraction)', () => {
  it('a schema of nullable strings comes back as an object that validates', async () => {
    const Contact = z.object({ person: z.string().nullable(), city: z.string().nullable() });
    const got = await chat(ENCODER)
      .withStructuredOutput(Contact, { name: 'contact' })
      .invoke('Ada Lovelace lived in London.');
    expect(Contact.safeParse(got).success).toBe(true);
  });
});

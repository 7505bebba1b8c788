/**
 * The official OpenAI SDK (openai 7.x) as users write it: `chat.completions.parse` with
 * `zodResponseFormat`, and the tool runner `chat.completions.runTools` with a zod function tool.
 * Each once more with the constraint switched off, where the same code fails.
 */
import OpenAI from 'openai7';
import { zodFunction, zodResponseFormat } from 'openai7/helpers/zod';
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

const client = (off = false) =>
  new OpenAI({
    baseURL: `${stack.url}/v1`,
    apiKey: OPERATOR_KEY,
    maxRetries: 0,
    defaultHeaders: unconstrainedHeaders(off),
  });

const parse = (off = false) =>
  client(off).chat.completions.parse({
    model: MODEL,
    messages: [{ role: 'user', content: QUESTION }],
    response_format: zodResponseFormat(Landmark, 'landmark'),
    ...SAMPLING,
  });

/** What the tool runner passed to the tool's function: arguments the SDK validated against the zod schema. */
async function runTools(off = false): Promise<unknown[]> {
  const received: unknown[] = [];
  const runner = client(off).chat.completions.runTools(
    {
      model: MODEL,
      messages: [{ role: 'user', content: QUESTION }],
      tools: [zodFunction({ ...TOOL, parameters: Landmark, function: (args) => received.push(args) })],
      tool_choice: { type: 'function', function: { name: TOOL.name } },
      ...SAMPLING,
    },
    // one completion: a forced call ends the run once the function ran
    { maxChatCompletions: 1 },
  );
  await runner.done();
  return received;
}

describe('openai SDK: structured outputs', () => {
  it('chat.completions.parse(zodResponseFormat) returns a parsed object that validates', async () => {
    const res = await parse();
    const parsed = res.choices[0]?.message.parsed;
    expect(Landmark.safeParse(parsed).success).toBe(true);
  });

  it('without the constraint the same call fails in the SDK', async () => {
    await expect(parse(true)).rejects.toThrow(SyntaxError);
  });
});

describe('openai SDK: tool runner', () => {
  it('runTools with a forced zod function tool calls the function with valid arguments', async () => {
    const received = await runTools();
    expect(received).toHaveLength(1);
    expect(Landmark.safeParse(received[0]).success).toBe(true);
  });

  it('without the constraint the function is never called', async () => {
    expect(await runTools(true)).toEqual([]);
  });
});

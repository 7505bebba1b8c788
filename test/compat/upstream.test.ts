import OpenAI from 'openai7';
import { configureDecoder, OpenAiUpstreamDecoder } from '../../src/adapters/decoder';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';
import { MODEL, startCompatStack } from './helpers';

/**
 * The OpenAI-compatible upstream adapter (vLLM on AWS) against a real OpenAI-compatible server: a
 * second Sift instance serving the local model. No vLLM here, but the same wire protocol.
 */
let upstream: TestStack;
let gateway: TestStack;
beforeAll(async () => {
  upstream = await startCompatStack();
  gateway = await TestStack.start();
  configureDecoder(gateway.svc, {
    backend: new OpenAiUpstreamDecoder({ baseUrl: upstream.url, apiKey: OPERATOR_KEY }),
    minCacheTokens: 16,
  });
});
afterAll(async () => {
  await gateway.stop();
  await upstream.stop();
});

describe('OpenAiUpstreamDecoder', () => {
  const client = () => new OpenAI({ baseURL: `${gateway.url}/v1`, apiKey: OPERATOR_KEY, maxRetries: 0 });

  it('streams chat through the upstream and reports its usage', async () => {
    const stream = client().chat.completions.stream({
      model: MODEL,
      messages: [{ role: 'user', content: 'Say hi.' }],
      max_tokens: 4,
      stream_options: { include_usage: true },
    });
    const final = await stream.finalChatCompletion();
    expect(final.model).toBe(MODEL);
    expect(final.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(final.usage?.completion_tokens).toBeGreaterThan(0);
    expect(final.usage?.prompt_tokens).toBeGreaterThan(0);
  });

  it('text completions and Anthropic messages go through the same adapter', async () => {
    const c = await client().completions.create({ model: MODEL, prompt: 'One, two,', max_tokens: 3 });
    expect(c.choices[0]?.text.length).toBeGreaterThan(0);
    const m = await gateway.call('POST', '/v1/messages', {
      body: { model: MODEL, max_tokens: 3, messages: [{ role: 'user', content: 'Hi' }] },
    });
    expect(m.status).toBe(200);
    expect(m.body.usage.output_tokens).toBeGreaterThan(0);
  });

  it('markers are ignored for an automatically caching backend (no writes reported)', async () => {
    const res = await client().chat.completions.create({
      model: MODEL,
      max_tokens: 2,
      messages: [
        {
          role: 'system',
          content: [
            { type: 'text', text: 'Cache me please. '.repeat(20), cache_control: { type: 'ephemeral' } } as never,
          ],
        },
        { role: 'user', content: 'Hi' },
      ],
    });
    expect(res.usage?.prompt_tokens_details).toMatchObject({ cache_write_tokens: 0 });
  });

  it('an unknown model is a 404 before any stream', async () => {
    const err = await client()
      .chat.completions.create({ model: 'nope/x', messages: [{ role: 'user', content: 'x' }], stream: true })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
  });
});

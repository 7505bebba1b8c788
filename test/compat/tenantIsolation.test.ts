/**
 * The local decoder's prefix reuse stays within a team, over HTTP (#25 F8). Before, slots were
 * picked and reused by the longest common token prefix whatever the team, and every response told
 * the caller the matched length in `x-sift-prefix-reused-tokens`: team B could confirm a guess
 * about team A's recent prompt, token by token. Now B reuses and is told nothing of A's prompt,
 * and pays no cache read for it, while A keeps its own reuse.
 */
import { jest } from '@jest/globals';
import { longSystem, MODEL, startCompatStack } from './helpers';
import type { TestStack } from '../helpers/localStack';

// The first request loads the model (seconds on a busy 2-core machine).
jest.setTimeout(120_000);

let stack: TestStack;
beforeAll(async () => {
  stack = await startCompatStack();
});
afterAll(async () => stack?.stop());

const reusedTokens = (res: { headers: Headers }) => Number(res.headers.get('x-sift-prefix-reused-tokens'));

describe('prefix reuse across teams', () => {
  it("team B sharing a long prefix with team A's prompt reuses, reads and is told nothing of it; A keeps its reuse", async () => {
    const teamB = await stack.newTeam('team-b');
    // Team A's confidential system prompt, marked for caching as a real client would.
    const secret =
      `${longSystem('a-secret')}The merger with Northwind closes on 14 March at 41 dollars a share. `.repeat(2);
    const ask = (key: string | undefined, question: string) =>
      stack.call('POST', '/v1/chat/completions', {
        ...(key ? { key } : {}),
        body: {
          model: MODEL,
          max_tokens: 1,
          messages: [
            { role: 'system', content: [{ type: 'text', text: secret, cache_control: { type: 'ephemeral' } }] },
            { role: 'user', content: question },
          ],
        },
      });

    const a1 = await ask(undefined, 'What is on the agenda?');
    expect(a1.status).toBe(200);
    expect(a1.body.usage.prompt_tokens_details.cache_write_tokens).toBeGreaterThan(50);

    // B sends A's prompt, guessed whole: nothing reused, nothing read from A's cache entry.
    const b = await ask(teamB.key, 'What is on the agenda?');
    expect(b.status).toBe(200);
    expect(reusedTokens(b)).toBe(0);
    expect(b.body.usage.prompt_tokens_details.cached_tokens).toBe(0);
    const bRows = (await stack.call('GET', '/billing/usage/requests/list', { key: teamB.key })).body.data;
    expect(bRows).toHaveLength(1);
    expect(bRows[0]).toMatchObject({ cache_read_tokens: 0 });

    // A, again: its slot and its cache entry still serve it.
    const a2 = await ask(undefined, 'And after that?');
    expect(reusedTokens(a2)).toBeGreaterThanOrEqual(a1.body.usage.prompt_tokens_details.cache_write_tokens);
    expect(a2.body.usage.prompt_tokens_details.cached_tokens).toBe(
      a1.body.usage.prompt_tokens_details.cache_write_tokens,
    );
  });
});

import { configureDecoder } from '../../src/adapters/decoder';
import { TestStack } from '../helpers/localStack';

export const MODEL = 'HuggingFaceTB/SmolLM2-135M-Instruct';

/** A local stack whose decoder caches prefixes from 16 tokens on (tests keep prompts small). */
export async function startCompatStack(): Promise<TestStack> {
  const stack = await TestStack.start();
  configureDecoder(stack.svc, { minCacheTokens: 16 });
  return stack;
}

/** A system prompt long enough to be cacheable (> 16 tokens), unique per call site. */
export const longSystem = (tag: string) =>
  `You are ${tag}, a concise assistant. Answer in one short sentence. Never use lists. `.repeat(3);

/** Makes the next `times` compat requests of a team answer 429 with `retry-after: 1` (fault injection). */
export function inject429(stack: TestStack, times: number): { remaining: () => number; clear: () => void } {
  const limiter = stack.svc.rateLimiter;
  const original = limiter.hit.bind(limiter);
  let left = times;
  limiter.hit = async (bucket, rule, now) => {
    const state = await original(bucket, rule, now);
    if (left > 0 && bucket.startsWith('compat:')) {
      left--;
      return { count: rule.limit + 1, resetSeconds: 1 };
    }
    return state;
  };
  return {
    remaining: () => left,
    clear: () => {
      left = 0;
      limiter.hit = original;
    },
  };
}

export const ENCODER = 'sift/gliner2-mini-v1';

/** A local stack with the built models published (the catalog decoder and the mini encoder), for this file. */
export function useModelsStack(): () => TestStack {
  let stack: TestStack | undefined;
  beforeAll(async () => {
    stack = await TestStack.start({ withModels: true });
  }, 180_000);
  afterAll(async () => stack?.stop());
  return () => stack!;
}

// Keep test output readable: the local stack logs every request at INFO otherwise.
process.env.SIFT_LOG_LEVEL = process.env.SIFT_LOG_LEVEL ?? 'ERROR';
process.env.AWS_REGION = process.env.AWS_REGION ?? 'us-east-1';
// Jest runs tests in a vm context whose `Array` is not the one native addons create arrays in, so
// `x instanceof Array` is false for them there (and true in a plain Node process). node-llama-cpp
// tells a sampled token with its probabilities ([token, pairs]) from a bare token that way;
// `Array.isArray` answers across realms, as Node itself would.
Object.defineProperty(Array, Symbol.hasInstance, { value: (x) => Array.isArray(x) });

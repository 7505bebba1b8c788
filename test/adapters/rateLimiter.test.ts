/**
 * One contract for both rate limiters (in-memory for long-lived processes, DynamoDB across Lambdas),
 * run against each; then enforceLimits / enforceEdgeLimit over both.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoRecordStore } from '../../src/adapters/dynamodb/recordStore';
import { RateLimitError } from '../../src/core/errors';
import { DynamoRateLimiter } from '../../src/adapters/dynamodb/rateLimiter';
import { MemoryRateLimiter } from '../../src/adapters/memory/rateLimiter';
import {
  EDGE_LIMIT,
  enforceEdgeLimit,
  enforceLimits,
  LIMIT_CLASSES,
  type RateLimiter,
} from '../../src/core/rateLimits';
import { startEmulators, type Emulators } from '../../src/local/emulators';

let dir: string;
let emulators: Emulators;
let client: DynamoDBClient;
let records: DynamoRecordStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-limits-'));
  emulators = await startEmulators(dir, { bucket: 'unused' });
  client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: emulators.dynamoEndpoint,
    credentials: emulators.credentials,
  });
  records = new DynamoRecordStore(client, 'limits');
  await records.ensureTable();
});
afterAll(async () => {
  client.destroy();
  await emulators.close();
  await rm(dir, { recursive: true, force: true });
});

// A fixed clock: 2030-01-01T00:00:00Z is a multiple of 60 and 3600 seconds.
const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
const at = (seconds: number) => new Date(T0 + seconds * 1000);
const MINUTE = { limit: 5, windowSeconds: 60 };
const HOUR = { limit: 100, windowSeconds: 3600 };

let b = 0;
const bucket = (label: string) => `${label}-${++b}`;

const implementations: [string, () => RateLimiter][] = [
  ['MemoryRateLimiter', () => new MemoryRateLimiter()],
  ['DynamoRateLimiter', () => new DynamoRateLimiter(records)],
];

describe.each(implementations)('%s contract', (_name, make) => {
  let limiter: RateLimiter;
  beforeEach(() => {
    limiter = make();
  });

  it('counts hits within a window and reports the seconds left in it', async () => {
    const key = bucket('count');
    const states = [];
    for (const s of [0, 1, 10, 30.5, 59]) states.push(await limiter.hit(key, MINUTE, at(s)));
    expect(states.map((x) => x.count)).toEqual([1, 2, 3, 4, 5]);
    expect(states.map((x) => x.resetSeconds)).toEqual([60, 59, 50, 30, 1]);
  });

  it('starts a new window at the boundary, at count 1', async () => {
    const key = bucket('reset');
    for (let i = 0; i < 3; i += 1) await limiter.hit(key, MINUTE, at(59.999));
    const next = await limiter.hit(key, MINUTE, at(60));
    expect(next).toEqual({ count: 1, resetSeconds: 60 });
    expect((await limiter.hit(key, MINUTE, at(119))).count).toBe(2);
    expect((await limiter.hit(key, MINUTE, at(60 * 10 + 5))).count).toBe(1);
  });

  it('keeps buckets, and windows of different lengths, independent', async () => {
    const a = bucket('a');
    const other = bucket('b');
    await limiter.hit(a, MINUTE, at(1));
    await limiter.hit(a, MINUTE, at(2));
    expect((await limiter.hit(other, MINUTE, at(3))).count).toBe(1);
    expect((await limiter.hit(a, HOUR, at(4))).count).toBe(1);
    expect((await limiter.hit(a, MINUTE, at(5))).count).toBe(3);
    // The hour window outlives minute windows.
    expect((await limiter.hit(a, HOUR, at(65))).count).toBe(2);
    expect((await limiter.hit(a, HOUR, at(65))).resetSeconds).toBe(3600 - 65);
    // A bucket name that extends another is still another bucket.
    expect((await limiter.hit(`${a}x`, MINUTE, at(6))).count).toBe(1);
  });

  it('counts every one of many concurrent hits exactly once', async () => {
    const key = bucket('concurrent');
    const states = await Promise.all(Array.from({ length: 30 }, () => limiter.hit(key, MINUTE, at(7))));
    expect(states.map((s) => s.count).sort((x, y) => x - y)).toEqual(Array.from({ length: 30 }, (_, i) => i + 1));
  });
});

describe('DynamoRateLimiter storage', () => {
  it('shares windows between instances (as Lambdas do) and lets old windows expire by TTL', async () => {
    const key = bucket('shared');
    const one = new DynamoRateLimiter(records);
    const two = new DynamoRateLimiter(records);
    await one.hit(key, MINUTE, at(125));
    expect((await two.hit(key, MINUTE, at(126))).count).toBe(2);
    const raw = await records.doc.send(
      new GetCommand({ TableName: 'limits', Key: { pk: `RATE#${key}#60`, sk: String(T0 / 1000 + 120) } }),
    );
    expect(raw.Item).toMatchObject({ count: 2, expiresAt: T0 / 1000 + 120 + 120 });
  });
});

describe.each(implementations)('enforceLimits over %s', (_name, make) => {
  it('allows up to the limit, then throws 429 with Retry-After and x-ratelimit headers', async () => {
    const limiter = make();
    const scope = `team:${bucket('t')}`;
    const limit = LIMIT_CLASSES.training_create[0]!.limit;
    for (let i = 1; i <= limit; i += 1) {
      const headers = await enforceLimits(limiter, scope, 'training_create', at(10));
      expect(headers).toEqual({
        'x-ratelimit-limit': String(limit),
        'x-ratelimit-remaining': String(limit - i),
        'x-ratelimit-reset': '50',
      });
    }
    const err = await enforceLimits(limiter, scope, 'training_create', at(15)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RateLimitError);
    const e = err as RateLimitError;
    expect(e.status).toBe(429);
    expect(e.message).toMatch(/Rate limit exceeded: 20 requests per 60 s/);
    expect(e.headers).toEqual({
      'retry-after': '45',
      'x-ratelimit-limit': '20',
      'x-ratelimit-remaining': '0',
      'x-ratelimit-reset': '45',
    });
    expect(e.toBody()).toEqual({ detail: e.message });
    // Another scope and another class are unaffected; the next window is open again.
    await expect(enforceLimits(limiter, `team:${bucket('t')}`, 'training_create', at(15))).resolves.toBeDefined();
    await expect(enforceLimits(limiter, scope, 'generate', at(15))).resolves.toMatchObject({
      'x-ratelimit-limit': '120',
    });
    await expect(enforceLimits(limiter, scope, 'training_create', at(60))).resolves.toMatchObject({
      'x-ratelimit-remaining': '19',
      'x-ratelimit-reset': '60',
    });
  });

  it('counts a request against every rule of its class and reports the tightest window', async () => {
    const limiter = make();
    const scope = `ip:${bucket('ip')}`;
    expect(await enforceLimits(limiter, scope, 'default', at(0))).toEqual({
      'x-ratelimit-limit': '20000',
      'x-ratelimit-remaining': '19999',
      'x-ratelimit-reset': '60',
    });
    await enforceLimits(limiter, scope, 'default', at(61));
    // Both the minute and the hour window counted both requests' share.
    expect((await limiter.hit(`default:${scope}`, LIMIT_CLASSES.default[1]!, at(62))).count).toBe(3);
    expect((await limiter.hit(`default:${scope}`, LIMIT_CLASSES.default[0]!, at(62))).count).toBe(2);
  });

  it('the edge limit reports its own window', async () => {
    const limiter = make();
    expect(await enforceEdgeLimit(limiter, bucket('10.0.0.1'), at(30))).toEqual({
      'x-ratelimit-limit': String(EDGE_LIMIT.limit),
      'x-ratelimit-remaining': String(EDGE_LIMIT.limit - 1),
      'x-ratelimit-reset': '30',
    });
  });
});

describe('enforceEdgeLimit over the limit', () => {
  it('throws 429 once 100,000 requests from one address arrive in a window', async () => {
    const limiter = new MemoryRateLimiter();
    const ip = bucket('203.0.113.9');
    for (let i = 0; i < EDGE_LIMIT.limit; i += 1) await limiter.hit(`edge:${ip}`, EDGE_LIMIT, at(1));
    const err = (await enforceEdgeLimit(limiter, ip, at(2)).catch((e: unknown) => e)) as RateLimitError;
    expect(err).toBeInstanceOf(RateLimitError);
    expect(err.headers).toMatchObject({ 'retry-after': '58', 'x-ratelimit-remaining': '0' });
    await expect(enforceEdgeLimit(limiter, bucket('other-ip'), at(2))).resolves.toBeDefined();
  });
});

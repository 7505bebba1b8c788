/** RecordStore contract, against dynalite (the same SDK code that runs against DynamoDB). */
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConditionFailed, RecordStore } from '../../src/adapters/RecordStore';
import { EMULATOR_CREDENTIALS, startEmulators, type Emulators } from '../../src/local/emulators';

let dir: string;
let emulators: Emulators;
let client: DynamoDBClient;
let store: RecordStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-records-'));
  emulators = await startEmulators(dir, { bucket: 'unused' });
  client = new DynamoDBClient({ region: 'us-east-1', endpoint: emulators.dynamoEndpoint, credentials: EMULATOR_CREDENTIALS });
  store = new RecordStore(client, 'contract');
  await store.ensureTable();
});
afterAll(async () => {
  client.destroy();
  await emulators.close();
  await rm(dir, { recursive: true, force: true });
});

let n = 0;
const partition = (label: string) => `P#${label}#${++n}`;

describe('ensureTable', () => {
  it('creates the table with pk/sk and the gsi1 index, and is idempotent', async () => {
    const other = new RecordStore(client, 'contract-ensure');
    await other.ensureTable();
    await other.ensureTable();
    const table = (await client.send(new DescribeTableCommand({ TableName: 'contract-ensure' }))).Table!;
    expect(table.KeySchema).toEqual([
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    expect(table.GlobalSecondaryIndexes?.map((i) => i.IndexName)).toEqual(['gsi1']);
    await other.put({ pk: 'a', sk: 'b' }, { v: 1 });
    await other.ensureTable();
    expect(await other.get('a', 'b')).toEqual({ v: 1 });
  });
});

describe('put / get / delete', () => {
  it('round-trips a record and strips the key attributes', async () => {
    const pk = partition('get');
    await store.put({ pk, sk: 'A', gsi1pk: 'G', gsi1sk: '1', expiresAt: 4102444800 }, { name: 'x', nested: { list: [1, 'two', null], flag: true }, gone: undefined });
    expect(await store.get(pk, 'A')).toEqual({ name: 'x', nested: { list: [1, 'two', null], flag: true } });
    const raw = await store.doc.send(new GetCommand({ TableName: 'contract', Key: { pk, sk: 'A' } }));
    expect(raw.Item).toMatchObject({ pk, sk: 'A', gsi1pk: 'G', gsi1sk: '1', expiresAt: 4102444800 });
    expect(await store.get(pk, 'missing')).toBeUndefined();
    expect(await store.get(pk, 'A', false)).toEqual({ name: 'x', nested: { list: [1, 'two', null], flag: true } });
  });

  it('the keys win over same-named fields of the record', async () => {
    const pk = partition('keys');
    await store.put({ pk, sk: 'A' }, { pk: 'spoofed', sk: 'spoofed', v: 1 });
    expect(await store.get(pk, 'A')).toEqual({ v: 1 });
    expect(await store.get('spoofed', 'spoofed')).toBeUndefined();
  });

  it('ifAbsent makes put a create: a duplicate throws ConditionFailed and leaves the first', async () => {
    const pk = partition('create');
    await store.put({ pk, sk: 'A' }, { v: 1 }, { ifAbsent: true });
    const dup = store.put({ pk, sk: 'A' }, { v: 2 }, { ifAbsent: true });
    await expect(dup).rejects.toBeInstanceOf(ConditionFailed);
    expect(await store.get(pk, 'A')).toEqual({ v: 1 });
    // Same pk, another sk: not a duplicate.
    await store.put({ pk, sk: 'B' }, { v: 3 }, { ifAbsent: true });
    // A plain put overwrites.
    await store.put({ pk, sk: 'A' }, { v: 4 });
    expect(await store.get(pk, 'A')).toEqual({ v: 4 });
  });

  it('put with a condition', async () => {
    const pk = partition('cond-put');
    await expect(store.put({ pk, sk: 'A' }, { v: 1 }, { condition: { expression: 'attribute_exists(pk)' } })).rejects.toBeInstanceOf(ConditionFailed);
    expect(await store.get(pk, 'A')).toBeUndefined();
    await store.put({ pk, sk: 'A' }, { v: 1, state: 'open' });
    const cond = { expression: '#s = :s', names: { '#s': 'state' }, values: { ':s': 'closed' } };
    await expect(store.put({ pk, sk: 'A' }, { v: 2 }, { condition: cond })).rejects.toBeInstanceOf(ConditionFailed);
    await store.put({ pk, sk: 'A' }, { v: 2 }, { condition: { ...cond, values: { ':s': 'open' } } });
    expect(await store.get(pk, 'A')).toEqual({ v: 2 });
  });

  it('delete, unconditionally or with a condition', async () => {
    const pk = partition('delete');
    await store.put({ pk, sk: 'A' }, { state: 'busy' });
    const cond = { expression: '#s = :s', names: { '#s': 'state' }, values: { ':s': 'idle' } };
    await expect(store.delete(pk, 'A', cond)).rejects.toBeInstanceOf(ConditionFailed);
    expect(await store.get(pk, 'A')).toEqual({ state: 'busy' });
    await store.delete(pk, 'A', { ...cond, values: { ':s': 'busy' } });
    expect(await store.get(pk, 'A')).toBeUndefined();
    await store.delete(pk, 'never-existed');
  });

  it('other DynamoDB errors pass through unchanged', async () => {
    const missing = new RecordStore(client, 'no-such-table');
    await expect(missing.get('a', 'b')).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
    await expect(missing.put({ pk: 'a', sk: 'b' }, {}, { ifAbsent: true })).rejects.not.toBeInstanceOf(ConditionFailed);
  });
});

describe('update', () => {
  it('sets, adds and removes in one call and returns the item after', async () => {
    const pk = partition('update');
    await store.put({ pk, sk: 'A' }, { status: 'new', count: 1, temp: 'x', keep: true });
    const after = await store.update<Record<string, unknown>>(pk, 'A', {
      set: { status: 'done', 'odd name': 'ok', skipped: undefined, obj: { a: [1] } },
      add: { count: 2, fresh: 5 },
      remove: ['temp'],
    });
    expect(after).toEqual({ status: 'done', 'odd name': 'ok', obj: { a: [1] }, count: 3, fresh: 5, keep: true });
    expect(await store.get(pk, 'A')).toEqual(after);
  });

  it('creates a counter item when absent (atomic add), and concurrent adds all count', async () => {
    const pk = partition('counter');
    const first = await store.update<{ hits: number }>(pk, 'C', { add: { hits: 1 } });
    expect(first).toEqual({ hits: 1 });
    const results = await Promise.all(Array.from({ length: 25 }, () => store.update<{ hits: number }>(pk, 'C', { add: { hits: 1 } })));
    expect(results.map((r) => r.hits).sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, i) => i + 2));
    expect(await store.get(pk, 'C')).toEqual({ hits: 26 });
  });

  it('with a condition: rejected → ConditionFailed and no change; accepted → applied', async () => {
    const pk = partition('cond-update');
    await store.put({ pk, sk: 'A' }, { status: 'pending', n: 0 });
    const when = (s: string) => ({ expression: '#s = :want', names: { '#s': 'status' }, values: { ':want': s } });
    await expect(store.update(pk, 'A', { set: { status: 'processing' }, add: { n: 1 }, condition: when('ready') })).rejects.toBeInstanceOf(ConditionFailed);
    expect(await store.get(pk, 'A')).toEqual({ status: 'pending', n: 0 });
    expect(await store.update(pk, 'A', { set: { status: 'processing' }, add: { n: 1 }, condition: when('pending') })).toEqual({ status: 'processing', n: 1 });
    // attribute_exists guards against creating an item by accident.
    await expect(store.update(pk, 'nope', { add: { n: 1 }, condition: { expression: 'attribute_exists(pk)' } })).rejects.toBeInstanceOf(ConditionFailed);
    expect(await store.get(pk, 'nope')).toBeUndefined();
  });
});

describe('query', () => {
  const seed = async (pk: string) => {
    for (const [sk, kind, g] of [
      ['DSV#a#000002', 'v', '2024-01-02'],
      ['DSV#a#000001', 'v', '2024-01-01'],
      ['DSV#b#000001', 'v', '2024-01-03'],
      ['DATASET#a', 'head', '2024-01-04'],
      ['JOB#1', 'job', '2024-01-05'],
    ] as const) {
      await store.put({ pk, sk, gsi1pk: `${pk}#BYDATE`, gsi1sk: g }, { sk_copy: sk, kind });
    }
  };

  it('by partition, ascending by sort key; beginsWith narrows; newestFirst reverses', async () => {
    const pk = partition('query');
    await seed(pk);
    const all = await store.query<{ sk_copy: string }>(pk);
    expect(all.items.map((i) => i.sk_copy)).toEqual(['DATASET#a', 'DSV#a#000001', 'DSV#a#000002', 'DSV#b#000001', 'JOB#1']);
    expect(all.nextKey).toBeUndefined();
    const a = await store.query<{ sk_copy: string }>(pk, { beginsWith: 'DSV#a#' });
    expect(a.items.map((i) => i.sk_copy)).toEqual(['DSV#a#000001', 'DSV#a#000002']);
    const newest = await store.query<{ sk_copy: string }>(pk, { beginsWith: 'DSV#', newestFirst: true });
    expect(newest.items.map((i) => i.sk_copy)).toEqual(['DSV#b#000001', 'DSV#a#000002', 'DSV#a#000001']);
    expect((await store.query(pk, { beginsWith: 'NOPE#' })).items).toEqual([]);
    expect((await store.query(partition('empty'))).items).toEqual([]);
  });

  it('on the gsi1 index, ordered by gsi1sk', async () => {
    const pk = partition('gsi');
    await seed(pk);
    const byDate = await store.query<{ sk_copy: string }>(`${pk}#BYDATE`, { index: 'gsi1', newestFirst: true });
    expect(byDate.items.map((i) => i.sk_copy)).toEqual(['JOB#1', 'DATASET#a', 'DSV#b#000001', 'DSV#a#000002', 'DSV#a#000001']);
    const jan0 = await store.query<{ sk_copy: string }>(`${pk}#BYDATE`, { index: 'gsi1', beginsWith: '2024-01-0', limit: 2 });
    expect(jan0.items.map((i) => i.sk_copy)).toEqual(['DSV#a#000001', 'DSV#a#000002']);
    expect(jan0.nextKey).toBeDefined();
    // Items without gsi1 keys are not on the index.
    await store.put({ pk, sk: 'NOINDEX' }, { kind: 'v' });
    expect((await store.query(`${pk}#BYDATE`, { index: 'gsi1' })).items).toHaveLength(5);
  });

  it('filters with names and values beside the key condition', async () => {
    const pk = partition('filter');
    await seed(pk);
    const jobs = await store.query<{ sk_copy: string }>(pk, { filter: { expression: '#k = :k', names: { '#k': 'kind' }, values: { ':k': 'job' } } });
    expect(jobs.items.map((i) => i.sk_copy)).toEqual(['JOB#1']);
    const heads = await store.query<{ sk_copy: string }>(pk, { beginsWith: 'D', filter: { expression: 'kind <> :v', values: { ':v': 'v' } } });
    expect(heads.items.map((i) => i.sk_copy)).toEqual(['DATASET#a']);
  });

  it('pages with limit and startKey, in both directions', async () => {
    const pk = partition('pages');
    for (let i = 0; i < 7; i += 1) await store.put({ pk, sk: `I#${i}` }, { i });
    for (const newestFirst of [false, true]) {
      const seen: number[] = [];
      let startKey: Record<string, unknown> | undefined;
      let pages = 0;
      do {
        const page: { items: { i: number }[]; nextKey?: Record<string, unknown> } = await store.query<{ i: number }>(pk, {
          limit: 3,
          newestFirst,
          ...(startKey ? { startKey } : {}),
        });
        expect(page.items.length).toBeLessThanOrEqual(3);
        seen.push(...page.items.map((x) => x.i));
        startKey = page.nextKey;
        pages += 1;
      } while (startKey);
      expect(pages).toBeGreaterThanOrEqual(3);
      expect(seen).toEqual(newestFirst ? [6, 5, 4, 3, 2, 1, 0] : [0, 1, 2, 3, 4, 5, 6]);
    }
  });

  describe('queryAll over more than one 1 MB page', () => {
    const pk = `P#big#${Date.now()}`;
    const ITEMS = 8;
    const blob = 'x'.repeat(300 * 1024);
    beforeAll(async () => {
      for (let i = 0; i < ITEMS; i += 1) await store.put({ pk, sk: `BIG#${String(i).padStart(2, '0')}` }, { i, even: i % 2 === 0, blob });
    });

    it('follows pagination to the end (one query returns a partial page)', async () => {
      const first = await store.query<{ i: number }>(pk);
      expect(first.nextKey).toBeDefined();
      expect(first.items.length).toBeLessThan(ITEMS);
      const all = await store.queryAll<{ i: number; blob: string }>(pk);
      expect(all.map((x) => x.i)).toEqual([...Array(ITEMS).keys()]);
      expect(all.every((x) => x.blob.length === blob.length)).toBe(true);
      const reversed = await store.queryAll<{ i: number }>(pk, { newestFirst: true });
      expect(reversed.map((x) => x.i)).toEqual([...Array(ITEMS).keys()].reverse());
    });

    it('applies filters on every page and stops at max', async () => {
      const even = await store.queryAll<{ i: number }>(pk, { filter: { expression: 'even = :t', values: { ':t': true } } });
      expect(even.map((x) => x.i)).toEqual([0, 2, 4, 6]);
      const odd = await store.queryAll<{ i: number }>(pk, { beginsWith: 'BIG#', filter: { expression: 'even = :f', values: { ':f': false } } });
      expect(odd.map((x) => x.i)).toEqual([1, 3, 5, 7]);
      const capped = await store.queryAll<{ i: number }>(pk, { max: 2 });
      expect(capped.map((x) => x.i)).toEqual([0, 1]);
    });
  });
});

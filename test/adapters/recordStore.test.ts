/** The DynamoDB records adapter against dynalite (the same SDK code that runs against DynamoDB). */
import { DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoRecordStore, toExpression } from '../../src/adapters/dynamodb/recordStore';
import { WriteConflict } from '../../src/core/ports';
import { startEmulators, type Emulators } from '../../src/local/emulators';
import { recordStoreContract } from '../helpers/recordStoreContract';

let dir: string;
let emulators: Emulators;
let client: DynamoDBClient;
let store: DynamoRecordStore;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-records-'));
  emulators = await startEmulators(dir, { bucket: 'unused' });
  client = new DynamoDBClient({
    region: 'us-east-1',
    endpoint: emulators.dynamoEndpoint,
    credentials: emulators.credentials,
  });
  store = new DynamoRecordStore(client, 'contract');
  await store.ensureTable();
});
afterAll(async () => {
  client.destroy();
  await emulators.close();
  await rm(dir, { recursive: true, force: true });
});

describe('the records port contract (DynamoDB adapter on dynalite)', () => {
  recordStoreContract(() => store);
});

let n = 0;
const partition = (label: string) => `P#dynamo-${label}#${++n}`;

describe('ensureTable', () => {
  it('creates the table with pk/sk and the gsi1 index, and is idempotent', async () => {
    const other = new DynamoRecordStore(client, 'contract-ensure');
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

describe('DynamoDB items', () => {
  it('keeps the key attributes (index keys, TTL) on the stored item', async () => {
    const pk = partition('raw');
    await store.put({ pk, sk: 'A', gsi1pk: 'G', gsi1sk: '1', expiresAt: 4102444800 }, { name: 'x' });
    const raw = await store.doc.send(new GetCommand({ TableName: 'contract', Key: { pk, sk: 'A' } }));
    expect(raw.Item).toMatchObject({ pk, sk: 'A', gsi1pk: 'G', gsi1sk: '1', expiresAt: 4102444800, name: 'x' });
  });

  it('conditions become DynamoDB condition expressions with placeholders only', () => {
    expect(
      toExpression([
        { itemExists: true },
        {
          anyOf: [
            { attr: 'seq|w1', present: false },
            { attr: 'seq|w1', lessThan: 4 },
          ],
        },
        { attr: 'tasks', contains: 'ner' },
      ]),
    ).toEqual({
      expression: 'attribute_exists(pk) AND (attribute_not_exists(#c1) OR #c2 < :c3) AND contains(#c4, :c5)',
      names: { '#c1': 'seq|w1', '#c2': 'seq|w1', '#c4': 'tasks' },
      values: { ':c3': 4, ':c5': 'ner' },
    });
  });

  it('other DynamoDB errors pass through unchanged', async () => {
    const missing = new DynamoRecordStore(client, 'no-such-table');
    await expect(missing.get('a', 'b')).rejects.toMatchObject({ name: 'ResourceNotFoundException' });
    await expect(missing.put({ pk: 'a', sk: 'b' }, {}, { ifAbsent: true })).rejects.not.toBeInstanceOf(WriteConflict);
  });
});

describe('queryAll over more than one 1 MB page', () => {
  const pk = `P#big#${Date.now()}`;
  const ITEMS = 8;
  const blob = 'x'.repeat(300 * 1024);
  beforeAll(async () => {
    for (let i = 0; i < ITEMS; i += 1)
      await store.put({ pk, sk: `BIG#${String(i).padStart(2, '0')}` }, { i, even: i % 2 === 0, blob });
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
    const even = await store.queryAll<{ i: number }>(pk, { filter: [{ attr: 'even', equals: true }] });
    expect(even.map((x) => x.i)).toEqual([0, 2, 4, 6]);
    const odd = await store.queryAll<{ i: number }>(pk, {
      beginsWith: 'BIG#',
      filter: [{ attr: 'even', equals: false }],
    });
    expect(odd.map((x) => x.i)).toEqual([1, 3, 5, 7]);
    const capped = await store.queryAll<{ i: number }>(pk, { max: 2 });
    expect(capped.map((x) => x.i)).toEqual([0, 1]);
  });
});

import {
  CreateTableCommand,
  DescribeTableCommand,
  type DynamoDBClient,
  ResourceNotFoundException,
  waitUntilTableExists,
} from '@aws-sdk/client-dynamodb';
import {
  BatchWriteCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  UpdateCommand,
  type QueryCommandInput,
} from '@aws-sdk/lib-dynamodb';
import {
  ITEM_ABSENT,
  WriteConflict,
  type Clause,
  type Condition,
  type ItemKeys,
  type QueryOptions,
  type QueryPage,
  type RecordStore,
  type RecordUpdate,
} from '../../core/ports';
import { StoreUnavailableError } from '../../core/errors';
import { storeFailure } from '../storeErrors';

const KEY_ATTRIBUTES = new Set(['pk', 'sk', 'gsi1pk', 'gsi1sk', 'expiresAt']);
/** BatchWriteItem's limit of requests per call. */
const BATCH_WRITE_MAX = 25;
/** Times items a batch write left unprocessed (throttling) are sent again before it fails. */
const UNPROCESSED_RETRIES = 6;

/** A condition as DynamoDB takes it: an expression and its placeholders. */
interface Expression {
  expression: string;
  names: Record<string, string>;
  values: Record<string, unknown>;
}

/**
 * Turns the core's condition (ports.ts) into a DynamoDB condition expression. Placeholders are
 * `#c<n>` / `:c<n>` (`prefix` keeps those of a filter and a condition apart from the update's `#u<n>`).
 */
export function toExpression(condition: Condition, prefix = 'c'): Expression {
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  let n = 0;
  const name = (attr: string) => {
    n += 1;
    names[`#${prefix}${n}`] = attr;
    return `#${prefix}${n}`;
  };
  const value = (v: unknown) => {
    n += 1;
    values[`:${prefix}${n}`] = v;
    return `:${prefix}${n}`;
  };
  const clause = (c: Clause): string => {
    if ('itemExists' in c) return c.itemExists ? 'attribute_exists(pk)' : 'attribute_not_exists(pk)';
    if ('anyOf' in c) return `(${c.anyOf.map(clause).join(' OR ')})`;
    if ('present' in c)
      return c.present ? `attribute_exists(${name(c.attr)})` : `attribute_not_exists(${name(c.attr)})`;
    if ('equals' in c) return `${name(c.attr)} = ${value(c.equals)}`;
    if ('lessThan' in c) return `${name(c.attr)} < ${value(c.lessThan)}`;
    return `contains(${name(c.attr)}, ${value(c.contains)})`;
  };
  return { expression: condition.map(clause).join(' AND '), names, values };
}

/**
 * Records live in one DynamoDB table (pk/sk + gsi1). Local mode points the same client at dynalite,
 * so this class is the records adapter of every deployment (memory.ts serves core unit tests). No
 * transactions: dynalite has none, and every invariant we need holds with single-item conditional writes.
 */
export class DynamoRecordStore implements RecordStore {
  readonly doc: DynamoDBDocumentClient;

  constructor(
    readonly client: DynamoDBClient,
    readonly table: string,
  ) {
    this.doc = DynamoDBDocumentClient.from(client, {
      marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
    });
  }

  static strip<T>(item: Record<string, unknown> | undefined): T | undefined {
    if (!item) return undefined;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(item)) if (!KEY_ATTRIBUTES.has(k)) out[k] = v;
    return out as T;
  }

  async get<T>(pk: string, sk: string, consistent = true): Promise<T | undefined> {
    const res = await this.guard(
      this.doc.send(new GetCommand({ TableName: this.table, Key: { pk, sk }, ConsistentRead: consistent })),
    );
    return DynamoRecordStore.strip<T>(res.Item);
  }

  /** Put a whole item. `ifAbsent` makes it a create that fails with WriteConflict on a duplicate. */
  async put(keys: ItemKeys, record: object, opts: { ifAbsent?: boolean; condition?: Condition } = {}): Promise<void> {
    const condition = opts.ifAbsent ? ITEM_ABSENT : opts.condition;
    await this.guard(
      this.doc.send(
        new PutCommand({
          TableName: this.table,
          Item: { ...record, ...keys },
          ...conditionParams(condition),
        }),
      ),
    );
  }

  /** BatchWriteItem in groups of 25 (its limit); items DynamoDB leaves unprocessed are sent again with backoff. */
  async putAll(items: Array<{ keys: ItemKeys; record: object }>): Promise<void> {
    // one call may not name the same key twice: the later item wins, as with single puts in order
    const unique = new Map<string, Record<string, unknown>>();
    for (const { keys, record } of items) unique.set(JSON.stringify([keys.pk, keys.sk]), { ...record, ...keys });
    const all = [...unique.values()];
    for (let i = 0; i < all.length; i += BATCH_WRITE_MAX) {
      let requests = all.slice(i, i + BATCH_WRITE_MAX).map((Item) => ({ PutRequest: { Item } }));
      for (let attempt = 0; requests.length; attempt++) {
        if (attempt > 0) {
          // items left unprocessed are throttled items (BatchWriteItem's documented reason)
          if (attempt > UNPROCESSED_RETRIES) {
            throw new StoreUnavailableError(
              'records',
              'throttled',
              new Error(
                `DynamoDB left ${requests.length} of a batch write's items unprocessed after ${attempt} attempts`,
              ),
            );
          }
          await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
        }
        const res = await this.guard(
          this.doc.send(new BatchWriteCommand({ RequestItems: { [this.table]: requests } })),
        );
        requests = (res.UnprocessedItems?.[this.table] ?? []) as typeof requests;
      }
    }
  }

  /**
   * Set and/or atomically add attributes on an existing item (or create it, for counters).
   * Returns the item as it is after the update.
   */
  async update<T>(pk: string, sk: string, change: RecordUpdate): Promise<T> {
    const condition = change.condition?.length ? toExpression(change.condition) : undefined;
    const names: Record<string, string> = { ...(condition?.names ?? {}) };
    const values: Record<string, unknown> = { ...(condition?.values ?? {}) };
    const clauses: string[] = [];
    let i = 0;
    const setParts = Object.entries(change.set ?? {})
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => {
        i += 1;
        names[`#u${i}`] = k;
        values[`:u${i}`] = v;
        return `#u${i} = :u${i}`;
      });
    if (setParts.length) clauses.push(`SET ${setParts.join(', ')}`);
    const addParts = Object.entries(change.add ?? {}).map(([k, v]) => {
      i += 1;
      names[`#u${i}`] = k;
      values[`:u${i}`] = v;
      return `#u${i} :u${i}`;
    });
    if (addParts.length) clauses.push(`ADD ${addParts.join(', ')}`);
    const removeParts = (change.remove ?? []).map((k) => {
      i += 1;
      names[`#u${i}`] = k;
      return `#u${i}`;
    });
    if (removeParts.length) clauses.push(`REMOVE ${removeParts.join(', ')}`);
    const res = await this.guard(
      this.doc.send(
        new UpdateCommand({
          TableName: this.table,
          Key: { pk, sk },
          UpdateExpression: clauses.join(' '),
          ExpressionAttributeNames: names,
          ...(Object.keys(values).length ? { ExpressionAttributeValues: values } : {}),
          ...(condition ? { ConditionExpression: condition.expression } : {}),
          ReturnValues: 'ALL_NEW',
        }),
      ),
    );
    return DynamoRecordStore.strip<T>(res.Attributes) as T;
  }

  async delete(pk: string, sk: string, condition?: Condition): Promise<void> {
    await this.guard(
      this.doc.send(new DeleteCommand({ TableName: this.table, Key: { pk, sk }, ...conditionParams(condition) })),
    );
  }

  async query<T>(partition: string, opts: QueryOptions = {}): Promise<QueryPage<T>> {
    const pkName = opts.index ? 'gsi1pk' : 'pk';
    const skName = opts.index ? 'gsi1sk' : 'sk';
    const filter = opts.filter?.length ? toExpression(opts.filter, 'f') : undefined;
    const names: Record<string, string> = { '#pk': pkName, ...(filter?.names ?? {}) };
    const values: Record<string, unknown> = { ':pk': partition, ...(filter?.values ?? {}) };
    let keyCondition = '#pk = :pk';
    if (opts.beginsWith !== undefined) {
      names['#sk'] = skName;
      values[':sk'] = opts.beginsWith;
      keyCondition += ' AND begins_with(#sk, :sk)';
    }
    const input: QueryCommandInput = {
      TableName: this.table,
      KeyConditionExpression: keyCondition,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ScanIndexForward: !opts.newestFirst,
      ...(opts.index ? { IndexName: opts.index } : { ConsistentRead: true }),
      ...(opts.limit ? { Limit: opts.limit } : {}),
      ...(opts.startKey ? { ExclusiveStartKey: opts.startKey } : {}),
      ...(filter ? { FilterExpression: filter.expression } : {}),
    };
    const res = await this.guard(this.doc.send(new QueryCommand(input)));
    return {
      items: (res.Items ?? []).map((item) => DynamoRecordStore.strip<T>(item) as T),
      ...(res.LastEvaluatedKey ? { nextKey: res.LastEvaluatedKey } : {}),
    };
  }

  /** Every item of a partition (bounded by `max`), following DynamoDB pagination. */
  async queryAll<T>(
    partition: string,
    opts: Omit<QueryOptions, 'limit' | 'startKey'> & { max?: number } = {},
  ): Promise<T[]> {
    const out: T[] = [];
    let startKey: Record<string, unknown> | undefined;
    const max = opts.max ?? 10_000;
    do {
      const page: QueryPage<T> = await this.query<T>(partition, { ...opts, ...(startKey ? { startKey } : {}) });
      out.push(...page.items);
      startKey = page.nextKey;
    } while (startKey && out.length < max);
    return out.slice(0, max);
  }

  /** Creates the table when it does not exist (local mode and tests; CDK owns it on AWS). */
  async ensureTable(): Promise<void> {
    try {
      await this.client.send(new DescribeTableCommand({ TableName: this.table }));
      return;
    } catch (err) {
      if (!(err instanceof ResourceNotFoundException)) throw storeFailure('records', err);
    }
    await this.client.send(
      new CreateTableCommand({
        TableName: this.table,
        BillingMode: 'PAY_PER_REQUEST',
        AttributeDefinitions: [
          { AttributeName: 'pk', AttributeType: 'S' },
          { AttributeName: 'sk', AttributeType: 'S' },
          { AttributeName: 'gsi1pk', AttributeType: 'S' },
          { AttributeName: 'gsi1sk', AttributeType: 'S' },
        ],
        KeySchema: [
          { AttributeName: 'pk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes: [
          {
            IndexName: 'gsi1',
            KeySchema: [
              { AttributeName: 'gsi1pk', KeyType: 'HASH' },
              { AttributeName: 'gsi1sk', KeyType: 'RANGE' },
            ],
            Projection: { ProjectionType: 'ALL' },
          },
        ],
      }),
    );
    // CreateTable returns while the table is still CREATING (on AWS and in dynalite alike), and a
    // table that is not ACTIVE answers ResourceNotFoundException: wait for ACTIVE before returning
    await waitUntilTableExists(
      { client: this.client, maxWaitTime: 120, minDelay: 1, maxDelay: 2 },
      { TableName: this.table },
    );
  }

  /** Every store call goes through here: SDK errors leave the adapter in the core's terms (WriteConflict, StoreUnavailableError). */
  private async guard<R>(op: Promise<R>): Promise<R> {
    try {
      return await op;
    } catch (err) {
      if ((err as { name?: string }).name === 'ConditionalCheckFailedException') throw new WriteConflict();
      throw storeFailure('records', err);
    }
  }
}

function conditionParams(condition: Condition | undefined) {
  if (!condition?.length) return {};
  const c = toExpression(condition);
  return {
    ConditionExpression: c.expression,
    ...(Object.keys(c.names).length ? { ExpressionAttributeNames: c.names } : {}),
    ...(Object.keys(c.values).length ? { ExpressionAttributeValues: c.values } : {}),
  };
}

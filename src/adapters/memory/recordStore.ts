import { isDeepStrictEqual } from 'node:util';
import {
  WriteConflict,
  type Clause,
  type Condition,
  type ItemKeys,
  type QueryOptions,
  type QueryPage,
  type RecordStore,
  type RecordUpdate,
} from '../../core/ports';

type Item = Record<string, unknown> & { pk: string; sk: string };

const KEY_ATTRIBUTES = new Set(['pk', 'sk', 'gsi1pk', 'gsi1sk', 'expiresAt']);

/** Drops `undefined` values at any depth, as the DynamoDB adapter's marshalling does. */
function withoutUndefined<T>(value: T): T {
  if (Array.isArray(value)) return value.map(withoutUndefined) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = withoutUndefined(v);
  return out as T;
}

function strip<T>(item: Item): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(item)) if (!KEY_ATTRIBUTES.has(k)) out[k] = structuredClone(v);
  return out as T;
}

function holds(c: Clause, item: Item | undefined): boolean {
  if ('itemExists' in c) return c.itemExists === (item !== undefined);
  if ('anyOf' in c) return c.anyOf.some((d) => holds(d, item));
  const present = item !== undefined && item[c.attr] !== undefined;
  if ('present' in c) return c.present === present;
  if (!present) return false; // DynamoDB: a comparison with a missing attribute is false
  const v = item[c.attr];
  if ('equals' in c) return isDeepStrictEqual(v, c.equals);
  if ('lessThan' in c) return typeof v === 'number' && v < c.lessThan;
  if (typeof v === 'string') return typeof c.contains === 'string' && v.includes(c.contains);
  return Array.isArray(v) && v.some((x) => isDeepStrictEqual(x, c.contains));
}

const satisfies = (condition: Condition | undefined, item: Item | undefined) =>
  !condition || condition.every((c) => holds(c, item));

/** DynamoDB orders string sort keys by their UTF-8 bytes. */
const byteOrder = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

/**
 * The records port in one process's memory, with the same semantics as the DynamoDB adapter
 * (conditional writes, atomic adds, ordering, index, pages; test/helpers/recordStoreContract.ts
 * checks both). For core unit tests: no emulator, nothing on disk. Items never expire.
 */
export class MemoryRecordStore implements RecordStore {
  private readonly items = new Map<string, Item>();

  private static id(pk: string, sk: string): string {
    return JSON.stringify([pk, sk]);
  }

  async get<T>(pk: string, sk: string): Promise<T | undefined> {
    const item = this.items.get(MemoryRecordStore.id(pk, sk));
    return item ? strip<T>(item) : undefined;
  }

  async put(keys: ItemKeys, record: object, opts: { ifAbsent?: boolean; condition?: Condition } = {}): Promise<void> {
    const id = MemoryRecordStore.id(keys.pk, keys.sk);
    const condition: Condition | undefined = opts.ifAbsent ? [{ itemExists: false }] : opts.condition;
    if (!satisfies(condition, this.items.get(id))) throw new WriteConflict();
    this.items.set(id, structuredClone(withoutUndefined({ ...record, ...keys })) as Item);
  }

  async putAll(items: Array<{ keys: ItemKeys; record: object }>): Promise<void> {
    for (const { keys, record } of items) await this.put(keys, record);
  }

  async update<T>(pk: string, sk: string, change: RecordUpdate): Promise<T> {
    const id = MemoryRecordStore.id(pk, sk);
    const current = this.items.get(id);
    if (!satisfies(change.condition, current)) throw new WriteConflict();
    const next: Item = current ? structuredClone(current) : { pk, sk };
    for (const [k, v] of Object.entries(change.set ?? {}))
      if (v !== undefined) next[k] = structuredClone(withoutUndefined(v));
    for (const [k, v] of Object.entries(change.add ?? {})) {
      const before = next[k] ?? 0;
      if (typeof before !== 'number') throw new Error(`cannot add to '${k}': it is not a number`);
      next[k] = before + v;
    }
    for (const k of change.remove ?? []) delete next[k];
    this.items.set(id, next);
    return strip<T>(next);
  }

  async delete(pk: string, sk: string, condition?: Condition): Promise<void> {
    const id = MemoryRecordStore.id(pk, sk);
    if (!satisfies(condition, this.items.get(id))) throw new WriteConflict();
    this.items.delete(id);
  }

  async query<T>(partition: string, opts: QueryOptions = {}): Promise<QueryPage<T>> {
    const [pkName, skName] = opts.index ? (['gsi1pk', 'gsi1sk'] as const) : (['pk', 'sk'] as const);
    const matching = [...this.items.values()]
      .filter((i) => i[pkName] === partition && typeof i[skName] === 'string')
      .filter((i) => opts.beginsWith === undefined || (i[skName] as string).startsWith(opts.beginsWith))
      .sort(
        (a, b) => byteOrder(a[skName] as string, b[skName] as string) || byteOrder(a.pk, b.pk) || byteOrder(a.sk, b.sk),
      );
    if (opts.newestFirst) matching.reverse();
    let from = 0;
    if (opts.startKey) {
      const after = MemoryRecordStore.id(String(opts.startKey.pk), String(opts.startKey.sk));
      from = matching.findIndex((i) => MemoryRecordStore.id(i.pk, i.sk) === after) + 1;
    }
    // as in DynamoDB, `limit` counts the items read; the filter then drops some of them
    const read = matching.slice(from, opts.limit ? from + opts.limit : undefined);
    const last = read[read.length - 1];
    const more = last !== undefined && from + read.length < matching.length;
    return {
      items: read.filter((i) => satisfies(opts.filter, i)).map((i) => strip<T>(i)),
      ...(more
        ? { nextKey: { pk: last.pk, sk: last.sk, ...(opts.index ? { gsi1pk: last.gsi1pk, gsi1sk: last.gsi1sk } : {}) } }
        : {}),
    };
  }

  async queryAll<T>(
    partition: string,
    opts: Omit<QueryOptions, 'limit' | 'startKey'> & { max?: number } = {},
  ): Promise<T[]> {
    const { max = 10_000, ...query } = opts;
    return (await this.query<T>(partition, query)).items.slice(0, max);
  }
}

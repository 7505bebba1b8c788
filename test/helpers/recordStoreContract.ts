/**
 * The records port's contract (src/core/ports.ts), run against every adapter: the DynamoDB one on
 * dynalite (test/adapters/recordStore.test.ts) and the in-memory one the core unit tests use
 * (test/adapters/memoryRecordStore.test.ts). What the core relies on is here; DynamoDB-only
 * details (table creation, raw items, 1 MB pages) stay in the DynamoDB test.
 */
import { WriteConflict, type Condition, type RecordStore } from '../../src/core/ports';

export function recordStoreContract(store: () => RecordStore): void {
  let n = 0;
  const partition = (label: string) => `P#${label}#${Date.now()}#${++n}`;

  describe('put / get / delete', () => {
    it('round-trips a record without its key attributes (undefined values dropped)', async () => {
      const pk = partition('get');
      await store().put(
        { pk, sk: 'A', gsi1pk: 'G', gsi1sk: '1', expiresAt: 4102444800 },
        { name: 'x', nested: { list: [1, 'two', null], flag: true }, gone: undefined },
      );
      expect(await store().get(pk, 'A')).toEqual({ name: 'x', nested: { list: [1, 'two', null], flag: true } });
      expect(await store().get(pk, 'missing')).toBeUndefined();
      expect(await store().get(pk, 'A', false)).toEqual({ name: 'x', nested: { list: [1, 'two', null], flag: true } });
    });

    it('the keys win over same-named fields of the record', async () => {
      const pk = partition('keys');
      await store().put({ pk, sk: 'A' }, { pk: 'spoofed', sk: 'spoofed', v: 1 });
      expect(await store().get(pk, 'A')).toEqual({ v: 1 });
      expect(await store().get('spoofed', 'spoofed')).toBeUndefined();
    });

    it('a record read back is a copy: changing it changes nothing stored', async () => {
      const pk = partition('copy');
      await store().put({ pk, sk: 'A' }, { list: [1] });
      const read = await store().get<{ list: number[] }>(pk, 'A');
      read!.list.push(2);
      expect(await store().get(pk, 'A')).toEqual({ list: [1] });
    });

    it('putAll writes every item, more than one store call takes, the later of two same-keyed items winning', async () => {
      const pk = partition('putAll');
      const items = Array.from({ length: 60 }, (_, i) => ({
        keys: { pk, sk: `R#${String(i).padStart(2, '0')}`, expiresAt: 4102444800 },
        record: { i, pk: 'spoofed' },
      }));
      items.push({ keys: { pk, sk: 'R#07', expiresAt: 4102444800 }, record: { i: 700, pk: 'spoofed' } });
      await store().putAll(items);
      await store().putAll([]);
      const rows = await store().queryAll<{ i: number }>(pk);
      expect(rows.map((r) => r.i)).toEqual(Array.from({ length: 60 }, (_, i) => (i === 7 ? 700 : i)));
      expect(await store().get(pk, 'R#59')).toEqual({ i: 59 });
    });

    it('ifAbsent makes put a create: a duplicate throws WriteConflict and leaves the first', async () => {
      const pk = partition('create');
      await store().put({ pk, sk: 'A' }, { v: 1 }, { ifAbsent: true });
      await expect(store().put({ pk, sk: 'A' }, { v: 2 }, { ifAbsent: true })).rejects.toBeInstanceOf(WriteConflict);
      expect(await store().get(pk, 'A')).toEqual({ v: 1 });
      // Same pk, another sk: not a duplicate.
      await store().put({ pk, sk: 'B' }, { v: 3 }, { ifAbsent: true });
      // A plain put overwrites.
      await store().put({ pk, sk: 'A' }, { v: 4 });
      expect(await store().get(pk, 'A')).toEqual({ v: 4 });
    });

    it('put with a condition', async () => {
      const pk = partition('cond-put');
      await expect(
        store().put({ pk, sk: 'A' }, { v: 1 }, { condition: [{ itemExists: true }] }),
      ).rejects.toBeInstanceOf(WriteConflict);
      expect(await store().get(pk, 'A')).toBeUndefined();
      await store().put({ pk, sk: 'A' }, { v: 1, state: 'open' });
      await expect(
        store().put({ pk, sk: 'A' }, { v: 2 }, { condition: [{ attr: 'state', equals: 'closed' }] }),
      ).rejects.toBeInstanceOf(WriteConflict);
      await store().put({ pk, sk: 'A' }, { v: 2 }, { condition: [{ attr: 'state', equals: 'open' }] });
      expect(await store().get(pk, 'A')).toEqual({ v: 2 });
    });

    it('delete, unconditionally or with a condition', async () => {
      const pk = partition('delete');
      await store().put({ pk, sk: 'A' }, { state: 'busy' });
      await expect(store().delete(pk, 'A', [{ attr: 'state', equals: 'idle' }])).rejects.toBeInstanceOf(WriteConflict);
      expect(await store().get(pk, 'A')).toEqual({ state: 'busy' });
      await store().delete(pk, 'A', [{ attr: 'state', equals: 'busy' }]);
      expect(await store().get(pk, 'A')).toBeUndefined();
      await store().delete(pk, 'never-existed');
    });
  });

  describe('conditions', () => {
    // Each case: the condition, and whether it holds on { status: 'open', gone: null, n: 5, tags: ['a','b'], note: 'hello' }.
    const cases: [string, Condition, boolean][] = [
      ['item exists', [{ itemExists: true }], true],
      ['item absent', [{ itemExists: false }], false],
      ['attribute present', [{ attr: 'status', present: true }], true],
      ['missing attribute absent', [{ attr: 'missing', present: false }], true],
      ['a stored null is present', [{ attr: 'gone', present: true }], true],
      ['equals a string', [{ attr: 'status', equals: 'open' }], true],
      ['differs from a string', [{ attr: 'status', equals: 'closed' }], false],
      ['a stored null equals null', [{ attr: 'gone', equals: null }], true],
      ['a missing attribute does not equal null', [{ attr: 'missing', equals: null }], false],
      ['a string does not equal null', [{ attr: 'status', equals: null }], false],
      ['less than, true', [{ attr: 'n', lessThan: 6 }], true],
      ['less than, equal is false', [{ attr: 'n', lessThan: 5 }], false],
      ['less than on a missing attribute is false', [{ attr: 'missing', lessThan: 6 }], false],
      ['list contains', [{ attr: 'tags', contains: 'b' }], true],
      ['list does not contain', [{ attr: 'tags', contains: 'c' }], false],
      ['string contains', [{ attr: 'note', contains: 'ell' }], true],
      [
        'any of, one holds',
        [
          {
            anyOf: [
              { attr: 'missing', present: true },
              { attr: 'n', lessThan: 9 },
            ],
          },
        ],
        true,
      ],
      [
        'any of, none holds',
        [
          {
            anyOf: [
              { attr: 'missing', present: true },
              { attr: 'n', lessThan: 1 },
            ],
          },
        ],
        false,
      ],
      [
        'all clauses must hold',
        [{ itemExists: true }, { attr: 'status', equals: 'open' }, { attr: 'n', lessThan: 1 }],
        false,
      ],
      [
        'missing or below (the usage sequence check)',
        [
          {
            anyOf: [
              { attr: 'seq', present: false },
              { attr: 'seq', lessThan: 3 },
            ],
          },
        ],
        true,
      ],
    ];
    it.each(cases)('%s', async (_label, condition, expected) => {
      const pk = partition('cond');
      await store().put({ pk, sk: 'A' }, { status: 'open', gone: null, n: 5, tags: ['a', 'b'], note: 'hello' });
      const write = store().update(pk, 'A', { set: { touched: true }, condition });
      if (expected) await expect(write).resolves.toMatchObject({ touched: true });
      else {
        await expect(write).rejects.toBeInstanceOf(WriteConflict);
        expect(await store().get(pk, 'A')).not.toHaveProperty('touched');
      }
    });

    it('on a missing item only absence-tests hold', async () => {
      const pk = partition('cond-missing');
      await expect(
        store().update(pk, 'A', { set: { v: 1 }, condition: [{ attr: 'status', equals: null }] }),
      ).rejects.toBeInstanceOf(WriteConflict);
      await expect(
        store().update(pk, 'A', { set: { v: 1 }, condition: [{ itemExists: true }] }),
      ).rejects.toBeInstanceOf(WriteConflict);
      expect(await store().get(pk, 'A')).toBeUndefined();
      expect(await store().update(pk, 'A', { set: { v: 1 }, condition: [{ attr: 'status', present: false }] })).toEqual(
        { v: 1 },
      );
    });
  });

  describe('update', () => {
    it('sets, adds and removes in one call and returns the item after', async () => {
      const pk = partition('update');
      await store().put({ pk, sk: 'A' }, { status: 'new', count: 1, temp: 'x', keep: true });
      const after = await store().update<Record<string, unknown>>(pk, 'A', {
        set: { status: 'done', 'odd name': 'ok', skipped: undefined, obj: { a: [1] } },
        add: { count: 2, fresh: 5 },
        remove: ['temp'],
      });
      expect(after).toEqual({ status: 'done', 'odd name': 'ok', obj: { a: [1] }, count: 3, fresh: 5, keep: true });
      expect(await store().get(pk, 'A')).toEqual(after);
    });

    it('creates a counter item when absent (atomic add), and concurrent adds all count', async () => {
      const pk = partition('counter');
      expect(await store().update<{ hits: number }>(pk, 'C', { add: { hits: 1 } })).toEqual({ hits: 1 });
      const results = await Promise.all(
        Array.from({ length: 25 }, () => store().update<{ hits: number }>(pk, 'C', { add: { hits: 1 } })),
      );
      expect(results.map((r) => r.hits).sort((a, b) => a - b)).toEqual(Array.from({ length: 25 }, (_, i) => i + 2));
      expect(await store().get(pk, 'C')).toEqual({ hits: 26 });
    });

    it('with a condition: rejected → WriteConflict and no change; accepted → applied', async () => {
      const pk = partition('cond-update');
      await store().put({ pk, sk: 'A' }, { status: 'pending', n: 0 });
      const when = (s: string): Condition => [{ attr: 'status', equals: s }];
      await expect(
        store().update(pk, 'A', { set: { status: 'processing' }, add: { n: 1 }, condition: when('ready') }),
      ).rejects.toBeInstanceOf(WriteConflict);
      expect(await store().get(pk, 'A')).toEqual({ status: 'pending', n: 0 });
      expect(
        await store().update(pk, 'A', { set: { status: 'processing' }, add: { n: 1 }, condition: when('pending') }),
      ).toEqual({ status: 'processing', n: 1 });
      // itemExists guards against creating an item by accident.
      await expect(
        store().update(pk, 'nope', { add: { n: 1 }, condition: [{ itemExists: true }] }),
      ).rejects.toBeInstanceOf(WriteConflict);
      expect(await store().get(pk, 'nope')).toBeUndefined();
    });

    it('of two racing conditional writes on the same state, exactly one wins', async () => {
      const pk = partition('race');
      await store().put({ pk, sk: 'J' }, { status: 'running' });
      const outcomes = await Promise.allSettled(
        ['complete', 'stopped'].map((to) =>
          store().update(pk, 'J', { set: { status: to }, condition: [{ attr: 'status', equals: 'running' }] }),
        ),
      );
      expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
      const lost = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
      expect(lost.reason).toBeInstanceOf(WriteConflict);
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
        await store().put({ pk, sk, gsi1pk: `${pk}#BYDATE`, gsi1sk: g }, { sk_copy: sk, kind });
      }
    };

    it('by partition, ascending by sort key; beginsWith narrows; newestFirst reverses', async () => {
      const pk = partition('query');
      await seed(pk);
      const all = await store().query<{ sk_copy: string }>(pk);
      expect(all.items.map((i) => i.sk_copy)).toEqual([
        'DATASET#a',
        'DSV#a#000001',
        'DSV#a#000002',
        'DSV#b#000001',
        'JOB#1',
      ]);
      expect(all.nextKey).toBeUndefined();
      const a = await store().query<{ sk_copy: string }>(pk, { beginsWith: 'DSV#a#' });
      expect(a.items.map((i) => i.sk_copy)).toEqual(['DSV#a#000001', 'DSV#a#000002']);
      const newest = await store().query<{ sk_copy: string }>(pk, { beginsWith: 'DSV#', newestFirst: true });
      expect(newest.items.map((i) => i.sk_copy)).toEqual(['DSV#b#000001', 'DSV#a#000002', 'DSV#a#000001']);
      expect((await store().query(pk, { beginsWith: 'NOPE#' })).items).toEqual([]);
      expect((await store().query(partition('empty'))).items).toEqual([]);
    });

    it('on the gsi1 index, ordered by gsi1sk', async () => {
      const pk = partition('gsi');
      await seed(pk);
      const byDate = await store().query<{ sk_copy: string }>(`${pk}#BYDATE`, { index: 'gsi1', newestFirst: true });
      expect(byDate.items.map((i) => i.sk_copy)).toEqual([
        'JOB#1',
        'DATASET#a',
        'DSV#b#000001',
        'DSV#a#000002',
        'DSV#a#000001',
      ]);
      const jan0 = await store().query<{ sk_copy: string }>(`${pk}#BYDATE`, {
        index: 'gsi1',
        beginsWith: '2024-01-0',
        limit: 2,
      });
      expect(jan0.items.map((i) => i.sk_copy)).toEqual(['DSV#a#000001', 'DSV#a#000002']);
      expect(jan0.nextKey).toBeDefined();
      const rest = await store().query<{ sk_copy: string }>(`${pk}#BYDATE`, {
        index: 'gsi1',
        beginsWith: '2024-01-0',
        startKey: jan0.nextKey!,
      });
      expect(rest.items.map((i) => i.sk_copy)).toEqual(['DSV#b#000001', 'DATASET#a', 'JOB#1']);
      // Items without gsi1 keys are not on the index.
      await store().put({ pk, sk: 'NOINDEX' }, { kind: 'v' });
      expect((await store().query(`${pk}#BYDATE`, { index: 'gsi1' })).items).toHaveLength(5);
    });

    it('filters beside the key condition', async () => {
      const pk = partition('filter');
      await seed(pk);
      const jobs = await store().query<{ sk_copy: string }>(pk, { filter: [{ attr: 'kind', equals: 'job' }] });
      expect(jobs.items.map((i) => i.sk_copy)).toEqual(['JOB#1']);
      const heads = await store().query<{ sk_copy: string }>(pk, {
        beginsWith: 'D',
        filter: [
          {
            anyOf: [
              { attr: 'kind', equals: 'head' },
              { attr: 'kind', equals: 'job' },
            ],
          },
        ],
      });
      expect(heads.items.map((i) => i.sk_copy)).toEqual(['DATASET#a']);
      const all = await store().queryAll<{ sk_copy: string }>(pk, {
        filter: [{ attr: 'kind', equals: 'v' }],
        newestFirst: true,
      });
      expect(all.map((i) => i.sk_copy)).toEqual(['DSV#b#000001', 'DSV#a#000002', 'DSV#a#000001']);
    });

    it('limit counts items read before the filter, so a filtered page may come back short', async () => {
      const pk = partition('filter-limit');
      for (let i = 0; i < 6; i += 1) await store().put({ pk, sk: `I#${i}` }, { i, even: i % 2 === 0 });
      const page = await store().query<{ i: number }>(pk, { limit: 3, filter: [{ attr: 'even', equals: true }] });
      expect(page.items.map((x) => x.i)).toEqual([0, 2]);
      expect(page.nextKey).toBeDefined();
    });

    it('pages with limit and startKey, in both directions; queryAll stops at max', async () => {
      const pk = partition('pages');
      for (let i = 0; i < 7; i += 1) await store().put({ pk, sk: `I#${i}` }, { i });
      for (const newestFirst of [false, true]) {
        const seen: number[] = [];
        let startKey: Record<string, unknown> | undefined;
        let pages = 0;
        do {
          const page: { items: { i: number }[]; nextKey?: Record<string, unknown> } = await store().query<{
            i: number;
          }>(pk, { limit: 3, newestFirst, ...(startKey ? { startKey } : {}) });
          expect(page.items.length).toBeLessThanOrEqual(3);
          seen.push(...page.items.map((x) => x.i));
          startKey = page.nextKey;
          pages += 1;
        } while (startKey);
        expect(pages).toBeGreaterThanOrEqual(3);
        expect(seen).toEqual(newestFirst ? [6, 5, 4, 3, 2, 1, 0] : [0, 1, 2, 3, 4, 5, 6]);
      }
      expect((await store().queryAll<{ i: number }>(pk, { max: 2 })).map((x) => x.i)).toEqual([0, 1]);
    });
  });
}

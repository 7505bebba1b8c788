import {
  codePointSlice,
  DatasetSummary,
  validateRow,
  type RowError,
  type TaskType,
} from '../../src/core/datasets/rows';

const ok = (raw: unknown, n = 1) => {
  const r = validateRow(raw, n);
  expect(r.errors).toEqual([]);
  expect(r.row).toBeDefined();
  return r;
};
const bad = (raw: unknown, n = 1) => {
  const r = validateRow(raw, n);
  expect(r.errors.length).toBeGreaterThan(0);
  expect(r.row).toBeUndefined();
  for (const e of r.errors) expect(e.row).toBe(n);
  return r.errors;
};
const fields = (errors: RowError[]) => errors.map((e) => e.field);

describe('validateRow: shape and columns', () => {
  it('rejects non-object rows', () => {
    for (const v of [null, 'text', 3, [1, 2], true])
      expect(bad(v)[0]).toMatchObject({ field: null, message: expect.stringMatching(/JSON object/) });
  });

  it('requires a non-empty text and at least one label column', () => {
    expect(fields(bad({ label: 'a' }))).toEqual(['text']);
    expect(fields(bad({ text: '', label: 'a' }))).toEqual(['text']);
    expect(fields(bad({ text: '   ', label: 'a' }))).toEqual(['text']);
    expect(fields(bad({ text: 5, label: 'a' }))).toEqual(['text']);
    expect(bad({ text: 'hello' })[0]).toMatchObject({ field: null, message: expect.stringMatching(/no label column/) });
  });

  it('names unknown columns, one error each', () => {
    const errors = bad({ text: 'hi', label: 'a', colour: 'red', Label: 'x' }, 7);
    expect(errors).toEqual([
      expect.objectContaining({ row: 7, field: 'colour', message: expect.stringMatching(/unknown column 'colour'/) }),
      expect.objectContaining({ row: 7, field: 'Label' }),
    ]);
  });

  it('keeps id and metadata, and checks their types', () => {
    expect(ok({ id: 'r1', metadata: { source: 'x' }, text: 'hi', label: 'a' }).row).toEqual({
      id: 'r1',
      metadata: { source: 'x' },
      text: 'hi',
      label: 'a',
    });
    expect(ok({ id: 3, text: 'hi', label: 'a' }).row?.id).toBe(3);
    expect(fields(bad({ id: { a: 1 }, text: 'hi', label: 'a' }))).toEqual(['id']);
    expect(fields(bad({ metadata: 'x', text: 'hi', label: 'a' }))).toEqual(['metadata']);
  });

  it('rejects a row that mixes encoder and decoder columns', () => {
    const errors = bad({ text: 'hi', label: 'a', messages: [{ role: 'assistant', content: 'x' }] });
    expect(errors[0]!.message).toMatch(/mixes encoder columns/);
    expect(bad({ text: 'hi', prompt: 'p', answer: 'a' })[0]!.message).toMatch(/mixes/);
  });
});

describe('validateRow: classification (docs/reference/decisions.md#dataset-rows rules 4, 5)', () => {
  it('accepts label (single) and labels (multi)', () => {
    expect(ok({ text: 'great', label: 'positive' })).toMatchObject({
      row: { text: 'great', label: 'positive' },
      tasks: ['classification'],
    });
    expect(ok({ text: 'great', labels: ['a', 'b'] })).toMatchObject({
      row: { labels: ['a', 'b'] },
      tasks: ['multi_label_classification'],
    });
  });

  it('rejects label and labels in one row', () => {
    const errors = bad({ text: 'x', label: 'a', labels: ['a'] });
    expect(errors[0]).toMatchObject({ field: 'label', message: expect.stringMatching(/not both/) });
  });

  it('checks label and labels types', () => {
    expect(fields(bad({ text: 'x', label: '' }))).toContain('label');
    expect(fields(bad({ text: 'x', label: ['a'] }))).toContain('label');
    expect(fields(bad({ text: 'x', labels: 'a|b' }))).toContain('labels');
    expect(fields(bad({ text: 'x', labels: ['a', 3, ''] }))).toEqual(['labels[1]', 'labels[2]']);
    expect(bad({ text: 'x', labels: ['a', 'a'] })[0]).toMatchObject({
      field: 'labels',
      message: expect.stringMatching(/repeat/),
    });
  });
});

describe('validateRow: entities (docs/reference/decisions.md#dataset-rows)', () => {
  const text = 'Tim Cook runs Apple in Cupertino.';

  it('accepts objects with and without offsets, and [text, label] pairs', () => {
    const r = ok({
      text,
      entities: [
        { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
        { text: 'Apple', label: 'company' },
        ['Cupertino', 'city'],
      ],
    });
    expect(r.tasks).toEqual(['ner']);
    expect(r.row?.entities).toEqual([
      { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
      { text: 'Apple', label: 'company' },
      { text: 'Cupertino', label: 'city' },
    ]);
  });

  it('counts offsets in code points, so emoji before an entity shift UTF-16 offsets but not ours', () => {
    const emoji = '🎉🎉 Tim Cook 👍 runs Apple';
    // In code points: two emoji + space = 3, so "Tim Cook" is [3, 11). In UTF-16 units it is [5, 13).
    expect(codePointSlice(emoji, 3, 11)).toBe('Tim Cook');
    ok({
      text: emoji,
      entities: [
        { text: 'Tim Cook', label: 'person', start: 3, end: 11 },
        { text: 'Apple', label: 'company', start: 19, end: 24 },
      ],
    });
    const utf16 = bad({ text: emoji, entities: [{ text: 'Tim Cook', label: 'person', start: 5, end: 13 }] });
    expect(utf16[0]).toMatchObject({ field: 'entities[0]', message: expect.stringMatching(/code points/) });
    // The end bound is the code-point length (24), not the UTF-16 length (27).
    expect(emoji.length).toBe(27);
    expect(
      bad({ text: emoji, entities: [{ text: 'Apple', label: 'company', start: 22, end: 27 }] })[0]!.message,
    ).toMatch(/<= 24/);
  });

  it('rejects offsets that are out of range, reversed, non-integer or given alone', () => {
    for (const [start, end] of [
      [-1, 3],
      [3, 3],
      [5, 2],
      [0, 99],
      [0.5, 3],
      ['0', '3'],
    ]) {
      expect(fields(bad({ text, entities: [{ text: 'Tim', label: 'p', start, end }] }))).toEqual(['entities[0]']);
    }
    expect(bad({ text, entities: [{ text: 'Tim', label: 'p', start: 0 }] })[0]!.message).toMatch(/both start and end/);
  });

  it('rejects entity text that is not in the row text, and malformed items', () => {
    expect(bad({ text, entities: [['Satya', 'person']] })[0]).toMatchObject({
      field: 'entities[0].text',
      message: expect.stringMatching(/verbatim/),
    });
    expect(
      fields(
        bad({
          text,
          entities: [
            { text: 'Apple', label: 'c' },
            { text: 'tim cook', label: 'p' },
          ],
        }),
      ),
    ).toEqual(['entities[1].text']);
    expect(fields(bad({ text, entities: [['Apple']] }))).toEqual(['entities[0]']);
    expect(fields(bad({ text, entities: [['Apple', 'c', 'extra']] }))).toEqual(['entities[0]']);
    expect(fields(bad({ text, entities: ['Apple'] }))).toEqual(['entities[0]']);
    expect(fields(bad({ text, entities: [{ text: 'Apple', label: '' }] }))).toEqual(['entities[0].label']);
    expect(fields(bad({ text, entities: [{ text: 'Apple', label: 'c', score: 1 }] }))).toEqual(['entities[0]']);
    expect(fields(bad({ text, entities: { Apple: 'company' } }))).toEqual(['entities']);
  });
});

describe('validateRow: relations', () => {
  const text = 'Tim Cook works for Apple.';
  it('accepts verbatim head and tail', () => {
    const r = ok({ text, relations: [{ relation: 'works for', head: 'Tim Cook', tail: 'Apple' }] });
    expect(r.tasks).toEqual(['relations']);
    expect(r.row?.relations).toEqual([{ relation: 'works for', head: 'Tim Cook', tail: 'Apple' }]);
  });
  it('rejects heads and tails that are not substrings, and malformed entries', () => {
    expect(bad({ text, relations: [{ relation: 'works for', head: 'Tim Cook', tail: 'Google' }] })[0]).toMatchObject({
      field: 'relations[0].tail',
      message: expect.stringMatching(/verbatim/),
    });
    expect(fields(bad({ text, relations: [{ relation: '', head: 'Tim Cook', tail: 'Apple' }] }))).toEqual([
      'relations[0].relation',
    ]);
    expect(fields(bad({ text, relations: [{ relation: 'r', head: 'Tim Cook', tail: 'Apple', score: 1 }] }))).toEqual([
      'relations[0]',
    ]);
    expect(fields(bad({ text, relations: ['Tim Cook works for Apple'] }))).toEqual(['relations[0]']);
    expect(fields(bad({ text, relations: { relation: 'r' } }))).toEqual(['relations']);
  });
});

describe('validateRow: json_structures (docs/reference/decisions.md#dataset-rows rules 1, 2)', () => {
  const text = 'Order: 2 large pizzas and a small salad, deliver to 12 Main St.';
  it('accepts str and list fields, several instances and several structure names', () => {
    const js = [
      { order: { item: 'pizzas', sizes: ['large'] } },
      { order: { item: 'salad', sizes: ['small'] } },
      { address: { street: '12 Main St' } },
    ];
    const r = ok({ text, json_structures: js });
    expect(r.tasks).toEqual(['structures']);
    expect(r.row?.json_structures).toEqual(js);
  });

  it('requires every value, each list entry included, to be a verbatim substring', () => {
    expect(bad({ text, json_structures: [{ order: { item: 'burger' } }] })[0]).toMatchObject({
      field: 'json_structures[0].order.item',
      message: expect.stringMatching(/verbatim/),
    });
    const errors = bad({ text, json_structures: [{ order: { item: 'pizzas', sizes: ['large', 'medium', 'small'] } }] });
    expect(fields(errors)).toEqual(['json_structures[0].order.sizes[1]']);
    // Case matters: verbatim means verbatim.
    expect(fields(bad({ text, json_structures: [{ order: { item: 'Pizzas' } }] }))).toEqual([
      'json_structures[0].order.item',
    ]);
  });

  it('rejects malformed structures', () => {
    expect(fields(bad({ text, json_structures: { order: { item: 'pizzas' } } }))).toEqual(['json_structures']);
    expect(fields(bad({ text, json_structures: [{}] }))).toEqual(['json_structures[0]']);
    expect(fields(bad({ text, json_structures: ['pizzas'] }))).toEqual(['json_structures[0]']);
    expect(fields(bad({ text, json_structures: [{ order: 'pizzas' }] }))).toEqual(['json_structures[0].order']);
    expect(fields(bad({ text, json_structures: [{ order: { qty: 2 } }] }))).toEqual(['json_structures[0].order.qty']);
    expect(fields(bad({ text, json_structures: [{ order: { item: '' } }] }))).toEqual([
      'json_structures[0].order.item',
    ]);
    expect(fields(bad({ text, json_structures: [{ order: { sizes: [['large']] } }] }))).toEqual([
      'json_structures[0].order.sizes[0]',
    ]);
  });

  it('combines every encoder head in one row (docs/reference/decisions.md#dataset-rows rule 3)', () => {
    const t = 'Tim Cook works for Apple in Cupertino.';
    const r = ok({
      text: t,
      label: 'business',
      entities: [['Tim Cook', 'person']],
      relations: [{ relation: 'works for', head: 'Tim Cook', tail: 'Apple' }],
      json_structures: [{ employment: { person: 'Tim Cook', employer: 'Apple' } }],
    });
    expect([...r.tasks].sort()).toEqual(['classification', 'ner', 'relations', 'structures']);
  });
});

describe('validateRow: decoder rows', () => {
  it('accepts chat rows with string or block content', () => {
    const r = ok({
      messages: [
        { role: 'system', content: 'be brief' },
        { role: 'user', content: [{ type: 'text', text: 'hi' }] },
        { role: 'assistant', content: 'hello' },
      ],
    });
    expect(r.tasks).toEqual(['sft']);
  });
  it('rejects bad chat rows', () => {
    expect(fields(bad({ messages: [] }))).toEqual(['messages']);
    expect(fields(bad({ messages: [{ role: 'user', content: 'hi' }] }))).toEqual(['messages']);
    expect(
      fields(
        bad({
          messages: [
            { role: 'wizard', content: 'hi' },
            { role: 'assistant', content: 'x' },
          ],
        }),
      ),
    ).toEqual(['messages[0].role']);
    expect(fields(bad({ messages: [{ role: 'assistant', content: 5 }] }))).toEqual(['messages[0].content']);
    expect(fields(bad({ messages: [{ role: 'assistant', content: [{ type: 'image', url: 'x' }] }] }))).toEqual([
      'messages[0].content',
    ]);
    expect(fields(bad({ messages: ['hi'] }))).toEqual(['messages[0]']);
    expect(fields(bad({ messages: [{ role: 'assistant', content: 'x' }], prompt: 'p' }))).toEqual(['prompt']);
  });
  it('accepts dpo and grpo rows and rejects incomplete ones', () => {
    expect(ok({ prompt: 'p', chosen: 'a', rejected: 'b' }).tasks).toEqual(['dpo']);
    expect(ok({ prompt: 'p', answer: '42' }).tasks).toEqual(['grpo']);
    expect(ok({ prompt: 'p' }).tasks).toEqual(['grpo']);
    expect(fields(bad({ prompt: 'p', chosen: 'a' }))).toEqual(['rejected']);
    expect(fields(bad({ prompt: 'p', chosen: 'a', rejected: 'b', answer: 'c' }))).toEqual(['answer']);
    expect(fields(bad({ chosen: 'a', rejected: 'b' }))).toEqual(['prompt']);
    expect(fields(bad({ prompt: 'p', answer: 42 }))).toEqual(['answer']);
    // a prompt may be the conversation so far (a worked example as earlier turns), ending with the user's turn
    const shot = [
      { role: 'user', content: 'Repeat: house' },
      { role: 'assistant', content: 'house' },
      { role: 'user', content: 'Repeat: tree' },
    ];
    expect(ok({ prompt: shot, answer: 'tree' }).tasks).toEqual(['grpo']);
    expect(ok({ prompt: shot, chosen: 'tree', rejected: 'no' }).tasks).toEqual(['dpo']);
    expect(fields(bad({ prompt: shot.slice(0, 2), answer: 'house' }))).toEqual(['prompt']);
    expect(fields(bad({ prompt: [{ role: 'user', content: 7 }], answer: 'a' }))).toEqual(['prompt[0].content']);
    expect(fields(bad({ prompt: [], answer: 'a' }))).toEqual(['prompt']);
  });
  it("normalizes OpenAI's preference format to a dpo row; errors name OpenAI's fields", () => {
    const input = { messages: [{ role: 'user', content: 'Say hi' }] };
    const pref = (over: Record<string, unknown> = {}) => ({
      input,
      preferred_output: [{ role: 'assistant', content: 'Hi!' }],
      non_preferred_output: [{ role: 'assistant', content: [{ type: 'text', text: 'No.' }] }],
      ...over,
    });
    const r = ok(pref());
    expect(r.tasks).toEqual(['dpo']);
    expect(r.row).toEqual({ prompt: input.messages, chosen: 'Hi!', rejected: 'No.' });
    expect(fields(bad(pref({ input: 'Say hi' })))).toEqual(['input']);
    expect(fields(bad(pref({ input: { messages: input.messages, tools: [] } })))).toEqual(['input.tools']);
    expect(fields(bad(pref({ input: { messages: [{ role: 'assistant', content: 'x' }] } })))).toEqual([
      'input.messages',
    ]);
    expect(fields(bad(pref({ preferred_output: [] })))).toEqual(['preferred_output']);
    expect(fields(bad(pref({ preferred_output: [{ role: 'user', content: 'x' }] })))).toEqual([
      'preferred_output[0].role',
    ]);
    expect(fields(bad(pref({ non_preferred_output: [{ role: 'assistant', content: ' ' }] })))).toEqual([
      'non_preferred_output[0].content',
    ]);
    expect(fields(bad({ input, preferred_output: [{ role: 'assistant', content: 'Hi' }] }))).toEqual([
      'non_preferred_output',
    ]);
    expect(fields(bad(pref({ chosen: 'x' })))).toEqual(['chosen']);
  });
});

describe('DatasetSummary', () => {
  const feed = (rows: unknown[]) => {
    const s = new DatasetSummary();
    const errors: RowError[] = [];
    rows.forEach((raw, i) => {
      const r = validateRow(raw, i + 1);
      expect(r.errors).toEqual([]);
      errors.push(...s.add(r.row!, r.tasks, i + 1));
    });
    errors.push(...s.finish());
    return { s, errors, d: s.describe() };
  };

  it('derives vocabulary, entity types, relation types, structures and task types', () => {
    const { errors, d } = feed([
      {
        text: 'Tim Cook runs Apple',
        labels: ['tech', 'business'],
        entities: [
          ['Tim Cook', 'person'],
          ['Apple', 'company'],
        ],
      },
      {
        text: 'Apple hired Tim Cook',
        labels: ['business'],
        relations: [{ relation: 'employs', head: 'Apple', tail: 'Tim Cook' }],
      },
      {
        text: 'two large pizzas',
        labels: ['food'],
        json_structures: [{ order: { item: 'pizzas', sizes: ['large'] } }],
      },
    ]);
    expect(errors).toEqual([]);
    expect(d).toEqual({
      row_count: 3,
      task_types: ['multi_label_classification', 'ner', 'relations', 'structures'],
      label_vocabulary: ['business', 'food', 'tech'],
      entity_types: ['company', 'person'],
      relation_types: ['employs'],
      structures: { order: { item: { dtype: 'str' }, sizes: { dtype: 'list' } } },
    });
  });

  it('rejects a dataset that mixes label and labels, naming the first row of each', () => {
    const { errors } = feed([
      { text: 'a', label: 'x' },
      { text: 'b', label: 'y' },
      { text: 'c', labels: ['x'] },
      { text: 'd', labels: ['z'] },
    ]);
    expect(errors).toEqual([
      { row: 3, field: 'labels', message: expect.stringMatching(/mixes 'label' \(first at row 1\) and 'labels'/) },
      { row: 4, field: 'labels', message: expect.any(String) },
    ]);
  });

  it('rejects a field that is a str in one row and a list in another, or in one row', () => {
    const { errors } = feed([
      { text: 'large pizzas', json_structures: [{ order: { size: 'large' } }] },
      { text: 'small salad', json_structures: [{ order: { size: ['small'] } }] },
      {
        text: 'large pizza and small salad',
        json_structures: [{ dish: { size: 'large' } }, { dish: { size: ['small'] } }],
      },
    ]);
    expect(errors).toEqual([
      { row: 2, field: 'json_structures.order.size', message: 'is a list here but a str in earlier rows' },
      { row: 3, field: 'json_structures.dish.size', message: 'is a list here but a str in earlier rows' },
    ]);
  });

  it('rejects an empty dataset, encoder+decoder mixes and mixed decoder kinds', () => {
    expect(new DatasetSummary().finish()).toEqual([{ row: null, field: null, message: 'the dataset has no rows' }]);
    // Rows were read but none was valid: each row already has its own error, so no "no rows" on top.
    expect(new DatasetSummary().finish(3)).toEqual([]);
    expect(
      feed([
        { text: 'a', label: 'x' },
        { prompt: 'p', answer: 'a' },
      ]).errors,
    ).toEqual([{ row: null, field: null, message: expect.stringMatching(/mixes encoder rows/) }]);
    expect(
      feed([
        { prompt: 'p', answer: 'a' },
        { prompt: 'p', chosen: 'a', rejected: 'b' },
      ]).errors,
    ).toEqual([{ row: null, field: null, message: 'the dataset mixes decoder row kinds: dpo, grpo' }]);
    expect(
      feed([
        { messages: [{ role: 'assistant', content: 'x' }] },
        {
          messages: [
            { role: 'user', content: 'q' },
            { role: 'assistant', content: 'a' },
          ],
        },
      ]).errors,
    ).toEqual([]);
  });

  it('accepts every encoder head mixed across rows', () => {
    const tasks = new Set<TaskType>(
      feed([
        { text: 'Tim Cook', entities: [['Tim Cook', 'person']] },
        { text: 'good', label: 'pos' },
        { text: 'a b', json_structures: [{ s: { f: 'a' } }] },
      ]).s.tasks,
    );
    expect([...tasks].sort()).toEqual(['classification', 'ner', 'structures']);
  });
});

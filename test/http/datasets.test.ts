/**
 * Datasets end to end through real HTTP: upload URL → PUT to the presigned storage URL → process →
 * poll → ready | failed, on the local stack (dynalite + s3rver + the in-process worker).
 */
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WorkMessage } from '../../src/core/ports';
import { handleWorkMessage } from '../../src/core/worker';
import { jsonl, TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack.stop());

let counter = 0;
const uniq = (base: string) => `${base}-${++counter}`;

async function reserve(name: string, extra: Record<string, unknown> = {}, key?: string) {
  const res = await stack.call('POST', '/core/datasets/upload/url', {
    ...(key ? { key } : {}),
    body: { dataset_name: name, file_name: 'rows.jsonl', ...extra },
  });
  expect(res.status).toBe(200);
  return res.body as {
    upload_url: string;
    version: number;
    dataset_name: string;
    status: string;
    expires_in: number;
    method: string;
  };
}
async function put(url: string, body: string | Buffer) {
  const res = await fetch(url, { method: 'PUT', body });
  expect(res.status).toBe(200);
}
const processCall = (name: string, version?: number, key?: string) =>
  stack.call('POST', '/core/datasets/upload/process', {
    ...(key ? { key } : {}),
    body: { dataset_name: name, ...(version ? { version } : {}) },
  });
async function settle(name: string, version: number, key?: string) {
  await stack.service.idle();
  const res = await stack.call('GET', `/core/datasets/${name}/${version}`, key ? { key } : {});
  expect(res.status).toBe(200);
  return res.body;
}
const report = async (name: string, version: number) => {
  const res = await stack.call('GET', `/core/datasets/${name}/${version}/report`);
  expect(res.status).toBe(200);
  return res.body;
};
const upload = (name: string, content: string | Buffer, fileName = 'rows.jsonl') =>
  stack.uploadDataset(name, content, { fileName });
const messagesOf = (v: any) => v.errors.map((e: any) => e.message).join('\n');

describe('upload → process → ready, per format', () => {
  it('JSONL with every encoder head: ready, with the derived vocabulary, types and structures', async () => {
    const name = uniq('encoder');
    const rows = [
      {
        text: 'Tim Cook runs Apple in Cupertino.',
        labels: ['business', 'tech'],
        entities: [{ text: 'Tim Cook', label: 'person', start: 0, end: 8 }, ['Apple', 'company']],
      },
      {
        text: 'Apple employs Tim Cook.',
        labels: ['business'],
        relations: [{ relation: 'employs', head: 'Apple', tail: 'Tim Cook' }],
      },
      {
        text: 'Two large pizzas and a small salad to 12 Main St.',
        labels: ['food'],
        json_structures: [
          { order: { item: 'pizzas', sizes: ['large'] } },
          { order: { item: 'salad', sizes: ['small'] } },
          { address: { street: '12 Main St' } },
        ],
      },
    ];
    const url = await reserve(name);
    expect(url).toMatchObject({
      dataset_name: name,
      version: 1,
      status: 'pending_upload',
      method: 'PUT',
      expires_in: 3600,
    });
    // The upload goes to storage, not to the API: no key on the PUT.
    expect(url.upload_url.startsWith(stack.url)).toBe(false);
    await put(url.upload_url, jsonl(rows));
    const started = await processCall(name, 1);
    expect(started.status).toBe(202);
    expect(started.body).toEqual({ dataset_name: name, version: 1, status: 'processing' });
    const v = await settle(name, 1);
    expect(v).toMatchObject({
      name,
      version: 1,
      status: 'ready',
      file_name: 'rows.jsonl',
      row_count: 3,
      task_types: ['multi_label_classification', 'ner', 'relations', 'structures'],
      label_vocabulary: ['business', 'food', 'tech'],
      entity_types: ['company', 'person'],
      relation_types: ['employs'],
      structures: {
        order: { item: { dtype: 'str' }, sizes: { dtype: 'list' } },
        address: { street: { dtype: 'str' } },
      },
      errors: [],
      error_count: 0,
      size_bytes: Buffer.byteLength(jsonl(rows)),
      sha256: createHash('sha256').update(jsonl(rows)).digest('hex'),
    });
    expect(v.processed_at).toEqual(expect.any(String));
    // The normalized rows are published for trainers: shorthand entities become objects.
    const rowsKey = (await stack.svc.blobs.list('datasets/')).find((k) => k.endsWith(`/${name}/v1/rows.jsonl`));
    expect(rowsKey).toBeDefined();
    const published = (await stack.svc.blobs.getText(rowsKey!))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(published).toHaveLength(3);
    expect(published[0].entities).toEqual([
      { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
      { text: 'Apple', label: 'company' },
    ]);
    expect(published[2].json_structures).toEqual(rows[2]!.json_structures);
    // Readable as a dataset and in the list.
    const ds = await stack.call('GET', `/core/datasets/${name}`);
    expect(ds.body).toMatchObject({
      name,
      version: 1,
      status: 'ready',
      versions: [{ version: 1, status: 'ready', row_count: 3 }],
    });
    const list = await stack.call('GET', '/core/datasets');
    expect(list.body.data.find((d: any) => d.name === name)).toMatchObject({ status: 'ready', version: 1 });
  });

  it('a .json array file', async () => {
    const name = uniq('json-array');
    const v = await upload(
      name,
      JSON.stringify([
        { text: 'good film', label: 'positive' },
        { text: 'bad film', label: 'negative' },
      ]),
      'data.json',
    );
    expect(v).toMatchObject({
      status: 'ready',
      file_name: 'data.json',
      row_count: 2,
      task_types: ['classification'],
      label_vocabulary: ['negative', 'positive'],
    });
    const bad = await upload(uniq('json-object'), JSON.stringify({ text: 'x', label: 'y' }), 'data.json');
    expect(bad).toMatchObject({
      status: 'failed',
      errors: [{ row: null, field: null, message: expect.stringMatching(/must be an array/) }],
    });
  });

  it('CSV text,label; labels as a|b or a JSON array; quoted commas and newlines', async () => {
    const single = await upload(
      uniq('csv'),
      'text,label\r\n"Great, really great",positive\r\n"so\nbad",negative\r\n',
      'rows.csv',
    );
    expect(single).toMatchObject({
      status: 'ready',
      row_count: 2,
      task_types: ['classification'],
      label_vocabulary: ['negative', 'positive'],
    });
    const multi = await upload(
      uniq('csv-multi'),
      'text,labels\nrain and wind,weather|outdoors\nsunny beach,"[""weather"",""travel""]"\n',
      'multi.csv',
    );
    expect(multi).toMatchObject({
      status: 'ready',
      task_types: ['multi_label_classification'],
      label_vocabulary: ['outdoors', 'travel', 'weather'],
    });
    const unknown = await upload(uniq('csv-extra'), 'text,label,score\nhello,greeting,0.9\n', 'x.csv');
    expect(unknown).toMatchObject({
      status: 'failed',
      errors: [{ row: 1, field: 'score', message: expect.stringMatching(/unknown column/) }],
    });
    const noText = await upload(uniq('csv-notext'), 'body,label\nhello,greeting\n', 'x.csv');
    expect(noText.status).toBe('failed');
    expect(noText.errors.map((e: any) => e.field)).toEqual(expect.arrayContaining(['body', 'text']));
  });
});

describe('row rules (docs/reference/decisions.md#dataset-rows)', () => {
  it('entities: code-point offsets with emoji pass; UTF-16 offsets fail naming the entity', async () => {
    const text = '🎉🎉 Tim Cook 👍 runs Apple';
    const good = await upload(
      uniq('emoji'),
      jsonl([
        {
          text,
          entities: [
            { text: 'Tim Cook', label: 'person', start: 3, end: 11 },
            { text: 'Apple', label: 'company', start: 19, end: 24 },
          ],
        },
      ]),
    );
    expect(good).toMatchObject({ status: 'ready', task_types: ['ner'], entity_types: ['company', 'person'] });
    const bad = await upload(
      uniq('emoji-utf16'),
      jsonl([{ text, entities: [{ text: 'Tim Cook', label: 'person', start: 5, end: 13 }] }]),
    );
    expect(bad).toMatchObject({
      status: 'failed',
      error_count: 1,
      errors: [{ row: 1, field: 'entities[0]', message: expect.stringMatching(/code points/) }],
    });
  });

  it('[text, label] shorthand and relations must be verbatim substrings', async () => {
    const v = await upload(
      uniq('verbatim'),
      jsonl([
        {
          text: 'Tim Cook works for Apple.',
          entities: [
            ['Tim Cook', 'person'],
            ['apple', 'company'],
          ],
        },
        { text: 'Tim Cook works for Apple.', relations: [{ relation: 'works for', head: 'Tim Cook', tail: 'Google' }] },
        {
          text: 'Tim Cook works for Apple.',
          relations: [{ relation: 'works for', head: 'Tim Cook', tail: 'Apple' }],
          entities: [['Apple', 'company']],
        },
      ]),
    );
    expect(v.status).toBe('failed');
    expect(v.errors).toEqual([
      { row: 1, field: 'entities[1].text', message: expect.stringMatching(/verbatim/) },
      { row: 2, field: 'relations[0].tail', message: expect.stringMatching(/verbatim/) },
    ]);
  });

  it('json_structures: every value, list entries included, must be verbatim', async () => {
    const text = 'Two large pizzas and a small salad.';
    const v = await upload(
      uniq('structs'),
      jsonl([
        { text, json_structures: [{ order: { item: 'pizzas', sizes: ['large', 'medium'] } }] },
        { text, json_structures: [{ order: { item: 'burger', sizes: ['small'] } }] },
        { text, json_structures: [{ order: { item: 'salad', sizes: ['small'] } }] },
      ]),
    );
    expect(v.status).toBe('failed');
    expect(v.errors).toEqual([
      {
        row: 1,
        field: 'json_structures[0].order.sizes[1]',
        message: expect.stringMatching(/'medium' is not a verbatim substring/),
      },
      { row: 2, field: 'json_structures[0].order.item', message: expect.stringMatching(/'burger'/) },
    ]);
  });

  it('label xor labels: within a row, and across the dataset (docs/reference/decisions.md#dataset-rows rule 4)', async () => {
    const inRow = await upload(uniq('both'), jsonl([{ text: 'a', label: 'x', labels: ['x'] }]));
    expect(inRow).toMatchObject({
      status: 'failed',
      errors: [{ row: 1, field: 'label', message: expect.stringMatching(/not both/) }],
    });
    const across = await upload(
      uniq('mixed-labels'),
      jsonl([
        { text: 'a', label: 'x' },
        { text: 'b', label: 'y' },
        { text: 'c', labels: ['x', 'z'] },
      ]),
    );
    expect(across).toMatchObject({
      status: 'failed',
      error_count: 1,
      errors: [{ row: 3, field: 'labels', message: expect.stringMatching(/mixes 'label'/) }],
    });
  });

  it('a structure field that is a str in one row and a list in another fails', async () => {
    const v = await upload(
      uniq('dtype'),
      jsonl([
        { text: 'large pizza', json_structures: [{ order: { size: 'large' } }] },
        { text: 'small salad', json_structures: [{ order: { size: ['small'] } }] },
      ]),
    );
    expect(v).toMatchObject({
      status: 'failed',
      errors: [{ row: 2, field: 'json_structures.order.size', message: 'is a list here but a str in earlier rows' }],
    });
  });

  it('unknown columns fail, named', async () => {
    const v = await upload(uniq('unknown-col'), jsonl([{ text: 'a', label: 'x', lable: 'y' }]));
    expect(v).toMatchObject({
      status: 'failed',
      errors: [{ row: 1, field: 'lable', message: expect.stringMatching(/unknown column 'lable'/) }],
    });
  });

  it('decoder rows: messages (sft), dpo and grpo datasets are ready', async () => {
    const sft = await upload(
      uniq('sft'),
      jsonl([
        {
          messages: [
            { role: 'user', content: 'hi' },
            { role: 'assistant', content: 'hello' },
          ],
        },
        {
          messages: [
            { role: 'system', content: [{ type: 'text', text: 'be brief' }] },
            { role: 'user', content: 'q' },
            { role: 'assistant', content: 'a' },
          ],
        },
      ]),
    );
    expect(sft).toMatchObject({ status: 'ready', task_types: ['sft'], row_count: 2, label_vocabulary: [] });
    expect((await upload(uniq('dpo'), jsonl([{ prompt: 'p', chosen: 'good', rejected: 'bad' }]))).task_types).toEqual([
      'dpo',
    ]);
    expect(
      (await upload(uniq('grpo'), jsonl([{ prompt: '2+2?', answer: '4' }, { prompt: 'free' }]))).task_types,
    ).toEqual(['grpo']);
    const badChat = await upload(
      uniq('bad-chat'),
      jsonl([{ messages: [{ role: 'user', content: 'only a question' }] }]),
    );
    expect(badChat).toMatchObject({
      status: 'failed',
      errors: [{ row: 1, field: 'messages', message: expect.stringMatching(/assistant/) }],
    });
  });

  it('mixing encoder and decoder rows, or decoder kinds, fails', async () => {
    const mixed = await upload(
      uniq('enc-dec'),
      jsonl([
        { text: 'a', label: 'x' },
        { prompt: 'p', answer: 'a' },
      ]),
    );
    expect(mixed).toMatchObject({
      status: 'failed',
      errors: [{ row: null, field: null, message: expect.stringMatching(/mixes encoder rows/) }],
    });
    const inRow = await upload(uniq('enc-dec-row'), jsonl([{ text: 'a', label: 'x', prompt: 'p' }]));
    expect(inRow).toMatchObject({
      status: 'failed',
      errors: [{ row: 1, message: expect.stringMatching(/mixes encoder columns/) }],
    });
    const kinds = await upload(
      uniq('dpo-grpo'),
      jsonl([
        { prompt: 'p', chosen: 'a', rejected: 'b' },
        { prompt: 'q', answer: 'c' },
      ]),
    );
    expect(kinds).toMatchObject({
      status: 'failed',
      errors: [{ row: null, message: 'the dataset mixes decoder row kinds: dpo, grpo' }],
    });
  });

  it('an empty file fails with "no rows"', async () => {
    const v = await upload(uniq('empty'), '\n\n');
    expect(v).toMatchObject({
      status: 'failed',
      row_count: 0,
      errors: [{ row: null, message: 'the dataset has no rows' }],
    });
  });
});

describe('the validation report', () => {
  it('lists every row error: 300 bad rows → 300 in the report, the first 100 on the record', async () => {
    const name = uniq('many-bad');
    const rows = Array.from({ length: 320 }, (_, i) =>
      i % 16 === 15 ? { text: `ok ${i}`, label: 'x' } : { text: `row ${i}`, label: 'x', colour: 'red' },
    );
    expect(rows.filter((r) => 'colour' in r)).toHaveLength(300);
    const v = await upload(name, jsonl(rows));
    expect(v.status).toBe('failed');
    expect(v.error_count).toBe(300);
    expect(v.errors).toHaveLength(100);
    const r = await report(name, 1);
    expect(r).toMatchObject({ dataset_name: name, version: 1, status: 'failed', error_count: 300 });
    expect(r.errors).toHaveLength(300);
    const badRows = rows.map((row, i) => ('colour' in row ? i + 1 : 0)).filter(Boolean);
    expect(r.errors.map((e: any) => e.row)).toEqual(badRows);
    expect(new Set(r.errors.map((e: any) => e.field))).toEqual(new Set(['colour']));
    expect(r.errors.slice(0, 100)).toEqual(v.errors);
  });

  it('for a ready version the report is empty', async () => {
    const name = uniq('clean');
    await upload(name, jsonl([{ text: 'a', label: 'x' }]));
    expect(await report(name, 1)).toEqual({
      dataset_name: name,
      version: 1,
      status: 'ready',
      error_count: 0,
      errors: [],
    });
  });

  it('a version whose processing crashed reads as failed, and its report says why', async () => {
    const team = await stack.newTeam('crash');
    const name = uniq('crashed');
    const url = await reserve(name, {}, team.key);
    // The worker is handed a version whose file is gone (e.g. removed from the bucket by hand).
    await stack.svc.records.update(`TEAM#${team.teamId}`, `DSV#${name}#000001`, { set: { status: 'processing' } });
    const message: WorkMessage = {
      type: 'dataset.process',
      team_id: team.teamId,
      dataset_name: name,
      version: url.version,
    };
    await expect(handleWorkMessage(stack.svc, message)).rejects.toThrow();
    const v = await settle(name, 1, team.key);
    expect(v).toMatchObject({
      status: 'failed',
      error_count: 1,
      errors: [{ row: null, field: null, message: expect.stringMatching(/^processing failed/) }],
    });
    const r = await stack.call('GET', `/core/datasets/${name}/1/report`, { key: team.key });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'failed', error_count: 1, errors: v.errors });
  });
});

describe('bad input', () => {
  it('non-UTF-8 bytes fail only their JSONL line; a non-UTF-8 .json or .csv fails the file', async () => {
    const latin1 = Buffer.from('café', 'latin1');
    const body = Buffer.concat([
      Buffer.from('{"text":"fine 🎉","label":"x"}\n{"text":"'),
      latin1,
      Buffer.from('","label":"x"}\n{"text":"also fine","label":"x"}\n{"text":"bad","label":"x","oops":1}\n'),
    ]);
    const v = await upload(uniq('latin1'), body);
    expect(v.status).toBe('failed');
    expect(v.errors).toEqual([
      { row: 2, field: null, message: 'row is not valid UTF-8 text' },
      { row: 4, field: 'oops', message: expect.any(String) },
    ]);
    expect(v.row_count).toBe(2);
    const json = await upload(
      uniq('latin1-json'),
      Buffer.concat([Buffer.from('[{"text":"'), latin1, Buffer.from('","label":"x"}]')]),
      'd.json',
    );
    expect(json).toMatchObject({ status: 'failed', errors: [{ row: null, message: 'file is not valid UTF-8 text' }] });
    const csv = await upload(
      uniq('latin1-csv'),
      Buffer.concat([Buffer.from('text,label\n'), latin1, Buffer.from(',x\n')]),
      'd.csv',
    );
    expect(csv).toMatchObject({ status: 'failed', errors: [{ message: 'CSV: file is not valid UTF-8 text' }] });
  });

  it('a single 50 MB line is reported (row limit 1 MiB) and the rows around it are still validated', async () => {
    const name = uniq('huge-line');
    const big = Buffer.alloc(50 * 1024 * 1024, 'x');
    const body = Buffer.concat([
      Buffer.from('{"text":"first","label":"a"}\n{"text":"'),
      big,
      Buffer.from(
        '","label":"b"}\n{"text":"third","label":"c"}\n{"text":"fourth","label":"d","extra":true}\n{"text":"fifth","label":"e"}\n',
      ),
    ]);
    const v = await upload(name, body);
    expect(v.status).toBe('failed');
    expect(v.errors).toEqual([
      { row: 2, field: null, message: `row is larger than the ${1024 * 1024} byte row limit` },
      { row: 4, field: 'extra', message: expect.stringMatching(/unknown column/) },
    ]);
    expect(v.row_count).toBe(3);
    expect(v.size_bytes).toBe(body.length);
  }, 60_000);

  it('a CSV record over the row limit fails the version instead of leaving it processing', async () => {
    const rest = Array.from({ length: 2000 }, (_, i) => `row ${i} ${'y'.repeat(100)},c`).join('\n');
    const body = `text,label\nfirst,a\n"${'x'.repeat(1024 * 1024 + 10)}",b\n${rest}\n`;
    const v = await upload(uniq('csv-huge'), body, 'big.csv');
    expect(v.status).toBe('failed');
    expect(v.errors).toEqual([{ row: 2, field: null, message: expect.stringMatching(/^CSV: Max Record Size/) }]);
    expect(v.size_bytes).toBe(Buffer.byteLength(body));
  }, 30_000);

  it('truncated upload: the signed size refuses a short PUT; a short object storage holds anyway → 409, version stays pending_upload; a full re-PUT then works', async () => {
    const name = uniq('truncated');
    const content = jsonl([
      { text: 'one', label: 'a' },
      { text: 'two', label: 'b' },
    ]);
    const url = await reserve(name, { size_bytes: Buffer.byteLength(content) });
    // the declared size is signed into the URL: storage itself refuses another length
    expect((await fetch(url.upload_url, { method: 'PUT', body: content.slice(0, 20) })).status).toBe(403);
    // a truncated object that got there some other way (a URL issued before sizes were signed)
    const key = decodeURIComponent(new URL(url.upload_url).pathname).split('/').slice(2).join('/');
    await stack.svc.blobs.put(key, content.slice(0, 20));
    const res = await processCall(name, url.version);
    expect(res.status).toBe(409);
    expect(res.body.detail).toMatch(/truncated/);
    expect(res.body.detail).toMatch(new RegExp(`${Buffer.byteLength(content)}.*20 bytes`));
    expect((await stack.call('GET', `/core/datasets/${name}/1`)).body.status).toBe('pending_upload');
    await put(url.upload_url, content);
    expect((await processCall(name, url.version)).status).toBe(202);
    expect(await settle(name, 1)).toMatchObject({
      status: 'ready',
      row_count: 2,
      size_bytes: Buffer.byteLength(content),
    });
  });

  it('declared sha256: a mismatch fails the version, a match is ready', async () => {
    const content = jsonl([{ text: 'one', label: 'a' }]);
    const sha = createHash('sha256').update(content).digest('hex');
    const good = await stack.uploadDataset(uniq('sha-ok'), content, { declare: { sha256: sha.toUpperCase() } });
    expect(good).toMatchObject({ status: 'ready', sha256: sha });
    const name = uniq('sha-bad');
    const url = await reserve(name, { sha256: sha });
    await put(url.upload_url, content.replace('one', 'two'));
    expect((await processCall(name)).status).toBe(202);
    const bad = await settle(name, 1);
    expect(bad).toMatchObject({
      status: 'failed',
      errors: [{ row: null, message: expect.stringMatching(/sha256 .* not the declared/) }],
    });
  });

  it('process before the PUT → 409; processing twice → 409; unknown dataset → 404', async () => {
    const name = uniq('early');
    const url = await reserve(name);
    const early = await processCall(name, url.version);
    expect(early.status).toBe(409);
    expect(early.body.detail).toMatch(/No file has been uploaded/);
    expect((await stack.call('GET', `/core/datasets/${name}/1`)).body.status).toBe('pending_upload');
    await put(url.upload_url, jsonl([{ text: 'a', label: 'x' }]));
    expect((await processCall(name, url.version)).status).toBe(202);
    await stack.service.idle();
    const again = await processCall(name, url.version);
    expect(again.status).toBe(409);
    expect(again.body.detail).toMatch(/already ready/);
    expect((await processCall(uniq('never'))).status).toBe(404);
    expect((await processCall(name, 7)).status).toBe(404);
  });

  it('a declared size over the dataset limit → 413', async () => {
    const res = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: uniq('huge'), file_name: 'a.jsonl', size_bytes: 513 * 1024 * 1024 },
    });
    expect(res.status).toBe(413);
    expect(res.body.detail).toMatch(/limit/);
  });
});

describe('names, versions and request validation', () => {
  it('a duplicate name → 409; new_version: true → version 2, and both versions stay readable', async () => {
    const name = uniq('versions');
    await upload(name, jsonl([{ text: 'a', label: 'x' }]));
    const dup = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: name, file_name: 'rows.jsonl' },
    });
    expect(dup.status).toBe(409);
    expect(dup.body.detail).toMatch(/new_version/);
    const v2 = await stack.uploadDataset(
      name,
      jsonl([
        { text: 'b', label: 'y' },
        { text: 'c', label: 'z' },
      ]),
      { newVersion: true },
    );
    expect(v2).toMatchObject({ version: 2, status: 'ready', label_vocabulary: ['y', 'z'] });
    const ds = await stack.call('GET', `/core/datasets/${name}`);
    expect(ds.body).toMatchObject({ version: 2, row_count: 2 });
    expect(ds.body.versions.map((v: any) => [v.version, v.status])).toEqual([
      [1, 'ready'],
      [2, 'ready'],
    ]);
    expect((await stack.call('GET', `/core/datasets/${name}/1`)).body).toMatchObject({
      version: 1,
      label_vocabulary: ['x'],
    });
    // process without a version picks the newest one
    const v3 = await reserve(name, { new_version: true });
    expect(v3.version).toBe(3);
    await put(v3.upload_url, jsonl([{ text: 'd', label: 'w' }]));
    expect((await processCall(name)).body).toEqual({ dataset_name: name, version: 3, status: 'processing' });
    await stack.service.idle();
  });

  it('new_version on a name not yet taken creates version 1; concurrent new versions get distinct numbers', async () => {
    const name = uniq('fresh');
    expect((await reserve(name, { new_version: true })).version).toBe(1);
    const many = await Promise.all(
      Array.from({ length: 6 }, () =>
        stack.call('POST', '/core/datasets/upload/url', {
          body: { dataset_name: name, file_name: 'rows.jsonl', new_version: true },
        }),
      ),
    );
    expect(many.map((r) => r.status)).toEqual(Array(6).fill(200));
    expect(many.map((r) => r.body.version).sort((a, b) => a - b)).toEqual([2, 3, 4, 5, 6, 7]);
    expect((await stack.call('GET', `/core/datasets/${name}`)).body.versions).toHaveLength(7);
  });

  it('concurrent process calls for one version: exactly one is accepted', async () => {
    const name = uniq('race');
    const url = await reserve(name);
    await put(url.upload_url, jsonl([{ text: 'a', label: 'x' }]));
    const results = await Promise.all(Array.from({ length: 5 }, () => processCall(name, 1)));
    expect(results.map((r) => r.status).sort()).toEqual([202, 409, 409, 409, 409]);
    expect((await settle(name, 1)).status).toBe('ready');
  });

  it.each([
    ['dataset_name', '../x'],
    ['dataset_name', 'a/b'],
    ['dataset_name', '..'],
    ['dataset_name', 'a..b'],
    ['dataset_name', ''],
    ['dataset_name', 'a b'],
    ['file_name', '../x.jsonl'],
    ['file_name', 'a/b.jsonl'],
    ['file_name', '..'],
    ['file_name', '..jsonl'],
    ['file_name', 'a\\b.jsonl'],
    ['file_name', 'rows.txt'],
    ['file_name', 'rows'],
  ])('rejects %s %j with 422 naming the field', async (field, value) => {
    const body = { dataset_name: 'fine', file_name: 'rows.jsonl', [field]: value };
    const res = await stack.call('POST', '/core/datasets/upload/url', { body });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual(expect.any(String));
    expect(res.body.errors.map((e: any) => e.loc)).toContainEqual(['body', field]);
  });

  it('rejects unknown body fields and wrong types with 422', async () => {
    const extra = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: 'x', file_name: 'a.jsonl', format: 'jsonl' },
    });
    expect(extra.status).toBe(422);
    expect(extra.body.errors[0]).toMatchObject({ loc: ['body', 'format'], type: 'extra_forbidden' });
    const types = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: 'x', file_name: 'a.jsonl', size_bytes: -1, sha256: 'abc', new_version: 'yes' },
    });
    expect(types.status).toBe(422);
    expect(types.body.errors.map((e: any) => e.loc.join('.'))).toEqual(
      expect.arrayContaining(['body.size_bytes', 'body.sha256', 'body.new_version']),
    );
    const proc = await stack.call('POST', '/core/datasets/upload/process', {
      body: { dataset_name: 'x', version: 1, force: true },
    });
    expect(proc.status).toBe(422);
    expect(proc.body.errors[0].loc).toEqual(['body', 'force']);
  });

  it('GET of an unknown dataset or version → 404; a malformed version → 422', async () => {
    const name = uniq('known');
    await upload(name, jsonl([{ text: 'a', label: 'x' }]));
    expect((await stack.call('GET', `/core/datasets/${uniq('unknown')}`)).status).toBe(404);
    const missing = await stack.call('GET', `/core/datasets/${name}/2`);
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toMatch(/no version 2/);
    expect((await stack.call('GET', `/core/datasets/${name}/2/report`)).status).toBe(404);
    expect((await stack.call('GET', `/core/datasets/${uniq('unknown')}/1/report`)).status).toBe(404);
    for (const bad of ['abc', '0', '-1', '1.5'])
      expect((await stack.call('GET', `/core/datasets/${name}/${bad}`)).status).toBe(422);
    expect((await stack.call('GET', '/core/datasets/..')).status).not.toBe(200);
  });
});

describe('delete and team isolation', () => {
  it('delete removes every version record and every file', async () => {
    const team = await stack.newTeam('deleter');
    const name = uniq('doomed');
    const keep = uniq('doomed-keep');
    await stack.uploadDataset(name, jsonl([{ text: 'a', label: 'x' }]), { key: team.key });
    await stack.uploadDataset(name, jsonl([{ text: 'a', label: 'x', bad: 1 }]), { key: team.key, newVersion: true });
    await stack.uploadDataset(keep, jsonl([{ text: 'a', label: 'x' }]), { key: team.key });
    const prefix = `datasets/${team.teamId}/${name}/`;
    const before = await stack.svc.blobs.list('datasets/');
    const uploadId = /^[0-9a-f-]{36}$/;
    const mine = before.filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length).split('/'));
    expect(mine.map((parts) => parts.map((p) => (uploadId.test(p) ? '<upload_id>' : p)).join('/')).sort()).toEqual([
      'v1/rows.jsonl',
      'v1/source/<upload_id>/rows.jsonl',
      'v2/report.json',
      'v2/source/<upload_id>/rows.jsonl',
    ]);
    const res = await stack.call('DELETE', `/core/datasets/${name}`, { key: team.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ name, deleted: true });
    const after = await stack.svc.blobs.list('datasets/');
    expect(after.filter((k) => k.startsWith(prefix))).toEqual([]);
    expect(after.filter((k) => k.startsWith(`datasets/${team.teamId}/${keep}/`)).length).toBe(2);
    const items = await stack.svc.records.queryAll<Record<string, unknown>>(`TEAM#${team.teamId}`, {});
    expect(items.filter((i) => i.name === name)).toEqual([]);
    expect((await stack.call('GET', `/core/datasets/${name}`, { key: team.key })).status).toBe(404);
    expect((await stack.call('GET', `/core/datasets/${name}/1`, { key: team.key })).status).toBe(404);
    expect((await stack.call('DELETE', `/core/datasets/${name}`, { key: team.key })).status).toBe(404);
    expect((await stack.call('GET', '/core/datasets', { key: team.key })).body.data.map((d: any) => d.name)).toEqual([
      keep,
    ]);
    // The name is free again and starts over at version 1.
    expect(await stack.uploadDataset(name, jsonl([{ text: 'b', label: 'y' }]), { key: team.key })).toMatchObject({
      version: 1,
      status: 'ready',
    });
  });

  it('another team can neither see nor touch a dataset, and may use the same name', async () => {
    const a = await stack.newTeam('owner');
    const b = await stack.newTeam('outsider');
    const name = uniq('private');
    await stack.uploadDataset(name, jsonl([{ text: 'a', label: 'x', nope: 1 }]), { key: a.key });
    for (const path of [`/core/datasets/${name}`, `/core/datasets/${name}/1`, `/core/datasets/${name}/1/report`]) {
      expect((await stack.call('GET', path, { key: b.key })).status).toBe(404);
    }
    expect((await stack.call('GET', '/core/datasets', { key: b.key })).body.data).toEqual([]);
    expect((await processCall(name, 1, b.key)).status).toBe(404);
    expect((await stack.call('DELETE', `/core/datasets/${name}`, { key: b.key })).status).toBe(404);
    expect((await stack.call('GET', `/core/datasets/${name}`, { key: a.key })).status).toBe(200);
    const mine = await stack.uploadDataset(name, jsonl([{ text: 'b', label: 'y' }]), { key: b.key });
    expect(mine).toMatchObject({ version: 1, status: 'ready', label_vocabulary: ['y'] });
    expect((await stack.call('GET', `/core/datasets/${name}`, { key: a.key })).body).toMatchObject({
      status: 'failed',
      label_vocabulary: [],
    });
    expect(messagesOf((await stack.call('GET', `/core/datasets/${name}/1`, { key: a.key })).body)).toMatch(
      /unknown column 'nope'/,
    );
  });

  it('a dataset with a version being processed cannot be deleted (409)', async () => {
    const team = await stack.newTeam('busy');
    const name = uniq('busy');
    const url = await reserve(name, {}, team.key);
    await put(url.upload_url, jsonl([{ text: 'a', label: 'x' }]));
    // Held in `processing` without a worker picking it up, as while a worker runs.
    await stack.svc.records.update(`TEAM#${team.teamId}`, `DSV#${name}#000001`, { set: { status: 'processing' } });
    const res = await stack.call('DELETE', `/core/datasets/${name}`, { key: team.key });
    expect(res.status).toBe(409);
    expect(res.body.detail).toMatch(/being processed/);
    expect((await stack.svc.blobs.list(`datasets/${team.teamId}/${name}/`)).length).toBe(1);
    expect((await stack.call('GET', `/core/datasets/${name}/1`, { key: team.key })).body.status).toBe('processing');
  });

  it('every dataset route needs a key', async () => {
    for (const [method, path] of [
      ['GET', '/core/datasets'],
      ['GET', '/core/datasets/x'],
      ['GET', '/core/datasets/x/1'],
      ['GET', '/core/datasets/x/1/report'],
      ['DELETE', '/core/datasets/x'],
      ['POST', '/core/datasets/upload/url'],
      ['POST', '/core/datasets/upload/process'],
    ] as const) {
      expect(
        (
          await stack.call(method, path, {
            key: null,
            body: method === 'POST' ? { dataset_name: 'x', file_name: 'a.jsonl' } : undefined,
          })
        ).status,
      ).toBe(401);
    }
  });
});

describe('durability', () => {
  it('a version left processing by a stopped server is processed after a restart on the same data', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'sift-ds-restart-'));
    try {
      const first = await TestStack.start({ dataDir });
      const team = await first.newTeam('restart');
      const url = await first.call('POST', '/core/datasets/upload/url', {
        key: team.key,
        body: { dataset_name: 'survivor', file_name: 'rows.jsonl' },
      });
      expect(
        (
          await fetch(url.body.upload_url, {
            method: 'PUT',
            body: jsonl([
              { text: 'a', label: 'x' },
              { text: 'b', label: 'y' },
            ]),
          })
        ).status,
      ).toBe(200);
      // As if the process died after accepting POST …/process but before the worker ran.
      await first.svc.records.update(`TEAM#${team.teamId}`, 'DSV#survivor#000001', { set: { status: 'processing' } });
      await first.stop();

      const second = await TestStack.start({ dataDir });
      try {
        await second.service.idle();
        const v = await second.call('GET', '/core/datasets/survivor/1', { key: team.key });
        expect(v.body).toMatchObject({ status: 'ready', row_count: 2, label_vocabulary: ['x', 'y'] });
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('a version whose processing kept killing the server (#25 row 3)', () => {
  it('is failed at the next start with the reason, not validated again', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'sift-ds-crashloop-'));
    try {
      const first = await TestStack.start({ dataDir });
      const team = await first.newTeam('crashloop');
      const url = await first.call('POST', '/core/datasets/upload/url', {
        key: team.key,
        body: { dataset_name: 'killer', file_name: 'rows.jsonl' },
      });
      expect(
        (await fetch(url.body.upload_url, { method: 'PUT', body: jsonl([{ text: 'a', label: 'x' }]) })).status,
      ).toBe(200);
      // As if the process died during each of two attempts: each claimed the version, none finished.
      await first.svc.records.update(`TEAM#${team.teamId}`, 'DSV#killer#000001', {
        set: { status: 'processing', processing_attempts: 2 },
      });
      await first.stop();

      const second = await TestStack.start({ dataDir });
      try {
        await second.service.idle();
        const v = await second.call('GET', '/core/datasets/killer/1', { key: team.key });
        expect(v.body).toMatchObject({
          status: 'failed',
          row_count: null,
          errors: [
            {
              row: null,
              field: null,
              message: expect.stringMatching(/^validation of this version stopped the worker 2 times/),
            },
          ],
        });
        // and it can be deleted like any failed version
        expect((await second.call('DELETE', '/core/datasets/killer', { key: team.key })).status).toBe(200);
      } finally {
        await second.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('stale upload URLs', () => {
  it('cannot write into a dataset re-created under the same name', async () => {
    const first = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: 'reborn', file_name: 'r.jsonl' },
    });
    expect((await stack.call('DELETE', '/core/datasets/reborn')).status).toBe(200);
    const second = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: 'reborn', file_name: 'r.jsonl' },
    });
    expect(second.body.version).toBe(1);
    // The old URL still works for S3, but it points at the deleted reservation's key.
    expect((await fetch(first.body.upload_url, { method: 'PUT', body: '{"text":"stale","label":"x"}\n' })).ok).toBe(
      true,
    );
    const processed = await stack.call('POST', '/core/datasets/upload/process', { body: { dataset_name: 'reborn' } });
    expect(processed.status).toBe(409);
    expect(processed.body.detail).toMatch(/No file has been uploaded/);
  });
});

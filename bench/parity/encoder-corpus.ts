/** Fixed corpus for the encoder parity harness and benchmark (../shared/data + adversarial texts). */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { EncoderSchema } from '../../src/encoder/schema';

export interface Case {
  name: string;
  texts: string[];
  schema: EncoderSchema;
  threshold?: number;
}

const DATA = process.env.SIFT_SHARED_DATA ?? join(process.cwd(), '..', 'shared', 'data');

function rows(file: string, n: number): Array<Record<string, unknown>> {
  const lines = readFileSync(join(DATA, file), 'utf8').split('\n').filter(Boolean);
  // deterministic spread over the file
  const step = Math.max(1, Math.floor(lines.length / n));
  const out: Array<Record<string, unknown>> = [];
  for (let i = 0; i < lines.length && out.length < n; i += step) out.push(JSON.parse(lines[i]!) as Record<string, unknown>);
  return out;
}
const texts = (file: string, n: number) => rows(file, n).map((r) => r.text as string);
const schema = (s: Partial<EncoderSchema>): EncoderSchema => ({ entities: [], classifications: [], structures: [], relations: [], ...s });
const ents = (...names: string[]) => names.map((name) => ({ name }));

export function labelsOf(file: string, key: string, n = 1000): string[] {
  const set = new Set<string>();
  for (const r of rows(file, n)) {
    const v = r[key];
    if (typeof v === 'string') set.add(v);
    if (Array.isArray(v)) for (const e of v as Array<{ label?: string }>) if (e.label) set.add(e.label);
  }
  return [...set].sort();
}

const LOREM = 'The committee met in Geneva on Tuesday to review the annual budget proposed by Maria Gonzalez of Siemens AG , and several delegates from Brazil , Japan and Kenya raised concerns about funding for water projects .';

export function parityCases(): Case[] {
  const wnut = ents('person', 'location', 'corporation', 'product', 'creative-work', 'group');
  const banking = labelsOf('banking77/test.jsonl', 'label').slice(0, 12);
  const snipsIntents = labelsOf('snips/test.jsonl', 'label');
  const long2000 = Array.from({ length: Math.ceil(2000 / LOREM.split(' ').length) }, () => LOREM).join(' ').split(' ').slice(0, 2000).join(' ');
  const fifty = Array.from({ length: 50 }, (_, i) => `type ${i}`);
  fifty.splice(0, 5, 'person', 'organization', 'location', 'date', 'money');
  const adversarial = [
    'Tim Cook 😀 met 👩‍👩‍👧 Satya Nadella in Zürich 🇨🇭 on Monday',
    'José Álvarez from Société Générale visited São Paulo and Kraków.',
    '東京で山田太郎はソニーの社長に会った。北京 is in China.',
    'Ünïcödé naïve café — “quoted” text… with İstanbul and straße',
    'Contact me at jane.doe@example.com or @janedoe, see https://example.com/a?b=c',
    '',
    '   ',
    '!!!',
    'a',
  ];
  return [
    { name: 'wnut17-entities-0.5', texts: texts('wnut17/test.jsonl', 40), schema: schema({ entities: wnut }) },
    { name: 'wnut17-entities-0.2', texts: texts('wnut17/test.jsonl', 40), schema: schema({ entities: wnut }), threshold: 0.2 },
    {
      name: 'conll04-entities-relations',
      texts: texts('conll04/test.jsonl', 30),
      schema: schema({ entities: ents('person', 'organization', 'location', 'other'), relations: labelsOf('conll04/test.jsonl', 'relations').concat(['work for', 'live in', 'located in', 'organization based in', 'kill']).filter((x, i, a) => a.indexOf(x) === i).map((name) => ({ name })) }),
      threshold: 0.3,
    },
    { name: 'banking77-single', texts: texts('banking77/test.jsonl', 30), schema: schema({ classifications: [{ task: 'intent', labels: banking, multiLabel: false }] }) },
    { name: 'banking77-multi', texts: texts('banking77/test.jsonl', 30), schema: schema({ classifications: [{ task: 'intent', labels: banking, multiLabel: true, topK: 3 }] }), threshold: 0.3 },
    {
      name: 'snips-intent-entities',
      texts: texts('snips/test.jsonl', 30),
      schema: schema({ entities: labelsOf('snips/test.jsonl', 'entities').slice(0, 10).map((name) => ({ name })), classifications: [{ task: 'intent', labels: snipsIntents, multiLabel: false }] }),
      threshold: 0.3,
    },
    {
      name: 'restaurant8k-structures',
      texts: texts('restaurant8k/test.jsonl', 30),
      schema: schema({
        structures: [
          {
            name: 'reservation',
            fields: [
              { name: 'time', dtype: 'str' },
              { name: 'people', dtype: 'str', description: 'number of guests' },
              { name: 'date', dtype: 'str' },
              { name: 'first_name', dtype: 'str' },
              { name: 'last_name', dtype: 'list' },
              { name: 'seating', dtype: 'str', choices: ['indoor', 'outdoor', 'bar'] },
              { name: 'extras', dtype: 'list', choices: ['high chair', 'wheelchair', 'birthday'] },
            ],
          },
        ],
      }),
      threshold: 0.3,
    },
    {
      name: 'all-heads-descriptions',
      texts: [...adversarial.slice(0, 5), ...texts('conll04/test.jsonl', 10)],
      schema: schema({
        entities: [{ name: 'person', description: 'names of people' }, { name: 'organization' }, { name: 'location', description: 'cities, countries' }, { name: 'email', threshold: 0.2 }],
        classifications: [
          { task: 'sentiment', labels: ['positive', 'negative', 'neutral'], multiLabel: false },
          { task: 'topics', labels: ['business', 'travel', 'politics', 'technology'], multiLabel: true },
        ],
        structures: [
          { name: 'meeting', fields: [{ name: 'who', dtype: 'list', description: 'participants' }, { name: 'where', dtype: 'str' }, { name: 'when', dtype: 'str' }, { name: 'kind', dtype: 'str', choices: ['business', 'social'] }] },
          { name: 'contact', fields: [{ name: 'email', dtype: 'str' }, { name: 'handle', dtype: 'str', threshold: 0.2 }] },
        ],
        relations: [{ name: 'works for' }, { name: 'located in', threshold: 0.25 }],
      }),
      threshold: 0.35,
    },
    { name: 'adversarial-entities', texts: adversarial, schema: schema({ entities: ents('person', 'organization', 'location', 'email', 'url') }), threshold: 0.3 },
    { name: '50-labels', texts: texts('conll04/test.jsonl', 10), schema: schema({ entities: fifty.map((name) => ({ name })) }), threshold: 0.3 },
    { name: 'empty-entity-list+classification', texts: texts('snips/test.jsonl', 8), schema: schema({ entities: [], classifications: [{ task: 'intent', labels: snipsIntents, multiLabel: false }] }) },
    { name: '2000-words', texts: [long2000], schema: schema({ entities: ents('person', 'organization', 'location'), relations: [{ name: 'works for' }] }), threshold: 0.3 },
  ];
}

/**
 * The texts and schemas `sift models import` runs through both the Python `gliner2` library and the
 * TS engine before it accepts a checkpoint: every head (entities, single- and multi-label
 * classification, structures with a choice field, relations), plain and non-ASCII text. Small on
 * purpose: a large model answers them in seconds on a CPU.
 */
import type { EncoderSchema } from '../encoder/schema';

export interface ParityCase {
  name: string;
  texts: string[];
  schema: EncoderSchema;
  threshold: number;
  /** Per text: more than 1 when the text is longer than one window (the library then reads it with `batch_extract_long`). */
  chunked?: number[];
  /** Words per window and words two windows share, for both the engine and the library's `batch_extract_long`. */
  chunk_words?: number;
  chunk_overlap?: number;
}

const schema = (s: Partial<EncoderSchema>): EncoderSchema => ({
  entities: [],
  classifications: [],
  structures: [],
  relations: [],
  ...s,
});

export const IMPORT_PARITY_CASES: readonly ParityCase[] = [
  {
    name: 'entities',
    texts: [
      'Tim Cook announced that Apple will open a new office in Austin, Texas next March.',
      'José Álvarez from Société Générale visited São Paulo and Kraków.',
      'Contact jane.doe@example.com before 5 May 2025 about invoice 4471.',
    ],
    schema: schema({
      entities: [
        { name: 'person' },
        { name: 'organization' },
        { name: 'location' },
        { name: 'date', description: 'a calendar date' },
      ],
    }),
    threshold: 0.3,
  },
  {
    name: 'classification',
    texts: ['I love this phone, the battery lasts for days!', 'The delivery was late and the box was damaged.'],
    schema: schema({
      classifications: [
        { task: 'sentiment', labels: ['positive', 'negative', 'neutral'], multiLabel: false },
        { task: 'topics', labels: ['battery', 'shipping', 'price', 'screen'], multiLabel: true },
      ],
    }),
    threshold: 0.3,
  },
  {
    name: 'structures',
    texts: ['Order 1182: two blue mugs for 18 dollars, shipped by express to Berlin.'],
    schema: schema({
      structures: [
        {
          name: 'order',
          fields: [
            { name: 'product', dtype: 'list' },
            { name: 'price', dtype: 'str' },
            { name: 'shipping', dtype: 'str', choices: ['standard', 'express'] },
          ],
        },
      ],
    }),
    threshold: 0.3,
  },
  {
    name: 'relations',
    texts: ['Satya Nadella works for Microsoft, which is based in Redmond.'],
    schema: schema({
      entities: [{ name: 'person' }, { name: 'organization' }],
      relations: [{ name: 'works for' }, { name: 'based in' }],
    }),
    threshold: 0.3,
  },
];

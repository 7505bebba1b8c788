/** The per-row examples of what the model got wrong: capped in count and length. */
import type { NormalizedRow } from '../../datasets/rows';
import { cut, setOwn } from './tally';
import type { EvaluationCounts, ExampleItems } from './types';

/** Code points of an example's text that are kept. */
export const EXAMPLE_TEXT_CHARS = 300;
/** Items per side (gold / predicted) of one example, and code points per item string. */
const EXAMPLE_ITEMS = 10;
const EXAMPLE_ITEM_CHARS = 100;

/** Keeps an example of the row when anything was missed or spurious (and examples are wanted). */
export function addExample(
  counts: EvaluationCounts,
  gold: NormalizedRow,
  row: number | undefined,
  missed: ExampleItems,
  spurious: ExampleItems,
): void {
  if (counts.max_examples > 0 && (hasItems(missed) || hasItems(spurious))) {
    const id = gold.id ?? row;
    counts.examples.push({
      ...(id !== undefined ? { id } : {}),
      text: cut(gold.text ?? '', EXAMPLE_TEXT_CHARS),
      gold: capItems(missed),
      predicted: capItems(spurious),
    });
  }
}

const hasItems = (x: ExampleItems) => Object.keys(x).length > 0;

/** At most EXAMPLE_ITEMS items per side (entities, then labels, fields, relations), each string cut to EXAMPLE_ITEM_CHARS. */
function capItems(x: ExampleItems): ExampleItems {
  let budget = EXAMPLE_ITEMS;
  const take = <T>(xs: T[]): T[] => {
    const out = xs.slice(0, Math.max(0, budget));
    budget -= out.length;
    return out;
  };
  const c = (s: string) => cut(s, EXAMPLE_ITEM_CHARS);
  const out: ExampleItems = {};
  if (x.entities) out.entities = take(x.entities).map((e) => ({ ...e, text: c(e.text) }));
  if (x.labels) out.labels = take(x.labels).map(c);
  if (x.fields) {
    const fields: Record<string, string[]> = {};
    for (const [k, vs] of Object.entries(x.fields)) {
      const kept = take(vs);
      if (kept.length) setOwn(fields, k, kept.map(c));
    }
    out.fields = fields;
  }
  if (x.relations)
    out.relations = take(x.relations).map((r) => ({ relation: r.relation, head: c(r.head), tail: c(r.tail) }));
  return out;
}

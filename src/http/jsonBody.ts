/**
 * What a parsed JSON body may hold beyond what JSON.parse accepts. Checked once in the pipeline
 * (SiftApp.readJson), before zod and the handlers see the value:
 *
 * - nesting: at most MAX_JSON_DEPTH arrays/objects deep. JSON.parse itself takes 100k levels, but
 *   much that runs after it recurses (JSON.stringify, the DynamoDB marshaller, zod) and overflows
 *   the stack; DynamoDB stores at most 32 levels.
 * - numbers: finite. `1e309` parses to Infinity, which no schema means and no store keeps.
 * - keys: never `__proto__`. JSON.parse makes it an own key, but every plain-object copy (zod's
 *   records and loose objects, spreads into maps) turns it into the prototype and drops it.
 *
 * Duplicate keys are not refused: the last one wins, as in JSON.parse (RFC 8259 §4 leaves it open).
 */
import type { FieldError } from '../core/errors';

/** The deepest nesting of arrays and objects a request body may have (DynamoDB's item limit). */
export const MAX_JSON_DEPTH = 32;

/** One array or object being walked: its keys (undefined for an array) and the index of the next child. */
interface Frame {
  container: unknown[] | Record<string, unknown>;
  keys: string[] | undefined;
  next: number;
}

/** The first thing in `value` the API refuses, as a field error under `body`; undefined when there is none. */
export function jsonBodyProblem(value: unknown): FieldError | undefined {
  // depth-first with an explicit stack of at most MAX_JSON_DEPTH frames: the check never recurses,
  // holds one frame per level (not one entry per element of a 10 MiB array), and builds a
  // location only for the problem it reports
  const frames: Frame[] = [];
  const here = (...more: string[]): (string | number)[] => [
    'body',
    ...frames.map((f) => (f.keys ? f.keys[f.next - 1]! : f.next - 1)),
    ...more,
  ];
  let current: unknown = value;
  for (;;) {
    if (typeof current === 'number') {
      if (!Number.isFinite(current))
        return {
          loc: here(),
          msg: 'number is too large to represent (it must be finite)',
          type: 'number_out_of_range',
        };
    } else if (current !== null && typeof current === 'object') {
      if (frames.length >= MAX_JSON_DEPTH)
        return {
          loc: here().slice(0, 6),
          msg: `nested deeper than ${MAX_JSON_DEPTH} levels of arrays and objects`,
          type: 'json_too_deep',
        };
      const keys = Array.isArray(current) ? undefined : Object.keys(current);
      if (keys && Object.hasOwn(current, '__proto__'))
        return { loc: here('__proto__'), msg: "'__proto__' is not allowed as a key", type: 'key_forbidden' };
      frames.push({ container: current as Frame['container'], keys, next: 0 });
    }
    // the next value in document order: the top frame's next child, else its parent's, …
    let advanced = false;
    while (frames.length) {
      const top = frames[frames.length - 1]!;
      if (top.keys ? top.next < top.keys.length : top.next < (top.container as unknown[]).length) {
        current = top.keys
          ? (top.container as Record<string, unknown>)[top.keys[top.next]!]
          : (top.container as unknown[])[top.next];
        top.next += 1;
        advanced = true;
        break;
      }
      frames.pop();
    }
    if (!advanced) return undefined;
  }
}

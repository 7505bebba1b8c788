/**
 * Local JSON-Schema references (`#/$defs/<name>`, `#/definitions/<name>`), as zod's toJSONSchema and
 * pydantic write them: the one reading both the decoder's grammar check (decoder/structured.ts) and
 * the encoder's schema mapping (extraction/jsonSchemaMapping.ts) use. Nothing remote is resolved.
 */
const LOCAL_REF = /^#\/(\$defs|definitions)\/([^/]+)$/;

/** The definition a local `$ref` names in `root`, or undefined when it is not a local reference to one. */
export function localRefTarget(root: Record<string, unknown>, ref: string): Record<string, unknown> | undefined {
  const m = LOCAL_REF.exec(ref);
  if (!m) return undefined;
  const defs = root[m[1]!];
  if (!isObject(defs)) return undefined;
  // A URI fragment holding a JSON pointer: percent-decoding, then the pointer's ~1 and ~0 escapes.
  let name: string;
  try {
    name = decodeURIComponent(m[2]!).replace(/~1/g, '/').replace(/~0/g, '~');
  } catch {
    return undefined;
  }
  const target = Object.hasOwn(defs, name) ? defs[name] : undefined;
  return isObject(target) ? target : undefined;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

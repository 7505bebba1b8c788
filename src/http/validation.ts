import { z } from 'zod';
import { ValidationError, type FieldError } from '../core/errors';

type Issue = z.core.$ZodIssue;

/**
 * A union (`text`: a string or a list of strings) that fails in every branch reports the branch
 * whose type matched, so `""` says why the string was refused, not just "Invalid input".
 */
function unwrapUnions(issues: readonly Issue[], base: PropertyKey[] = []): Issue[] {
  return issues.flatMap((issue): Issue[] => {
    const path = [...base, ...issue.path];
    if (issue.code !== 'invalid_union' || issue.errors.length === 0) return [{ ...issue, path }];
    const typed = issue.errors.filter(
      (branch) => !branch.every((i) => i.code === 'invalid_type' && i.path.length === 0),
    );
    return typed.length === 1 ? unwrapUnions(typed[0] as Issue[], path) : [{ ...issue, path }];
  });
}

export function toFieldErrors(error: z.ZodError, prefix: string): FieldError[] {
  return unwrapUnions(error.issues).map((issue) => {
    const loc: (string | number)[] = [prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    // Unknown keys are reported on the key itself, so the field is named.
    if (issue.code === 'unrecognized_keys') {
      return {
        loc: [...loc, ...(issue.keys.length === 1 ? issue.keys : [])],
        msg: `Unknown field(s): ${issue.keys.join(', ')}`,
        type: 'extra_forbidden',
      };
    }
    return { loc, msg: issue.message, type: issue.code };
  });
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown, prefix: string): z.output<S> {
  const res = schema.safeParse(value);
  if (!res.success) throw new ValidationError(toFieldErrors(res.error, prefix));
  return res.data;
}

/**
 * What the OpenAPI document says for a schema whose JSON Schema zod cannot derive from the input
 * side (a query string that carries an integer). openapi.ts applies it; the zod schema still validates.
 */
export const openApiOverrides = z.registry<{ jsonSchema: Record<string, unknown> }>();

/**
 * A body validated in two steps (a router schema, then the chosen branch's own) is documented as
 * what it accepts in the end: openapi.ts renders the registered schema instead.
 */
export const documentedAs = new WeakMap<z.ZodType, z.ZodType>();

/**
 * Names of datasets, projects and models: safe as storage key segments (no slashes, no `..`).
 * One regex (no refinement) so the OpenAPI document states the whole rule.
 */
export const resourceName = z
  .string()
  .min(1)
  .max(128)
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*\.?$/,
    'must start with a letter or digit, contain only letters, digits, ".", "_" and "-", and not contain ".."',
  );

/** Text a model reads: not empty or whitespace only. */
export const nonBlank = (message: string) => z.string().regex(/\S/, message);

export const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a UUID');

/**
 * A USD amount the ledger can hold exactly: non-negative, at most 6 decimals (it is stored in
 * micro-USD), at most 1e9. Declared as `multipleOf` so the API document states the rule too.
 */
export const usdAmount = z
  .number()
  .nonnegative()
  .max(1_000_000_000)
  .multipleOf(0.000001, 'must have at most 6 decimal places (micro-USD)');
/** A USD amount to add: as `usdAmount`, and more than 0. */
export const positiveUsdAmount = z
  .number()
  .positive('must be greater than 0')
  .max(1_000_000_000)
  .multipleOf(0.000001, 'must have at most 6 decimal places (micro-USD)');

/** Query-string integers ("10" → 10) with bounds; documented as the integer they carry. */
export const queryInt = (min: number, max: number, dflt: number) => {
  const schema = z
    .string()
    .regex(/^\d+$/, 'must be a non-negative integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .optional()
    .transform((v) => v ?? dflt);
  openApiOverrides.add(schema, { jsonSchema: { type: 'integer', minimum: min, maximum: max, default: dflt } });
  return schema;
};

export const queryBool = z
  .enum(['true', 'false'], { message: 'must be "true" or "false"' })
  .transform((v) => v === 'true')
  .optional();

export const ErrorBody = z.object({ detail: z.string() }).meta({ id: 'Error' });
export const ValidationErrorBody = z
  .object({
    detail: z.string(),
    errors: z.array(z.object({ loc: z.array(z.union([z.string(), z.number()])), msg: z.string(), type: z.string() })),
  })
  .meta({ id: 'ValidationError' });

import { z } from 'zod';
import { ValidationError, type FieldError } from '../core/errors';

export function toFieldErrors(error: z.ZodError, prefix: string): FieldError[] {
  return error.issues.map((issue) => {
    const loc: (string | number)[] = [prefix, ...issue.path.map((p) => (typeof p === 'symbol' ? String(p) : p))];
    // Unknown keys are reported on the key itself, so the field is named.
    if (issue.code === 'unrecognized_keys') {
      return { loc: [...loc, ...(issue.keys.length === 1 ? issue.keys : [])], msg: `Unknown field(s): ${issue.keys.join(', ')}`, type: 'extra_forbidden' };
    }
    return { loc, msg: issue.message, type: issue.code };
  });
}

export function parseWith<S extends z.ZodType>(schema: S, value: unknown, prefix: string): z.output<S> {
  const res = schema.safeParse(value);
  if (!res.success) throw new ValidationError(toFieldErrors(res.error, prefix));
  return res.data;
}

/** Names of datasets, projects and models: safe as storage key segments (no slashes, no `..`). */
export const resourceName = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'must start with a letter or digit and contain only letters, digits, ".", "_" and "-"')
  .refine((s) => !s.includes('..'), 'must not contain ".."');

export const uuid = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a UUID');

/** A USD amount the ledger can hold exactly: non-negative, at most 6 decimals (it is stored in micro-USD). */
export const usdAmount = z
  .number()
  .nonnegative()
  .max(1_000_000_000)
  .refine((v) => Math.abs(v * 1e6 - Math.round(v * 1e6)) < 1e-6, 'must have at most 6 decimal places (micro-USD)');

/** Query-string integers ("10" → 10) with bounds. */
export const queryInt = (min: number, max: number, dflt: number) =>
  z
    .string()
    .regex(/^\d+$/, 'must be a non-negative integer')
    .transform(Number)
    .pipe(z.number().int().min(min).max(max))
    .optional()
    .transform((v) => v ?? dflt);

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

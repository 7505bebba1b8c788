import { z } from 'zod';
import { queryInt } from '../../validation';

/** OpenAI's cursor pagination: `after` = the id of the last item of the previous page. */
export const CursorQuery = z.strictObject({ after: z.string().max(200).optional(), limit: queryInt(1, 100, 20) });

/** A page of `items` (already in the list's order) after the cursor, as OpenAI's list endpoints answer. */
export function cursorPage<T extends { id: string }>(
  items: T[],
  query: { after?: string | undefined; limit: number },
): { object: 'list'; data: T[]; has_more: boolean } {
  // an unknown cursor starts nowhere: an empty last page, not the first page again (a client would loop)
  const start = query.after === undefined ? 0 : items.findIndex((item) => item.id === query.after) + 1 || items.length;
  const data = items.slice(start, start + query.limit);
  return { object: 'list', data, has_more: start + data.length < items.length };
}

/**
 * For `.catch(missingAsUndefined)` on a file read, stat or listing: a path that does not exist
 * (ENOENT, or ENOTDIR where a parent is a file) answers undefined; every other failure (EACCES,
 * EIO, EMFILE, …) propagates instead of passing for "not there".
 */
export function missingAsUndefined(err: unknown): undefined {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
  throw err;
}

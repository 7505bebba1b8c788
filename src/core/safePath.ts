/**
 * Paths named by data — a tar entry in a trainer's archive, the part of a blob key after a model's
 * prefix — become blob keys or files under a directory only through these two checks, so no such
 * name can reach outside the place it was meant for (`../../x`, `/etc/x`, `C:\x`).
 */
import { resolve, sep } from 'node:path';

export class UnsafePathError extends Error {}

/**
 * `rel` as plain relative segments joined by `/` (`./a//b` → `a/b`), or UnsafePathError naming it
 * and `what` it came from: `..` segments, absolute and drive paths, NUL bytes and empty names are
 * refused. Backslashes count as separators, so a name that is harmless here is refused where it
 * would not be (`..\x` on Windows).
 */
export function safeRelativePath(rel: string, what: string): string {
  const refuse = (why: string) => new UnsafePathError(`${what} names an unsafe path ${JSON.stringify(rel)}: ${why}`);
  if (rel.includes('\0')) throw refuse('it holds a NUL byte');
  if (/^[\\/]/.test(rel) || /^[A-Za-z]:/.test(rel)) throw refuse('it is absolute');
  const segments = rel.split(/[\\/]/).filter((s) => s !== '' && s !== '.');
  if (segments.includes('..')) throw refuse('it climbs out with ".."');
  if (segments.length === 0) throw refuse('it names no file');
  return segments.join('/');
}

/**
 * The file `rel` names under `dir`, checked twice: as a safe relative path, and by resolving it and
 * requiring the result to lie strictly inside `dir`.
 */
export function containedPath(dir: string, rel: string, what: string): string {
  const root = resolve(dir);
  const file = resolve(root, safeRelativePath(rel, what));
  if (!file.startsWith(root + sep))
    throw new UnsafePathError(`${what} names ${JSON.stringify(rel)}, which resolves outside ${root}`);
  return file;
}

import { readdir, readFile } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import type { BlobHead, BlobStore, PresignPutBounds } from '../../core/ports';

/** The blob port in one process's memory (core unit tests). Presigned URLs are `memory://` placeholders nothing can fetch. */
export class MemoryBlobStore implements BlobStore {
  private readonly objects = new Map<
    string,
    { body: Buffer; contentType: string; lastModified: Date; version: number }
  >();
  private writes = 0;

  async put(
    key: string,
    body: string | Uint8Array | Readable,
    contentType = 'application/octet-stream',
  ): Promise<void> {
    const bytes =
      typeof body === 'string'
        ? Buffer.from(body)
        : body instanceof Uint8Array
          ? Buffer.from(body)
          : await buffer(body);
    this.objects.set(key, { body: bytes, contentType, lastModified: new Date(), version: ++this.writes });
  }

  async copy(fromKey: string, toKey: string): Promise<void> {
    const from = this.objects.get(fromKey);
    if (!from) throw new Error(`no object '${fromKey}'`);
    this.objects.set(toKey, { ...from, lastModified: new Date(), version: ++this.writes });
  }

  uri(key: string): string {
    return `memory://blobs/${key}`;
  }

  async putDirectory(dir: string, prefix: string, skip: (file: string) => boolean = () => false): Promise<void> {
    for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
      if (!entry.isFile()) continue;
      const file = join(entry.parentPath, entry.name);
      if (skip(file)) continue;
      // a file that vanished since the listing (a writer's temp file renamed into place) is skipped, as in S3BlobStore
      const body = await readFile(file).catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      });
      if (body) await this.put(prefix + relative(dir, file).split(sep).join('/'), body);
    }
  }

  async head(key: string): Promise<BlobHead | undefined> {
    const o = this.objects.get(key);
    return o
      ? { size: o.body.length, contentType: o.contentType, lastModified: o.lastModified, etag: `"${o.version}"` }
      : undefined;
  }

  async stream(key: string): Promise<Readable> {
    const o = this.objects.get(key);
    if (!o) throw Object.assign(new Error(`no object '${key}'`), { name: 'NoSuchKey' });
    return Readable.from([o.body]);
  }

  async getText(key: string): Promise<string> {
    const o = this.objects.get(key);
    if (!o) throw Object.assign(new Error(`no object '${key}'`), { name: 'NoSuchKey' });
    return o.body.toString('utf8');
  }

  async list(prefix: string): Promise<string[]> {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort();
  }

  async deletePrefix(prefix: string): Promise<number> {
    const keys = await this.list(prefix);
    for (const k of keys) this.objects.delete(k);
    return keys.length;
  }

  async presignPut(key: string, expiresInSeconds: number, bounds: PresignPutBounds = {}): Promise<string> {
    return `${this.uri(key)}?put&expires=${expiresInSeconds}${bounds.contentLength !== undefined ? `&content-length=${bounds.contentLength}` : ''}`;
  }

  async presignGet(key: string, expiresInSeconds: number): Promise<string> {
    return `${this.uri(key)}?get&expires=${expiresInSeconds}`;
  }
}

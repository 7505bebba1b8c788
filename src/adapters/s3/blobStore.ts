import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateBucketCommand,
  CreateMultipartUploadCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsCommand,
  PutObjectCommand,
  type S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { ReadStream } from 'node:fs';
import { open, readdir, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import type { Readable } from 'node:stream';
import type { BlobHead, BlobStore, PresignPutBounds } from '../../core/ports';
import { storeFailure } from '../storeErrors';

/**
 * "Amazon S3 multipart upload limits" (https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html):
 * every part but the last is 5 MiB to 5 GiB, at most 10,000 parts; PutObject takes at most 5 GiB and
 * needs the body's length up front. 16 MiB parts reach 156 GiB.
 */
export const MIN_PART_BYTES = 5 * 1024 * 1024;
export const DEFAULT_PART_BYTES = 16 * 1024 * 1024;
export const MAX_PUT_OBJECT_BYTES = 5 * 1024 * 1024 * 1024;

/** `stream` in buffers of exactly `size` bytes (the last one shorter), holding one at a time. */
async function* partsOf(stream: Readable, size: number): AsyncGenerator<Buffer> {
  let held: Buffer[] = [];
  let heldBytes = 0;
  for await (const chunk of stream) {
    let c = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
    while (heldBytes + c.length >= size) {
      const take = size - heldBytes;
      yield Buffer.concat([...held, c.subarray(0, take)]);
      held = [];
      heldBytes = 0;
      c = c.subarray(take);
    }
    if (c.length) {
      held.push(c);
      heldBytes += c.length;
    }
  }
  yield Buffer.concat(held);
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  const nested = await Promise.all(
    entries.map((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : Promise.resolve([join(dir, e.name)]))),
  );
  return nested.flat();
}

/**
 * Datasets, checkpoints and archives. The same S3 SDK code runs against S3 on AWS and against
 * s3rver in local mode; uploads and downloads go straight to storage through presigned URLs, so
 * large files never pass through the API.
 */
export class S3BlobStore implements BlobStore {
  constructor(
    readonly s3: S3Client,
    readonly bucket: string,
    /** Multipart part size for streams (MIN_PART_BYTES at least). */
    readonly partBytes = DEFAULT_PART_BYTES,
  ) {
    if (partBytes < MIN_PART_BYTES) throw new Error(`S3 parts are ${MIN_PART_BYTES} bytes at least`);
  }

  /**
   * A file's read stream goes up as one PutObject of its known length (up to S3's 5 GiB). Any other stream
   * goes up one part at a time, so memory holds two parts at most whatever the object's size (a model
   * archive's entries): one that fits a part is a plain PutObject, a longer
   * one a multipart upload, aborted when it fails (S3 keeps and bills the parts of an upload that is
   * neither completed nor aborted). Hand-written rather than @aws-sdk/lib-storage's Upload, which is
   * not a dependency; this is the sequential subset of what it does.
   */
  async put(
    key: string,
    body: string | Uint8Array | Readable,
    contentType = 'application/octet-stream',
  ): Promise<void> {
    if (typeof body === 'string' || body instanceof Uint8Array) return this.putObject(key, body, contentType);
    // a file's length is known up front: one streamed PutObject, nothing buffered (s3rver's multipart
    // path writes every part twice, which made each local checkpoint save 2-3x slower)
    const fileBytes = body instanceof ReadStream && typeof body.path === 'string' ? (await stat(body.path)).size : -1;
    if (fileBytes >= 0 && fileBytes <= MAX_PUT_OBJECT_BYTES) return this.putStream(key, body, fileBytes, contentType);
    return this.putParts(key, body, contentType);
  }

  private async putStream(key: string, body: Readable, length: number, contentType: string): Promise<void> {
    await this.guard(
      this.s3.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: key,
          Body: body,
          ContentLength: length,
          ContentType: contentType,
        }),
      ),
    );
  }

  private async putParts(key: string, body: Readable, contentType: string): Promise<void> {
    const parts = partsOf(body, this.partBytes);
    const first = (await parts.next()).value as Buffer;
    const second = await parts.next(); // an empty one: the stream ended on a part boundary
    if (second.done || !second.value.length) return this.putObject(key, first, contentType);
    const { UploadId } = await this.guard(
      this.s3.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: key, ContentType: contentType })),
    );
    const done: { ETag: string; PartNumber: number }[] = [];
    try {
      const upload = async (part: Buffer) => {
        const PartNumber = done.length + 1;
        const { ETag } = await this.guard(
          this.s3.send(new UploadPartCommand({ Bucket: this.bucket, Key: key, UploadId, PartNumber, Body: part })),
        );
        done.push({ ETag: ETag ?? '', PartNumber });
      };
      await upload(first);
      await upload(second.value);
      for await (const part of parts) if (part.length) await upload(part);
      await this.guard(
        this.s3.send(
          new CompleteMultipartUploadCommand({
            Bucket: this.bucket,
            Key: key,
            UploadId,
            MultipartUpload: { Parts: done },
          }),
        ),
      );
    } catch (err) {
      await this.s3.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: key, UploadId })).catch(() => {
        // the upload's own failure is the one to report
      });
      throw err;
    }
  }

  private async putObject(key: string, body: string | Uint8Array, contentType: string): Promise<void> {
    await this.guard(
      this.s3.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentType: contentType })),
    );
  }

  async copy(fromKey: string, toKey: string): Promise<void> {
    await this.guard(
      this.s3.send(
        new CopyObjectCommand({ Bucket: this.bucket, Key: toKey, CopySource: `${this.bucket}/${encodeURI(fromKey)}` }),
      ),
    );
  }

  /** `s3://bucket/key`, the form SageMaker channels and outputs take. */
  uri(key: string): string {
    return `s3://${this.bucket}/${key}`;
  }

  /**
   * Uploads every file under `dir` to `prefix` + its relative path (`/`-separated); `skip` filters. A
   * writer may still be busy in `dir` (a trainer renaming a temp file into place): each file is opened
   * before its upload starts, so one that vanished since the listing is skipped instead of failing the
   * request's body stream mid-upload, and an opened file survives a rename.
   */
  async putDirectory(dir: string, prefix: string, skip: (file: string) => boolean = () => false): Promise<void> {
    for (const file of await filesUnder(dir)) {
      if (skip(file)) continue;
      const handle = await open(file, 'r').catch((err: NodeJS.ErrnoException) => {
        if (err.code === 'ENOENT') return undefined;
        throw err;
      });
      if (!handle) continue;
      const target = prefix + relative(dir, file).split(sep).join('/');
      const { size } = await handle.stat();
      if (size <= MAX_PUT_OBJECT_BYTES)
        await this.putStream(target, handle.createReadStream(), size, 'application/octet-stream');
      else await this.putParts(target, handle.createReadStream(), 'application/octet-stream');
    }
  }

  async head(key: string): Promise<BlobHead | undefined> {
    try {
      const res = await this.s3.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return {
        size: res.ContentLength ?? 0,
        ...(res.ContentType ? { contentType: res.ContentType } : {}),
        ...(res.LastModified ? { lastModified: res.LastModified } : {}),
        ...(res.ETag ? { etag: res.ETag } : {}),
      };
    } catch (err) {
      const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
      if (e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return undefined;
      throw storeFailure('blobs', err);
    }
  }

  async stream(key: string): Promise<Readable> {
    const res = await this.guard(this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key })));
    return res.Body as Readable;
  }

  async getText(key: string): Promise<string> {
    const res = await this.guard(this.s3.send(new GetObjectCommand({ Bucket: this.bucket, Key: key })));
    return (await res.Body?.transformToString('utf-8')) ?? '';
  }

  /**
   * Every key under `prefix`. Pages with ListObjects (v1) and the last key as Marker: s3rver's v2
   * continuation tokens use DES, which Node's OpenSSL 3 refuses, so v2 fails past 1,000 keys locally.
   */
  async list(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let marker: string | undefined;
    do {
      const res = await this.guard(
        this.s3.send(
          new ListObjectsCommand({ Bucket: this.bucket, Prefix: prefix, ...(marker ? { Marker: marker } : {}) }),
        ),
      );
      const page = (res.Contents ?? []).flatMap((o) => (o.Key ? [o.Key] : []));
      keys.push(...page);
      marker = res.IsTruncated ? (res.NextMarker ?? page[page.length - 1]) : undefined;
    } while (marker);
    return keys;
  }

  async deletePrefix(prefix: string): Promise<number> {
    const keys = await this.list(prefix);
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      await this.guard(
        this.s3.send(
          new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: batch.map((Key) => ({ Key })) } }),
        ),
      );
    }
    return keys.length;
  }

  /**
   * A URL that lets its holder PUT exactly this key until it expires; no API key needed. A
   * `contentLength` becomes a signed `content-length` header (X-Amz-SignedHeaders): S3 recomputes
   * the signature from the request's own headers, so a body of any other length is refused with
   * 403 SignatureDoesNotMatch — "If you include any headers in the signature calculation, you must
   * include them in the request" (https://docs.aws.amazon.com/AmazonS3/latest/API/sigv4-query-string-auth.html).
   * Locally the store's front checks the same signature (src/local/storeFront.ts).
   */
  presignPut(key: string, expiresInSeconds: number, bounds: PresignPutBounds = {}): Promise<string> {
    return getSignedUrl(
      this.s3,
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: key,
        ...(bounds.contentType ? { ContentType: bounds.contentType } : {}),
        ...(bounds.contentLength !== undefined ? { ContentLength: bounds.contentLength } : {}),
      }),
      { expiresIn: expiresInSeconds },
    );
  }

  presignGet(key: string, expiresInSeconds: number, downloadName?: string): Promise<string> {
    return getSignedUrl(
      this.s3,
      new GetObjectCommand({
        Bucket: this.bucket,
        Key: key,
        ...(downloadName ? { ResponseContentDisposition: `attachment; filename="${downloadName}"` } : {}),
      }),
      { expiresIn: expiresInSeconds },
    );
  }

  async ensureBucket(): Promise<void> {
    try {
      await this.s3.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      // only a bucket that is not there is created; an unreachable store is not "no bucket"
      if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode !== 404)
        throw storeFailure('blobs', err);
      await this.s3.send(new CreateBucketCommand({ Bucket: this.bucket }));
    }
  }

  /** SDK errors leave the adapter in the core's terms (StoreUnavailableError for throttling, 5xx, network). */
  private async guard<R>(op: Promise<R>): Promise<R> {
    try {
      return await op;
    } catch (err) {
      throw storeFailure('blobs', err);
    }
  }
}

/**
 * What S3 refuses of an upload and s3rver (the S3 emulator) accepts, enforced as an SDK middleware on
 * an S3 client, so code that only works against the emulator fails here:
 * - PutObject needs the body's length up front: a stream the SDK cannot measure (not a file) is
 *   sent chunked, which S3 refuses (411 MissingContentLength); s3rver stores it. "PutObject"
 *   https://docs.aws.amazon.com/AmazonS3/latest/API/API_PutObject.html
 * - "Amazon S3 multipart upload limits" https://docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html:
 *   one PutObject takes at most 5 GiB; parts are numbered 1 to 10,000 and every part but the last
 *   is at least 5 MiB (CompleteMultipartUpload answers EntityTooSmall); s3rver checks neither.
 * Not modelled: checksums, storage classes, object locks, request rates (503 SlowDown).
 * It also counts the bytes each successful PutObject and UploadPart stored (`stored`), so a test can
 * compare them with what a function has read meanwhile: what it holds in memory.
 */
import type { S3Client } from '@aws-sdk/client-s3';

const MIB = 1024 * 1024;
const MAX_PUT_BYTES = 5 * 1024 * MIB;
const MIN_PART_BYTES = 5 * MIB;
const MAX_PARTS = 10_000;

class S3Refusal extends Error {
  constructor(name: string, message: string) {
    super(message);
    this.name = name;
  }
}

/** The body's length as the SDK knows it before sending (bytes, a string, a file stream), else undefined. */
function knownLength(body: unknown, declared: unknown): number | undefined {
  if (typeof declared === 'number') return declared;
  if (typeof body === 'string') return Buffer.byteLength(body);
  if (body instanceof Uint8Array) return body.byteLength;
  if (body === undefined) return 0;
  return undefined; // a file stream's length comes from its file; `bytesStored` counts those as 0
}

export interface S3UploadRules {
  /** Bytes stored by completed PutObject and UploadPart calls. */
  readonly stored: number;
}

export function enforceS3UploadRules(s3: S3Client, onStored: (bytes: number) => void = () => {}): S3UploadRules {
  const state = { stored: 0 };
  const parts = new Map<string, Map<number, number>>();
  s3.middlewareStack.add(
    (next, context) => async (args) => {
      const command = (context as { commandName?: string }).commandName;
      const input = args.input as Record<string, unknown>;
      let bytes = 0;
      if (command === 'PutObjectCommand') {
        const length = knownLength(input.Body, input.ContentLength);
        const isFile = typeof (input.Body as { path?: unknown } | undefined)?.path === 'string';
        if (length === undefined && !isFile)
          throw new S3Refusal('MissingContentLength', 'You must provide the Content-Length HTTP header.');
        if ((length ?? 0) > MAX_PUT_BYTES)
          throw new S3Refusal('EntityTooLarge', 'Your proposed upload exceeds the maximum allowed size');
        bytes = length ?? 0;
      }
      if (command === 'UploadPartCommand') {
        const length = knownLength(input.Body, input.ContentLength);
        const number = input.PartNumber as number;
        if (length === undefined) throw new S3Refusal('MissingContentLength', 'a part needs its length');
        if (!(number >= 1 && number <= MAX_PARTS))
          throw new S3Refusal('InvalidArgument', 'Part number must be 1-10000');
        bytes = length;
      }
      if (command === 'CompleteMultipartUploadCommand') {
        const sizes = parts.get(String(input.UploadId)) ?? new Map<number, number>();
        const listed = ((input.MultipartUpload as { Parts?: { PartNumber: number }[] })?.Parts ?? []).map(
          (p) => p.PartNumber,
        );
        if (listed.slice(0, -1).some((n) => (sizes.get(n) ?? 0) < MIN_PART_BYTES))
          throw new S3Refusal('EntityTooSmall', 'Your proposed upload is smaller than the minimum allowed size');
      }
      const result = await next(args);
      if (command === 'UploadPartCommand') {
        const id = String(input.UploadId);
        if (!parts.has(id)) parts.set(id, new Map());
        parts.get(id)?.set(input.PartNumber as number, bytes);
      }
      state.stored += bytes;
      onStored(bytes);
      return result;
    },
    { step: 'initialize', name: 'siftS3UploadRules' },
  );
  return state;
}

/** `sift models publish`: upload built or provided base-model directories into a deployed bucket. */
import { S3BlobStore } from '../adapters/s3/blobStore';
import { createS3Client } from '../adapters/aws';
import {
  ModelPublishError,
  publishModelDirs,
  resolveModelSources,
  type PublishEvent,
  type PublishResult,
} from '../adapters/modelPublisher';

export interface PublishCommandOptions {
  bucket: string;
  prefix: string;
  modelsDir: string;
  region?: string;
  endpointUrl?: string;
}

const mb = (bytes: number) => `${(bytes / 1024 ** 2).toFixed(1)} MiB`;

/** One line per event, so a log of an interrupted run shows how far it got. */
export function describeEvent(e: PublishEvent): string {
  switch (e.type) {
    case 'model':
      return `${e.modelId}: ${e.files} file(s), ${mb(e.bytes)} from ${e.dir}`;
    case 'file':
      return `  ${e.action.padEnd(9)} ${e.key} (${mb(e.bytes)})${e.action === 'uploading' ? '…' : ''}`;
    case 'withdrawn':
      return `  withdrew ${e.key} while the model changes (unavailable until it is written again)`;
    case 'done':
      return `${e.modelId}: ${e.uploaded} uploaded, ${e.unchanged} unchanged; manifest ${e.manifest}`;
  }
}

/** Validates the options before anything touches the bucket. */
export function checkPublishOptions(o: PublishCommandOptions): void {
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(o.bucket))
    throw new ModelPublishError(`--bucket: '${o.bucket}' is not a valid S3 bucket name`);
  if (!o.prefix.endsWith('/') || o.prefix.startsWith('/'))
    throw new ModelPublishError(
      `--prefix: '${o.prefix}' must end with '/' and not start with one (the service reads models/)`,
    );
  if (o.endpointUrl !== undefined && !/^https?:\/\//.test(o.endpointUrl))
    throw new ModelPublishError(`--endpoint-url: '${o.endpointUrl}' must be an http(s) URL`);
}

export async function publishCommand(
  sources: string[],
  o: PublishCommandOptions,
  write: (line: string) => void,
  signal?: AbortSignal,
): Promise<PublishResult[]> {
  checkPublishOptions(o);
  const dirs = await resolveModelSources(sources, o.modelsDir);
  const s3 = createS3Client({
    ...(o.region ? { region: o.region } : {}),
    ...(o.endpointUrl ? { endpoint: o.endpointUrl } : {}),
  });
  try {
    return await publishModelDirs(new S3BlobStore(s3, o.bucket), dirs, {
      root: o.prefix,
      onEvent: (e) => write(describeEvent(e)),
      ...(signal ? { signal } : {}),
    });
  } finally {
    s3.destroy();
  }
}

export interface ImportCommandOptions {
  as?: string;
  /** A model under its own name: its languages, one line for GET /base-models, the one team it is private to. */
  language?: string[];
  description?: string;
  team?: string;
  modelsDir: string;
  force?: boolean;
  /** Also publish into this bucket (with `sift models publish`'s options). */
  bucket?: string;
  prefix: string;
  region?: string;
  endpointUrl?: string;
}

/** After a model is imported into the models dir: into a deployed bucket too, when one is named. */
async function publishImported(
  dir: string,
  o: ImportCommandOptions,
  write: (line: string) => void,
  signal?: AbortSignal,
): Promise<void> {
  if (!o.bucket) {
    write(`${dir}: in the local model store; \`npm start\` publishes it (or \`sift models publish\` into a bucket)`);
    return;
  }
  await publishCommand(
    [dir],
    {
      bucket: o.bucket,
      prefix: o.prefix,
      modelsDir: o.modelsDir,
      ...(o.region ? { region: o.region } : {}),
      ...(o.endpointUrl ? { endpointUrl: o.endpointUrl } : {}),
    },
    write,
    signal,
  );
}

const registryOptions = (o: ImportCommandOptions) => ({
  ...(o.language ? { languages: o.language } : {}),
  ...(o.description !== undefined ? { description: o.description } : {}),
  ...(o.team !== undefined ? { teamId: o.team } : {}),
});

const checkBucketFirst = (o: ImportCommandOptions) => {
  if (o.bucket)
    checkPublishOptions({
      bucket: o.bucket,
      prefix: o.prefix,
      modelsDir: o.modelsDir,
      ...(o.endpointUrl ? { endpointUrl: o.endpointUrl } : {}),
    });
};

/** `sift models import <dir>`: convert, check parity, place in the models dir, publish if asked. */
export async function importCommand(
  checkpointDir: string,
  o: ImportCommandOptions,
  write: (line: string) => void,
  signal?: AbortSignal,
) {
  checkBucketFirst(o);
  const { importCheckpoint } = await import('../local/modelImport');
  const result = await importCheckpoint({
    checkpointDir,
    modelId: o.as,
    modelsDir: o.modelsDir,
    force: o.force,
    onLine: write,
    ...registryOptions(o),
  });
  await publishImported(result.dir, o, write, signal);
  return result;
}

/** `sift models pull <id>`: download from the Hugging Face hub, then as `importCommand` (under `--as`, default the hub id). */
export async function pullCommand(
  modelId: string,
  o: ImportCommandOptions & { revision?: string },
  write: (line: string) => void,
  signal?: AbortSignal,
) {
  checkBucketFirst(o);
  const { pullModel } = await import('../local/modelPull');
  const result = await pullModel({
    modelId,
    ...(o.as !== undefined ? { as: o.as } : {}),
    modelsDir: o.modelsDir,
    force: o.force,
    revision: o.revision,
    onLine: write,
    ...registryOptions(o),
  });
  await publishImported(result.dir, o, write, signal);
  return result;
}

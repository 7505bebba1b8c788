/**
 * What SageMaker puts in a training container for a File-mode `S3Prefix` channel — the one AWS rule
 * the training tests rely on, since SageMaker itself can't run here:
 *
 * - every object whose key starts with the channel's S3Uri prefix is used
 *   (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_S3DataSource.html, S3DataType);
 * - in File mode they are downloaded to `/opt/ml/input/data/<channel name>/`, keeping each key's
 *   path below the prefix as the file's path below that directory
 *   (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-running-container.html,
 *   and https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_Channel.html, InputMode File).
 *
 * Not modelled: ManifestFile and AugmentedManifestFile data types, Pipe and FastFile modes, ShardedByS3Key.
 */
import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { S3BlobStore as BlobStore } from '../../src/adapters/s3/blobStore';

export const CHANNEL_ROOT = '/opt/ml/input/data';

export interface S3PrefixChannel {
  ChannelName: string;
  DataSource: { S3DataSource: { S3DataType: string; S3Uri: string } };
  InputMode: string;
}

/** Downloads a channel the way SageMaker would, into `<containerRoot>/opt/ml/input/data/<name>/`; returns that directory. */
export async function materializeChannel(
  blobs: BlobStore,
  channel: S3PrefixChannel,
  containerRoot: string,
): Promise<string> {
  const { S3DataType, S3Uri } = channel.DataSource.S3DataSource;
  if (S3DataType !== 'S3Prefix' || channel.InputMode !== 'File')
    throw new Error(`only File-mode S3Prefix channels are modelled, got ${S3DataType}/${channel.InputMode}`);
  const bucketUri = `s3://${blobs.bucket}/`;
  if (!S3Uri.startsWith(bucketUri)) throw new Error(`${S3Uri} is not in bucket ${blobs.bucket}`);
  const prefix = S3Uri.slice(bucketUri.length);
  const target = join(containerRoot, CHANNEL_ROOT, channel.ChannelName);
  await mkdir(target, { recursive: true });
  for (const key of await blobs.list(prefix)) {
    const file = join(target, key.slice(prefix.length));
    await mkdir(dirname(file), { recursive: true });
    await pipeline(await blobs.stream(key), createWriteStream(file));
  }
  return target;
}

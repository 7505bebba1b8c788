import { datasetHeadItem, datasetVersionItem, datasetVersionsPrefix, teamPartition } from '../recordKeys';
import { ITEM_EXISTS, WriteConflict, type Condition } from '../ports';
import type { Services } from '../context';
import { ConflictError, NotFoundError, PayloadTooLargeError, ValidationError } from '../errors';
import { newUuid } from '../ids';
import { formatOf } from './reader';
import type { RowError } from './rows';
import { limitBytes, SourceChangedError, type DatasetValidator } from './validation';

export type DatasetStatus = 'pending_upload' | 'processing' | 'ready' | 'failed';

export interface DatasetVersion {
  name: string;
  version: number;
  status: DatasetStatus;
  file_name: string;
  upload_id: string;
  declared_size_bytes: number | null;
  declared_sha256: string | null;
  size_bytes: number | null;
  sha256: string | null;
  row_count: number | null;
  task_types: string[];
  label_vocabulary: string[];
  entity_types: string[];
  relation_types: string[];
  structures: Record<string, Record<string, { dtype: 'str' | 'list' }>>;
  /** The first MAX_ERRORS_ON_RECORD problems; the full report is at `…/report`. */
  errors: RowError[];
  error_count: number;
  created_at: string;
  processed_at: string | null;
  /**
   * Bookkeeping of processing, kept off the API (`publicVersion`): attempts started (each claimed
   * by a conditional write before the file is read) and when the last one started.
   */
  processing_attempts?: number;
  processing_started_at?: string;
}

interface DatasetHead {
  name: string;
  latest_version: number;
  created_at: string;
}

const MAX_ERRORS_ON_RECORD = 100;

/**
 * Attempts at processing one version. An attempt whose process dies (out of memory, a time limit,
 * a crash) leaves the version `processing`; the next delivery of its message claims another. On
 * AWS SQS delivers a message at most 3 times (lib/data-stack.ts, maxReceiveCount), so the third
 * delivery must find the limit reached and mark the version failed, not die again into the DLQ.
 * Local start-up (`recoverProcessingVersions`) applies the same limit instead of re-queueing.
 */
export const MAX_PROCESSING_ATTEMPTS = 2;

/**
 * A `processing` version whose last attempt started longer ago than this is stuck (its message was
 * lost) and no longer blocks DELETE: every worker run ends well within it (Lambda: 15 minutes, SQS
 * redelivery after 90), and a late worker's writes are conditional on the record it claimed.
 */
export const PROCESSING_STALE_MS = 6 * 3600_000;

/** The version as the API shows it: the processing bookkeeping stays internal. */
function publicVersion(v: DatasetVersion): DatasetVersion {
  const { processing_attempts: _attempts, processing_started_at: _started, ...shown } = v;
  return shown;
}

const prefixOf = (teamId: string, name: string) => `datasets/${teamId}/${name}/`;
const versionPrefix = (teamId: string, name: string, version: number) => `${prefixOf(teamId, name)}v${version}/`;
/** The upload id makes every reservation's key unique: an old URL can never write into a new version. */
export const sourceKey = (teamId: string, v: Pick<DatasetVersion, 'name' | 'version' | 'file_name' | 'upload_id'>) =>
  `${versionPrefix(teamId, v.name, v.version)}source/${v.upload_id}/${v.file_name}`;
/** Normalized rows of a ready version, one JSON object per line: what trainers and evaluators read. */
export const rowsKey = (teamId: string, name: string, version: number) =>
  `${versionPrefix(teamId, name, version)}rows.jsonl`;
const reportKey = (teamId: string, name: string, version: number) =>
  `${versionPrefix(teamId, name, version)}report.json`;

export interface UploadUrlInput {
  dataset_name: string;
  file_name: string;
  size_bytes?: number | undefined;
  sha256?: string | undefined;
  new_version?: boolean | undefined;
}

/** Step 1: reserve a version and hand out a presigned PUT URL for its file. */
export async function createUploadUrl(svc: Services, teamId: string, input: UploadUrlInput) {
  const record = await reserveVersion(svc, teamId, input);
  const ttl = svc.config.uploadUrlTtlSeconds;
  return {
    dataset_name: input.dataset_name,
    version: record.version,
    status: record.status,
    // a declared size is signed into the URL: storage refuses a body of any other length
    upload_url: await svc.blobs.presignPut(
      sourceKey(teamId, record),
      ttl,
      input.size_bytes !== undefined ? { contentLength: input.size_bytes } : {},
    ),
    method: 'PUT' as const,
    expires_in: ttl,
    max_bytes: svc.config.maxDatasetBytes,
  };
}

/**
 * A version from a file the request itself carried (the OpenAI Files API): reserved, stored and
 * queued for the same processing as an uploaded one.
 */
export async function createFromFile(
  svc: Services,
  teamId: string,
  input: { dataset_name: string; file_name: string },
  content: Uint8Array,
): Promise<DatasetVersion> {
  const record = await reserveVersion(svc, teamId, { ...input, size_bytes: content.byteLength });
  await svc.blobs.put(sourceKey(teamId, record), content, 'application/octet-stream');
  await startProcessing(svc, teamId, input.dataset_name, record.version);
  return getVersion(svc, teamId, input.dataset_name, record.version);
}

async function reserveVersion(svc: Services, teamId: string, input: UploadUrlInput): Promise<DatasetVersion> {
  if (!formatOf(input.file_name)) {
    throw ValidationError.field(['body', 'file_name'], 'must end in .jsonl, .ndjson, .json or .csv');
  }
  if (input.size_bytes !== undefined && input.size_bytes > svc.config.maxDatasetBytes) {
    throw new PayloadTooLargeError(
      `size_bytes ${input.size_bytes} is over the ${svc.config.maxDatasetBytes} byte dataset limit`,
    );
  }
  const now = svc.now().toISOString();
  const head = datasetHeadItem(teamId, input.dataset_name);
  let version: number;
  try {
    await svc.records.put(
      head,
      { name: input.dataset_name, latest_version: 1, created_at: now } satisfies DatasetHead,
      { ifAbsent: true },
    );
    version = 1;
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
    if (!input.new_version) {
      throw new ConflictError(
        `A dataset named '${input.dataset_name}' already exists; pass "new_version": true to upload a new version of it`,
      );
    }
    const updated = await svc.records.update<DatasetHead>(head.pk, head.sk, {
      add: { latest_version: 1 },
      condition: ITEM_EXISTS,
    });
    version = updated.latest_version;
  }
  const record: DatasetVersion = {
    name: input.dataset_name,
    version,
    status: 'pending_upload',
    file_name: input.file_name,
    upload_id: newUuid(),
    declared_size_bytes: input.size_bytes ?? null,
    declared_sha256: input.sha256?.toLowerCase() ?? null,
    size_bytes: null,
    sha256: null,
    row_count: null,
    task_types: [],
    label_vocabulary: [],
    entity_types: [],
    relation_types: [],
    structures: {},
    errors: [],
    error_count: 0,
    created_at: now,
    processed_at: null,
  };
  await svc.records.put(datasetVersionItem(teamId, input.dataset_name, version), record, { ifAbsent: true });
  return record;
}

export async function getVersion(
  svc: Services,
  teamId: string,
  name: string,
  version?: number,
): Promise<DatasetVersion> {
  const head = await svc.records.get<DatasetHead>(datasetHeadItem(teamId, name).pk, datasetHeadItem(teamId, name).sk);
  if (!head) throw new NotFoundError(`Dataset '${name}' not found`);
  const v = version ?? head.latest_version;
  const item = datasetVersionItem(teamId, name, v);
  const record = await svc.records.get<DatasetVersion>(item.pk, item.sk);
  if (!record) throw new NotFoundError(`Dataset '${name}' has no version ${v}`);
  return publicVersion(record);
}

export async function listVersions(svc: Services, teamId: string, name: string): Promise<DatasetVersion[]> {
  return svc.records.queryAll<DatasetVersion>(teamPartition(teamId), { beginsWith: datasetVersionsPrefix(name) });
}

/** A dataset as read by `GET /core/datasets/{name}`: its newest version's state plus every version. */
export async function getDataset(svc: Services, teamId: string, name: string) {
  const latest = await getVersion(svc, teamId, name);
  const versions = await listVersions(svc, teamId, name);
  return {
    ...latest,
    versions: versions.map((v) => ({
      version: v.version,
      status: v.status,
      row_count: v.row_count,
      created_at: v.created_at,
    })),
  };
}

/** The newest `ready` version, which is what training and evaluation use unless pinned. */
export async function latestReadyVersion(
  svc: Services,
  teamId: string,
  name: string,
): Promise<DatasetVersion | undefined> {
  const versions = await listVersions(svc, teamId, name);
  return versions.reverse().find((v) => v.status === 'ready');
}

/** Each dataset's newest version, from one query over the team's version items. */
export async function listDatasets(svc: Services, teamId: string) {
  const versions = await svc.records.queryAll<DatasetVersion>(teamPartition(teamId), {
    beginsWith: datasetVersionsPrefix(),
  });
  const latest = new Map<string, DatasetVersion>();
  for (const v of versions) if ((latest.get(v.name)?.version ?? 0) < v.version) latest.set(v.name, v);
  return [...latest.values()].sort((a, b) => a.name.localeCompare(b.name)).map(publicVersion);
}

/**
 * Deletes every version's records and files. Files first: a record never points at nothing. A
 * version being processed blocks it (409) unless it is stuck: no attempt started within
 * PROCESSING_STALE_MS.
 */
export async function deleteDataset(svc: Services, teamId: string, name: string): Promise<void> {
  const head = datasetHeadItem(teamId, name);
  if (!(await svc.records.get(head.pk, head.sk))) throw new NotFoundError(`Dataset '${name}' not found`);
  const versions = await listVersions(svc, teamId, name);
  const now = svc.now().getTime();
  const busy = versions.find(
    (v) => v.status === 'processing' && now - Date.parse(v.processing_started_at ?? v.created_at) < PROCESSING_STALE_MS,
  );
  if (busy) {
    throw new ConflictError(
      `Dataset '${name}' has a version being processed (version ${busy.version}); delete it once processing ends (a version that stays processing for ${PROCESSING_STALE_MS / 3600_000} hours without a new attempt can be deleted)`,
    );
  }
  await svc.blobs.deletePrefix(prefixOf(teamId, name));
  for (const v of versions) {
    const item = datasetVersionItem(teamId, name, v.version);
    await svc.records.delete(item.pk, item.sk);
  }
  await svc.records.delete(head.pk, head.sk);
}

/** Step 3: check the upload is there and whole, then queue validation. */
export async function startProcessing(svc: Services, teamId: string, name: string, version?: number) {
  const record = await getVersion(svc, teamId, name, version);
  if (record.status !== 'pending_upload') {
    throw new ConflictError(
      `Dataset '${name}' version ${record.version} is already ${record.status}; upload a new version to change it`,
    );
  }
  const head = await svc.blobs.head(sourceKey(teamId, record));
  if (!head) {
    throw new ConflictError(
      `No file has been uploaded for dataset '${name}' version ${record.version}; PUT it to the upload URL first`,
    );
  }
  if (head.size > svc.config.maxDatasetBytes) {
    throw new PayloadTooLargeError(
      `The uploaded file is ${head.size} bytes, over the ${svc.config.maxDatasetBytes} byte dataset limit`,
    );
  }
  if (record.declared_size_bytes !== null && head.size !== record.declared_size_bytes) {
    throw new ConflictError(
      `The upload looks truncated or altered: size_bytes was declared as ${record.declared_size_bytes} but storage holds ${head.size} bytes; PUT the file again`,
    );
  }
  const item = datasetVersionItem(teamId, name, record.version);
  try {
    await svc.records.update(item.pk, item.sk, {
      set: { status: 'processing', size_bytes: head.size, processing_started_at: svc.now().toISOString() },
      condition: [{ attr: 'status', equals: 'pending_upload' }],
    });
  } catch (err) {
    if (err instanceof WriteConflict)
      throw new ConflictError(`Dataset '${name}' version ${record.version} is already being processed`);
    throw err;
  }
  try {
    await svc.queue.send({ type: 'dataset.process', team_id: teamId, dataset_name: name, version: record.version });
  } catch (err) {
    // Nothing will process it: put the version back so the caller can retry (on AWS nothing
    // re-queues `processing` versions, and one stuck there can be neither processed nor deleted).
    await svc.records
      .update(item.pk, item.sk, {
        set: { status: 'pending_upload' },
        condition: [{ attr: 'status', equals: 'processing' }],
      })
      .catch((resetError: unknown) => {
        // already moved on (a worker took it after all): nothing to put back; a store failure propagates
        if (!(resetError instanceof WriteConflict)) throw resetError;
      });
    throw err;
  }
  return { dataset_name: name, version: record.version, status: 'processing' as const };
}

/**
 * Step 4 (worker): read the file once, validate every row, and either publish the normalized rows
 * and flip the version to `ready`, or mark it `failed` with the report. Idempotent: a version no
 * longer `processing` is left alone, so a redelivered message does nothing. Each attempt is claimed
 * first (`claimAttempt`): a version whose attempts keep killing their worker ends `failed`.
 * `validate` runs the rows (default: `svc.datasetFiles.validate`; local mode passes one that runs them in a child process).
 */
export async function processVersion(
  svc: Services,
  teamId: string,
  name: string,
  version: number,
  validate: DatasetValidator = svc.datasetFiles.validate,
): Promise<void> {
  const record = await claimAttempt(svc, teamId, name, version);
  if (!record) return;
  const item = datasetVersionItem(teamId, name, version);
  const scratch = await svc.datasetFiles.open();
  const { rowsFile } = scratch;
  try {
    // Read no more than was checked when processing started (F9: a re-PUT in between is refused, not streamed).
    const checked = record.size_bytes;
    const source = limitBytes(
      await svc.blobs.stream(sourceKey(teamId, record)),
      checked ?? svc.config.maxDatasetBytes,
      checked !== null,
    );
    let outcome: Awaited<ReturnType<typeof validate>>;
    try {
      outcome = await validate(source, {
        format: formatOf(record.file_name) ?? 'jsonl',
        maxRowBytes: svc.config.maxRowBytes,
        maxJsonBytes: 64 * 1024 * 1024,
        rowsFile,
        declaredSha256: record.declared_sha256,
      });
    } catch (err) {
      if (!(err instanceof SourceChangedError)) throw err;
      await failVersion(svc, teamId, name, version, err.message);
      return;
    }
    // The result lands only on the record this attempt claimed: not on a version deleted meanwhile
    // (or one re-created under the same name), nor after another attempt finished it.
    const claimed: Condition = [
      { attr: 'status', equals: 'processing' },
      // (a record written before upload ids existed has none)
      record.upload_id === undefined
        ? { attr: 'upload_id', present: false }
        : { attr: 'upload_id', equals: record.upload_id },
    ];
    const processedAt = svc.now().toISOString();
    if (outcome.errorCount > 0) {
      const key = reportKey(teamId, name, version);
      await svc.blobs.put(
        key,
        JSON.stringify({ error_count: outcome.errorCount, errors: outcome.errors }),
        'application/json',
      );
      await settle(svc, record, key, item, {
        set: {
          status: 'failed',
          sha256: outcome.sha256,
          size_bytes: outcome.bytes,
          errors: outcome.errors.slice(0, MAX_ERRORS_ON_RECORD),
          error_count: outcome.errorCount,
          processed_at: processedAt,
          row_count: outcome.summary.row_count,
        },
        condition: claimed,
      });
      return;
    }
    const key = rowsKey(teamId, name, version);
    await svc.blobs.put(key, scratch.rows(), 'application/x-ndjson');
    await settle(svc, record, key, item, {
      set: {
        ...outcome.summary,
        status: 'ready',
        sha256: outcome.sha256,
        size_bytes: outcome.bytes,
        processed_at: processedAt,
      },
      condition: claimed,
    });
  } finally {
    await scratch.dispose();
  }
}

/**
 * Claims one processing attempt (a conditional write: still `processing`, attempts under the limit)
 * and returns the record as claimed; undefined when there is nothing to do. A version out of
 * attempts is marked failed here, so a message that keeps killing its worker ends.
 */
async function claimAttempt(
  svc: Services,
  teamId: string,
  name: string,
  version: number,
): Promise<DatasetVersion | undefined> {
  const item = datasetVersionItem(teamId, name, version);
  try {
    return await svc.records.update<DatasetVersion>(item.pk, item.sk, {
      add: { processing_attempts: 1 },
      set: { processing_started_at: svc.now().toISOString() },
      condition: [
        { attr: 'status', equals: 'processing' },
        {
          anyOf: [
            { attr: 'processing_attempts', present: false },
            { attr: 'processing_attempts', lessThan: MAX_PROCESSING_ATTEMPTS },
          ],
        },
      ],
    });
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
  }
  const current = await svc.records.get<DatasetVersion>(item.pk, item.sk, true);
  if (current?.status === 'processing') await failExhausted(svc, teamId, current);
  return undefined;
}

/** Marks a version failed whose every attempt ended without a result. */
async function failExhausted(svc: Services, teamId: string, v: DatasetVersion): Promise<void> {
  const attempts = v.processing_attempts ?? 0;
  const message =
    `validation of this version stopped the worker ${attempts} time${attempts === 1 ? '' : 's'}: each attempt ended without a result ` +
    '(its process ran out of memory or time, or crashed), so it is not tried again; check the largest rows, then upload the file as a new version';
  await failVersion(svc, teamId, v.name, v.version, message).catch((err: unknown) => {
    if (!(err instanceof WriteConflict)) throw err; // another attempt settled it meanwhile
  });
}

/**
 * The attempt's final write, on the record it claimed. When that record is gone or is another
 * upload's, the file just written belongs to nobody and is removed again.
 */
async function settle(
  svc: Services,
  claimed: DatasetVersion,
  writtenKey: string,
  item: { pk: string; sk: string },
  change: { set: Record<string, unknown>; condition: Condition },
): Promise<void> {
  try {
    await svc.records.update(item.pk, item.sk, change);
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
    const current = await svc.records.get<DatasetVersion>(item.pk, item.sk, true);
    if (current?.upload_id !== claimed.upload_id) await svc.blobs.deletePrefix(writtenKey);
  }
}

/** Marks a version failed with one reason (used when processing itself crashed). */
export async function failVersion(
  svc: Services,
  teamId: string,
  name: string,
  version: number,
  message: string,
): Promise<void> {
  const item = datasetVersionItem(teamId, name, version);
  await svc.records.update(item.pk, item.sk, {
    set: {
      status: 'failed',
      errors: [{ row: null, field: null, message }],
      error_count: 1,
      processed_at: svc.now().toISOString(),
    },
    condition: [{ attr: 'status', equals: 'processing' }],
  });
}

export async function getReport(svc: Services, teamId: string, name: string, version: number) {
  const record = await getVersion(svc, teamId, name, version);
  if (record.status !== 'failed')
    return {
      dataset_name: name,
      version,
      status: record.status,
      error_count: record.error_count,
      errors: record.errors,
    };
  // A version failed by a crash (failVersion) has no report file: its one reason is on the record.
  if (!(await svc.blobs.head(reportKey(teamId, name, version)))) {
    return {
      dataset_name: name,
      version,
      status: record.status,
      error_count: record.error_count,
      errors: record.errors,
    };
  }
  const report = JSON.parse(await svc.blobs.getText(reportKey(teamId, name, version))) as {
    error_count: number;
    errors: RowError[];
  };
  return { dataset_name: name, version, status: record.status, ...report };
}

/** Versions left `processing` by a crash or a restart. */
export async function findProcessingVersions(svc: Services, teamId: string) {
  const versions = await svc.records.queryAll<DatasetVersion>(teamPartition(teamId), {
    beginsWith: datasetVersionsPrefix(),
  });
  return versions.filter((v) => v.status === 'processing');
}

/**
 * Local start-up: each version left `processing` is queued again, unless its attempts are spent
 * (the process died during each of them): that one is marked failed, so a file that kills its
 * worker cannot make the server crash at every start.
 */
export async function recoverProcessingVersions(
  svc: Services,
  teamId: string,
): Promise<{ requeued: number; failed: number }> {
  const recovered = { requeued: 0, failed: 0 };
  for (const v of await findProcessingVersions(svc, teamId)) {
    if ((v.processing_attempts ?? 0) >= MAX_PROCESSING_ATTEMPTS) {
      await failExhausted(svc, teamId, v);
      recovered.failed += 1;
    } else {
      await svc.queue.send({ type: 'dataset.process', team_id: teamId, dataset_name: v.name, version: v.version });
      recovered.requeued += 1;
    }
  }
  return recovered;
}

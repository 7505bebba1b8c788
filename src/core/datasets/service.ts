import { datasetHeadItem, datasetVersionItem, datasetVersionsPrefix, teamPartition } from '../recordKeys';
import { ITEM_EXISTS, WriteConflict } from '../ports';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Services } from '../context';
import { ConflictError, NotFoundError, PayloadTooLargeError, ValidationError } from '../errors';
import { newUuid } from '../ids';
import { ByteTally, formatOf, readRows } from './reader';
import { DatasetSummary, validateRow, type RowError } from './rows';

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
}

interface DatasetHead {
  name: string;
  latest_version: number;
  created_at: string;
}

const MAX_ERRORS_ON_RECORD = 100;
const MAX_ERRORS_IN_REPORT = 100_000;

const prefixOf = (teamId: string, name: string) => `datasets/${teamId}/${name}/`;
const versionPrefix = (teamId: string, name: string, version: number) => `${prefixOf(teamId, name)}v${version}/`;
/** The upload id makes every reservation's key unique: an old URL can never write into a new version. */
export const sourceKey = (teamId: string, v: Pick<DatasetVersion, 'name' | 'version' | 'file_name' | 'upload_id'>) =>
  `${versionPrefix(teamId, v.name, v.version)}source/${v.upload_id}/${v.file_name}`;
/** Normalized rows of a ready version, one JSON object per line: what trainers and evaluators read. */
export const rowsKey = (teamId: string, name: string, version: number) => `${versionPrefix(teamId, name, version)}rows.jsonl`;
const reportKey = (teamId: string, name: string, version: number) => `${versionPrefix(teamId, name, version)}report.json`;

export interface UploadUrlInput {
  dataset_name: string;
  file_name: string;
  size_bytes?: number | undefined;
  sha256?: string | undefined;
  new_version?: boolean | undefined;
}

/** Step 1: reserve a version and hand out a presigned PUT URL for its file. */
export async function createUploadUrl(svc: Services, teamId: string, input: UploadUrlInput) {
  if (!formatOf(input.file_name)) {
    throw ValidationError.field(['body', 'file_name'], 'must end in .jsonl, .ndjson, .json or .csv');
  }
  if (input.size_bytes !== undefined && input.size_bytes > svc.config.maxDatasetBytes) {
    throw new PayloadTooLargeError(`size_bytes ${input.size_bytes} is over the ${svc.config.maxDatasetBytes} byte dataset limit`);
  }
  const now = svc.now().toISOString();
  const head = datasetHeadItem(teamId, input.dataset_name);
  let version: number;
  try {
    await svc.records.put(head, { name: input.dataset_name, latest_version: 1, created_at: now } satisfies DatasetHead, { ifAbsent: true });
    version = 1;
  } catch (err) {
    if (!(err instanceof WriteConflict)) throw err;
    if (!input.new_version) {
      throw new ConflictError(`A dataset named '${input.dataset_name}' already exists; pass "new_version": true to upload a new version of it`);
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
  const ttl = svc.config.uploadUrlTtlSeconds;
  return {
    dataset_name: input.dataset_name,
    version,
    status: record.status,
    upload_url: await svc.blobs.presignPut(sourceKey(teamId, record), ttl),
    method: 'PUT' as const,
    expires_in: ttl,
    max_bytes: svc.config.maxDatasetBytes,
  };
}

export async function getVersion(svc: Services, teamId: string, name: string, version?: number): Promise<DatasetVersion> {
  const head = await svc.records.get<DatasetHead>(datasetHeadItem(teamId, name).pk, datasetHeadItem(teamId, name).sk);
  if (!head) throw new NotFoundError(`Dataset '${name}' not found`);
  const v = version ?? head.latest_version;
  const item = datasetVersionItem(teamId, name, v);
  const record = await svc.records.get<DatasetVersion>(item.pk, item.sk);
  if (!record) throw new NotFoundError(`Dataset '${name}' has no version ${v}`);
  return record;
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
    versions: versions.map((v) => ({ version: v.version, status: v.status, row_count: v.row_count, created_at: v.created_at })),
  };
}

/** The newest `ready` version, which is what training and evaluation use unless pinned. */
export async function latestReadyVersion(svc: Services, teamId: string, name: string): Promise<DatasetVersion | undefined> {
  const versions = await listVersions(svc, teamId, name);
  return versions.reverse().find((v) => v.status === 'ready');
}

/** Each dataset's newest version, from one query over the team's version items. */
export async function listDatasets(svc: Services, teamId: string) {
  const versions = await svc.records.queryAll<DatasetVersion>(teamPartition(teamId), { beginsWith: datasetVersionsPrefix() });
  const latest = new Map<string, DatasetVersion>();
  for (const v of versions) if ((latest.get(v.name)?.version ?? 0) < v.version) latest.set(v.name, v);
  return [...latest.values()].sort((a, b) => a.name.localeCompare(b.name));
}

/** Deletes every version's records and files. Files first: a record never points at nothing. */
export async function deleteDataset(svc: Services, teamId: string, name: string): Promise<void> {
  const head = datasetHeadItem(teamId, name);
  if (!(await svc.records.get(head.pk, head.sk))) throw new NotFoundError(`Dataset '${name}' not found`);
  const versions = await listVersions(svc, teamId, name);
  if (versions.some((v) => v.status === 'processing')) {
    throw new ConflictError(`Dataset '${name}' has a version being processed; delete it once processing ends`);
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
    throw new ConflictError(`Dataset '${name}' version ${record.version} is already ${record.status}; upload a new version to change it`);
  }
  const head = await svc.blobs.head(sourceKey(teamId, record));
  if (!head) {
    throw new ConflictError(`No file has been uploaded for dataset '${name}' version ${record.version}; PUT it to the upload URL first`);
  }
  if (head.size > svc.config.maxDatasetBytes) {
    throw new PayloadTooLargeError(`The uploaded file is ${head.size} bytes, over the ${svc.config.maxDatasetBytes} byte dataset limit`);
  }
  if (record.declared_size_bytes !== null && head.size !== record.declared_size_bytes) {
    throw new ConflictError(
      `The upload looks truncated or altered: size_bytes was declared as ${record.declared_size_bytes} but storage holds ${head.size} bytes; PUT the file again`,
    );
  }
  const item = datasetVersionItem(teamId, name, record.version);
  try {
    await svc.records.update(item.pk, item.sk, {
      set: { status: 'processing', size_bytes: head.size },
      condition: [{ attr: 'status', equals: 'pending_upload' }],
    });
  } catch (err) {
    if (err instanceof WriteConflict) throw new ConflictError(`Dataset '${name}' version ${record.version} is already being processed`);
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
      .catch(() => {});
    throw err;
  }
  return { dataset_name: name, version: record.version, status: 'processing' as const };
}

/**
 * Step 4 (worker): read the file once, validate every row, and either publish the normalized rows
 * and flip the version to `ready`, or mark it `failed` with the full report. Idempotent: a version
 * no longer `processing` is left alone, so a redelivered message does nothing.
 */
export async function processVersion(svc: Services, teamId: string, name: string, version: number): Promise<void> {
  const item = datasetVersionItem(teamId, name, version);
  const record = await svc.records.get<DatasetVersion>(item.pk, item.sk);
  if (!record || record.status !== 'processing') return;

  const format = formatOf(record.file_name) ?? 'jsonl';
  const summary = new DatasetSummary();
  const errors: RowError[] = [];
  let errorCount = 0;
  const note = (e: RowError) => {
    errorCount += 1;
    if (errors.length < MAX_ERRORS_IN_REPORT) errors.push(e);
  };
  let rowsRead = 0;
  const tally = new ByteTally();
  const dir = await mkdtemp(join(tmpdir(), 'sift-ds-'));
  const rowsFile = join(dir, 'rows.jsonl');
  try {
    const out = createWriteStream(rowsFile);
    const source = await svc.blobs.stream(sourceKey(teamId, record));
    for await (const parsed of readRows(format, tally.tap(source), {
      maxRowBytes: svc.config.maxRowBytes,
      maxJsonBytes: 64 * 1024 * 1024,
    })) {
      rowsRead += 1;
      if ('error' in parsed) {
        note({ row: parsed.row || null, field: null, message: parsed.error });
        continue;
      }
      const result = validateRow(format === 'csv' ? csvRow(parsed.value) : parsed.value, parsed.row);
      result.errors.forEach(note);
      if (!result.row) continue;
      summary.add(result.row, result.tasks, parsed.row).forEach(note);
      if (errorCount === 0 && !out.write(JSON.stringify(result.row) + '\n')) await new Promise((r) => out.once('drain', () => r(undefined)));
    }
    await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())));
    summary.finish(rowsRead).forEach(note);
    const sha256 = tally.hash.digest('hex');
    if (record.declared_sha256 && record.declared_sha256 !== sha256) {
      note({ row: null, field: null, message: `the file's sha256 is ${sha256}, not the declared ${record.declared_sha256}: the upload is truncated or altered` });
    }
    const processedAt = svc.now().toISOString();
    if (errorCount > 0) {
      await svc.blobs.put(reportKey(teamId, name, version), JSON.stringify({ error_count: errorCount, errors }), 'application/json');
      await svc.records.update(item.pk, item.sk, {
        set: {
          status: 'failed',
          sha256,
          size_bytes: tally.bytes,
          errors: errors.slice(0, MAX_ERRORS_ON_RECORD),
          error_count: errorCount,
          processed_at: processedAt,
          row_count: summary.rowCount,
        },
      });
      return;
    }
    await svc.blobs.put(rowsKey(teamId, name, version), createReadStream(rowsFile), 'application/x-ndjson');
    await svc.records.update(item.pk, item.sk, {
      set: { ...summary.describe(), status: 'ready', sha256, size_bytes: tally.bytes, processed_at: processedAt },
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Marks a version failed with one reason (used when processing itself crashed). */
export async function failVersion(svc: Services, teamId: string, name: string, version: number, message: string): Promise<void> {
  const item = datasetVersionItem(teamId, name, version);
  await svc.records.update(item.pk, item.sk, {
    set: { status: 'failed', errors: [{ row: null, field: null, message }], error_count: 1, processed_at: svc.now().toISOString() },
    condition: [{ attr: 'status', equals: 'processing' }],
  });
}

export async function getReport(svc: Services, teamId: string, name: string, version: number) {
  const record = await getVersion(svc, teamId, name, version);
  if (record.status !== 'failed') return { dataset_name: name, version, status: record.status, error_count: record.error_count, errors: record.errors };
  // A version failed by a crash (failVersion) has no report file: its one reason is on the record.
  if (!(await svc.blobs.head(reportKey(teamId, name, version)))) {
    return { dataset_name: name, version, status: record.status, error_count: record.error_count, errors: record.errors };
  }
  const report = JSON.parse(await svc.blobs.getText(reportKey(teamId, name, version))) as { error_count: number; errors: RowError[] };
  return { dataset_name: name, version, status: record.status, ...report };
}

/** CSV cells are strings; `labels` may be given as a JSON array or `a|b|c`. Empty cells are absent. */
function csvRow(value: unknown): unknown {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value as Record<string, string>)) {
    if (v === '') continue;
    if (k === 'labels') out[k] = v.trim().startsWith('[') ? safeJson(v) : v.split('|').map((s) => s.trim());
    else out[k] = v;
  }
  return out;
}

function safeJson(v: string): unknown {
  try {
    return JSON.parse(v);
  } catch {
    return v;
  }
}

/** Versions left `processing` by a crash: local mode re-queues them on start. */
export async function findProcessingVersions(svc: Services, teamId: string) {
  const versions = await svc.records.queryAll<DatasetVersion>(teamPartition(teamId), { beginsWith: datasetVersionsPrefix() });
  return versions.filter((v) => v.status === 'processing');
}

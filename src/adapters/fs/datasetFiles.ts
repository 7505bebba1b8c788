/**
 * Dataset processing's local files (the core's `DatasetFiles`, `svc.datasetFiles`): each attempt gets
 * a private directory under the OS temp dir, the validator writes the normalized rows into
 * `rows.jsonl` there, processing uploads them from it, and the directory is removed when it ends.
 */
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { validateRows, type DatasetFiles, type DatasetValidator } from '../../core/datasets/validation';

/** The core's row rules over a file's bytes, the normalized rows written to `job.rowsFile`. */
export const validateDataset: DatasetValidator = async (source, job) =>
  validateRows(source, job, createWriteStream(job.rowsFile));

export const localDatasetFiles: DatasetFiles = {
  async open() {
    const dir = await mkdtemp(join(tmpdir(), 'sift-ds-'));
    const rowsFile = join(dir, 'rows.jsonl');
    return {
      rowsFile,
      rows: () => createReadStream(rowsFile),
      dispose: () => rm(dir, { recursive: true, force: true }),
    };
  },
  validate: validateDataset,
};

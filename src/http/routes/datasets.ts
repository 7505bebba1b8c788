import { z } from 'zod';
import {
  createUploadUrl,
  deleteDataset,
  getDataset,
  getReport,
  getVersion,
  listDatasets,
  startProcessing,
} from '../../core/datasets/service';
import { json, route } from '../types';
import { resourceName } from '../validation';
import { DatasetVersionSchema, RowErrorSchema, list } from './schemas';

const versionParam = z
  .string()
  .regex(/^[1-9]\d{0,5}$/, 'must be a positive integer')
  .transform(Number);
// Regexes, not refinements, so the OpenAPI document states every rule (no "..", a known format).
export const fileName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9][A-Za-z0-9_ -]*(?:\.[A-Za-z0-9_ -]+)*\.?$/, 'must be a plain file name (no directories, no "..")')
  .regex(
    /\.(?:[Jj][Ss][Oo][Nn][Ll]?|[Nn][Dd][Jj][Ss][Oo][Nn]|[Cc][Ss][Vv])$/,
    'must end in .jsonl, .ndjson, .json or .csv',
  );

export const datasetRoutes = [
  route({
    method: 'POST',
    path: '/core/datasets/upload/url',
    tag: 'datasets',
    summary: 'Reserve a dataset version and get a presigned URL to PUT its file to',
    description:
      'Formats: JSONL (.jsonl/.ndjson), a JSON array (.json) or CSV with a header (.csv). Declare `size_bytes` and the URL takes a body of exactly that many bytes (the length is signed into it: storage answers 403 to any other); declare `sha256` and a file that does not match fails processing. An existing name needs `new_version: true`.',
    body: z.strictObject({
      dataset_name: resourceName,
      file_name: fileName,
      size_bytes: z
        .number()
        .int()
        .positive()
        .optional()
        .describe("The file's exact size in bytes: signed into the upload URL, which then accepts no other length"),
      sha256: z
        .string()
        .regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex digits')
        .optional(),
      new_version: z.boolean().optional(),
    }),
    responses: {
      200: {
        description: 'Upload URL',
        schema: z.object({
          dataset_name: z.string(),
          version: z.number(),
          status: z.literal('pending_upload'),
          upload_url: z.string(),
          method: z.literal('PUT'),
          expires_in: z.number(),
          max_bytes: z.number(),
        }),
      },
      409: { description: 'Name taken (pass new_version)' },
      413: { description: 'Declared size over the limit' },
    },
    handler: async ({ svc, principal, body }) => json(200, await createUploadUrl(svc, principal.team_id, body)),
  }),
  route({
    method: 'POST',
    path: '/core/datasets/upload/process',
    tag: 'datasets',
    summary: 'Validate the uploaded file; poll the version until ready or failed',
    body: z.strictObject({ dataset_name: resourceName, version: z.number().int().positive().optional() }),
    responses: {
      202: {
        description: 'Processing',
        schema: z.object({ dataset_name: z.string(), version: z.number(), status: z.literal('processing') }),
      },
      404: { description: 'Dataset or version not found' },
      409: { description: 'Nothing uploaded, upload truncated, or already processed' },
    },
    handler: async ({ svc, principal, body }) =>
      json(202, await startProcessing(svc, principal.team_id, body.dataset_name, body.version)),
  }),
  route({
    method: 'GET',
    path: '/core/datasets',
    tag: 'datasets',
    summary: 'List datasets (each with its newest version)',
    responses: { 200: { description: 'Datasets', schema: list(DatasetVersionSchema) } },
    handler: async ({ svc, principal }) => json(200, { data: await listDatasets(svc, principal.team_id) }),
  }),
  route({
    method: 'GET',
    path: '/core/datasets/:name',
    tag: 'datasets',
    summary: 'Read a dataset: its newest version and the list of versions',
    params: z.object({ name: resourceName }),
    responses: {
      200: {
        description: 'Dataset',
        schema: DatasetVersionSchema.extend({
          versions: z.array(
            z.object({
              version: z.number(),
              status: z.string(),
              row_count: z.number().nullable(),
              created_at: z.string(),
            }),
          ),
        }),
      },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params }) => json(200, await getDataset(svc, principal.team_id, params.name)),
  }),
  route({
    method: 'GET',
    path: '/core/datasets/:name/:version',
    tag: 'datasets',
    summary: 'Read one version; poll until status is ready (or failed, with its errors)',
    params: z.object({ name: resourceName, version: versionParam }),
    responses: { 200: { description: 'Version', schema: DatasetVersionSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) =>
      json(200, await getVersion(svc, principal.team_id, params.name, params.version)),
  }),
  route({
    method: 'GET',
    path: '/core/datasets/:name/:version/report',
    tag: 'datasets',
    summary: 'The full validation report of a version (every row error)',
    params: z.object({ name: resourceName, version: versionParam }),
    responses: {
      200: {
        description: 'Report',
        schema: z.object({
          dataset_name: z.string(),
          version: z.number(),
          status: z.string(),
          error_count: z.number(),
          errors: z.array(RowErrorSchema),
        }),
      },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params }) =>
      json(200, await getReport(svc, principal.team_id, params.name, params.version)),
  }),
  route({
    method: 'DELETE',
    path: '/core/datasets/:name',
    tag: 'datasets',
    summary: 'Delete a dataset with every version and file',
    params: z.object({ name: resourceName }),
    responses: {
      200: { description: 'Deleted', schema: z.object({ name: z.string(), deleted: z.literal(true) }) },
      404: { description: 'Not found' },
    },
    handler: async ({ svc, principal, params }) => {
      await deleteDataset(svc, principal.team_id, params.name);
      return json(200, { name: params.name, deleted: true });
    },
  }),
];

/**
 * OpenAI's Files API (`/v1/files`, purpose `fine-tune`) over Sift datasets: a file is version 1 of a
 * dataset named by the file id, processed with the same row rules (docs/reference/decisions.md#dataset-rows).
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Services } from '../../../core/context';
import {
  createFromFile,
  deleteDataset,
  getVersion,
  listDatasets,
  sourceKey,
  type DatasetVersion,
} from '../../../core/datasets/service';
import { NotFoundError } from '../../../core/errors';
import { json, route } from '../../types';
import { fileName } from '../datasets';
import { cursorPage, CursorQuery } from './openaiPages';

export const FILE_ID_RE = /^file-[0-9a-f]{32}$/;

const FileObject = z.object({
  id: z.string(),
  object: z.literal('file'),
  bytes: z.number(),
  created_at: z.number(),
  filename: z.string(),
  purpose: z.literal('fine-tune'),
  status: z.enum(['uploaded', 'processed', 'error']),
  status_details: z.string().nullable(),
});

const STATUS: Record<DatasetVersion['status'], z.infer<typeof FileObject>['status']> = {
  pending_upload: 'uploaded',
  processing: 'uploaded',
  ready: 'processed',
  failed: 'error',
};

export const unixSeconds = (iso: string) => Math.floor(Date.parse(iso) / 1000);

function fileObject(v: DatasetVersion): z.infer<typeof FileObject> {
  const details = v.errors
    .slice(0, 5)
    .map((e) => [e.row !== null ? `row ${e.row}` : null, e.field, e.message].filter(Boolean).join(' '))
    .join('; ');
  return {
    id: v.name,
    object: 'file',
    bytes: v.size_bytes ?? v.declared_size_bytes ?? 0,
    created_at: unixSeconds(v.created_at),
    filename: v.file_name,
    purpose: 'fine-tune',
    status: STATUS[v.status],
    status_details: v.status === 'failed' ? `${v.error_count} row error(s): ${details}` : null,
  };
}

/** The dataset version behind a file id; OpenAI's 404 otherwise. */
export async function fileVersion(svc: Services, teamId: string, id: string, param = 'file_id') {
  if (!FILE_ID_RE.test(id)) throw new NotFoundError(`No such File object: ${id}`, { param, code: 'file_not_found' });
  return getVersion(svc, teamId, id, 1).catch((err: unknown) => {
    if (err instanceof NotFoundError)
      throw new NotFoundError(`No such File object: ${id}`, { param, code: 'file_not_found' });
    throw err;
  });
}

export const openAiFileRoutes = [
  route({
    method: 'POST',
    path: '/v1/files',
    tag: 'openai-fine-tuning',
    summary: 'Upload a fine-tuning file (OpenAI Files API, multipart)',
    description:
      'purpose `fine-tune` only; a .jsonl file of chat rows `{messages}` or preference rows `{input, preferred_output, non_preferred_output}`, up to the request body limit (10 MB). Stored as dataset version 1 named by the file id and validated like any dataset: poll until status is processed (or error, with status_details).',
    bodyType: 'multipart',
    body: z.strictObject({
      purpose: z.literal('fine-tune', { message: "only 'fine-tune' files are served here" }),
      file: z.file().refine((f) => fileName.safeParse(f.name).success && /\.jsonl$/i.test(f.name), {
        message: 'must be a .jsonl file with a plain file name',
      }),
    }),
    responses: {
      200: { description: 'The file, status uploaded (processing)', schema: FileObject },
      413: { description: 'Over the request body limit' },
    },
    handler: async ({ svc, principal, body }) => {
      const id = `file-${randomBytes(16).toString('hex')}`;
      const content = new Uint8Array(await body.file.arrayBuffer());
      const version = await createFromFile(
        svc,
        principal.team_id,
        { dataset_name: id, file_name: body.file.name },
        content,
      );
      return json(200, fileObject(version));
    },
  }),
  route({
    method: 'GET',
    path: '/v1/files',
    tag: 'openai-fine-tuning',
    summary: "List the team's files, newest first",
    query: CursorQuery.extend({ purpose: z.string().optional(), order: z.enum(['asc', 'desc']).optional() }),
    responses: {
      200: {
        description: 'A page of files',
        schema: z.object({ object: z.literal('list'), data: z.array(FileObject), has_more: z.boolean() }),
      },
    },
    handler: async ({ svc, principal, query }) => {
      // by the stored creation time (milliseconds), the id breaking ties, so pages never reorder
      const direction = query.order === 'asc' ? 1 : -1;
      const files = (await listDatasets(svc, principal.team_id))
        .filter((v) => FILE_ID_RE.test(v.name) && (query.purpose ?? 'fine-tune') === 'fine-tune')
        .sort((a, b) => direction * (a.created_at.localeCompare(b.created_at) || a.name.localeCompare(b.name)))
        .map(fileObject);
      return json(200, cursorPage(files, query));
    },
  }),
  route({
    method: 'GET',
    path: '/v1/files/:file_id',
    tag: 'openai-fine-tuning',
    summary: 'Retrieve a file',
    params: z.object({ file_id: z.string() }),
    responses: { 200: { description: 'The file', schema: FileObject }, 404: { description: 'No such file' } },
    handler: async ({ svc, principal, params }) =>
      json(200, fileObject(await fileVersion(svc, principal.team_id, params.file_id))),
  }),
  route({
    method: 'GET',
    path: '/v1/files/:file_id/content',
    tag: 'openai-fine-tuning',
    summary: 'The file as uploaded',
    params: z.object({ file_id: z.string() }),
    responses: {
      200: { description: 'The file', contentType: 'application/octet-stream' },
      404: { description: 'No such file' },
    },
    handler: async ({ svc, principal, params }) => {
      const version = await fileVersion(svc, principal.team_id, params.file_id);
      const stream = await svc.blobs.stream(sourceKey(principal.team_id, version));
      return { status: 200, headers: { 'content-type': 'application/octet-stream' }, stream };
    },
  }),
  route({
    method: 'DELETE',
    path: '/v1/files/:file_id',
    tag: 'openai-fine-tuning',
    summary: 'Delete a file (its dataset, every version and file)',
    params: z.object({ file_id: z.string() }),
    responses: {
      200: {
        description: 'Deleted',
        schema: z.object({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) }),
      },
      404: { description: 'No such file' },
    },
    handler: async ({ svc, principal, params }) => {
      await fileVersion(svc, principal.team_id, params.file_id);
      await deleteDataset(svc, principal.team_id, params.file_id);
      return json(200, { id: params.file_id, object: 'file', deleted: true });
    },
  }),
];

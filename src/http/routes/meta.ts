import { z } from 'zod';
import { CATALOG } from '../../core/catalog';
import { NotFoundError } from '../../core/errors';
import { json, route } from '../types';

const CREATED = Math.floor(Date.parse('2026-01-01T00:00:00Z') / 1000);
const openAiModel = (id: string) => ({ id, object: 'model' as const, created: CREATED, owned_by: id.split('/')[0] ?? 'sift' });
const OpenAiModel = z.object({ id: z.string(), object: z.literal('model'), created: z.number(), owned_by: z.string() });

/** Routes that need no credentials. `/openapi.json` is added by openapi.ts, which needs every route. */
export const metaRoutes = [
  route({
    method: 'GET',
    path: '/health',
    tag: 'meta',
    summary: 'Liveness: the process answers',
    auth: 'public',
    responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
    handler: async () => json(200, { status: 'ok' }),
  }),
  route({
    method: 'GET',
    path: '/v1/models',
    tag: 'compatible',
    summary: 'List models (OpenAI/Anthropic-compatible; public, 200 without credentials)',
    auth: 'public',
    limit: 'default',
    responses: { 200: { description: 'Model list', schema: z.object({ object: z.literal('list'), data: z.array(OpenAiModel) }) } },
    handler: async () => json(200, { object: 'list', data: CATALOG.map((m) => openAiModel(m.id)) }),
  }),
  route({
    method: 'GET',
    path: '/v1/models/*',
    tag: 'compatible',
    summary: 'One model (ids contain a slash: /v1/models/fastino/gliner2-base-v1)',
    auth: 'public',
    params: z.object({ '*': z.string() }),
    responses: { 200: { description: 'Model', schema: OpenAiModel }, 404: { description: 'Unknown model' } },
    handler: async ({ params }) => {
      const model = CATALOG.find((m) => m.id === params['*']);
      if (!model) throw new NotFoundError(`Model '${params['*']}' not found`);
      return json(200, openAiModel(model.id));
    },
  }),
];

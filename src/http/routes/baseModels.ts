/** GET /base-models: the model catalog. */
import { z } from 'zod';
import { listBaseModels } from '../../core/catalog';
import { json, route } from '../types';
import { queryBool } from '../validation';
import { BaseModelSchema, list } from './schemas';

export const baseModelRoutes = [
  route({
    method: 'GET',
    path: '/base-models',
    tag: 'base-models',
    summary: 'The catalog of base models; `available` says whether the weights are in the model store',
    query: z.strictObject({
      task_type: z
        .enum(['encoder', 'decoder', 'ner', 'classification', 'structures', 'relations', 'generate'])
        .optional(),
      supports_training: queryBool,
    }),
    responses: { 200: { description: 'Catalog', schema: list(BaseModelSchema) } },
    handler: async ({ svc, query }) => json(200, { data: await listBaseModels(svc, query) }),
  }),
];

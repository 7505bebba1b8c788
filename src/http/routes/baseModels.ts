/** GET /base-models: the model catalog and the models imported under their own names. */
import { z } from 'zod';
import { listBaseModels } from '../../core/modelRegistry';
import { json, route } from '../types';
import { queryBool } from '../validation';
import { BaseModelSchema, list } from './schemas';

export const baseModelRoutes = [
  route({
    method: 'GET',
    path: '/base-models',
    tag: 'base-models',
    summary:
      'The base models: the catalog, then the models an operator imported under their own names (`source: imported`); `available` says whether the weights are in the model store',
    query: z.strictObject({
      task_type: z
        .enum(['encoder', 'decoder', 'ner', 'classification', 'structures', 'relations', 'generate'])
        .optional(),
      supports_training: queryBool,
    }),
    responses: { 200: { description: 'Catalog', schema: list(BaseModelSchema) } },
    handler: async ({ svc, query, principal }) =>
      json(200, { data: await listBaseModels(svc, query, principal.team_id) }),
  }),
];

import { z } from 'zod';
import { buildOpenApi } from '../openapi';
import { json, route, type RouteSpec } from '../types';
import { adaptiveRoutes } from './adaptive';
import { apiKeyRoutes } from './apiKeys';
import { baseModelRoutes } from './baseModels';
import { billingRoutes } from './billing';
import { anthropicRoutes } from './compat/anthropic';
import { openAiRoutes } from './compat/openai';
import { openAiFileRoutes } from './compat/openaiFiles';
import { openAiFineTuningRoutes } from './compat/openaiFineTuning';
import { responsesRoutes } from './compat/responses';
import { datasetRoutes } from './datasets';
import { evaluationRoutes } from './evaluations';
import { gliner2ClientRoute, glinerRoutes, inferenceRoutes } from './extraction';
import { inferenceHistoryRoutes } from './inferenceHistory';
import { metaRoutes } from './meta';
import { projectRoutes } from './projects';
import { syntheticDataRoutes } from './syntheticData';
import { teamBillingRoutes, teamSettingsRoutes } from './teams';
import { trainingJobRoutes } from './trainingJobs';

export const API_VERSION = '0.1.0';

/** Every route of the service, in the order the API reference lists them. */
export function allRoutes(): RouteSpec[] {
  const routes: RouteSpec[] = [
    ...metaRoutes,
    ...apiKeyRoutes,
    ...teamBillingRoutes,
    ...teamSettingsRoutes,
    ...baseModelRoutes,
    ...projectRoutes,
    ...adaptiveRoutes,
    ...datasetRoutes,
    ...trainingJobRoutes,
    ...evaluationRoutes,
    ...inferenceHistoryRoutes,
    ...billingRoutes,
    ...inferenceRoutes,
    ...glinerRoutes,
    gliner2ClientRoute,
    ...syntheticDataRoutes,
    ...openAiRoutes,
    ...responsesRoutes,
    ...openAiFileRoutes,
    ...openAiFineTuningRoutes,
    ...anthropicRoutes,
  ];
  let document: Record<string, unknown> | undefined;
  routes.push(
    route({
      method: 'GET',
      path: '/openapi.json',
      tag: 'meta',
      summary: 'This API as an OpenAPI 3.1 document',
      responses: { 200: { description: 'OpenAPI document', schema: z.record(z.string(), z.unknown()) } },
      handler: async () => {
        document ??= buildOpenApi(routes, API_VERSION);
        return json(200, document);
      },
    }),
  );
  return routes;
}

/**
 * Every route of the HTTP API and how it is served: the one place that says who may call it
 * (`auth`), which limit class (docs/reference/decisions.md#limits) counts it (`limit`, default when unset) and which process serves
 * it in AWS (`plane`: `data` = the ECS gateway behind the VPC link, which loads the models; unset =
 * the control-plane Lambda).
 *
 * Data only, with type-only imports: lib/ (CDK) reads it at synth time to build the API Gateway
 * methods, authorizers and throttles (lib/gateway-routes.ts), without loading the app or the AWS
 * SDKs. `route()` (types.ts) takes `auth` and `limit` from here and refuses a route that has no
 * entry; test/cdk/routeTable.test.ts proves the table, the registered routes and the deployed API
 * agree.
 */
import type { LimitClass } from '../core/limits';

export interface RouteEntry {
  /**
   * `public` routes run without credentials; `key` needs an API key (on /v1/ also `Authorization:
   * Bearer`); `operator` needs the installation's bootstrap key; `internal` routes answer only
   * service-to-service calls carrying the shared internal token (anyone else gets 404) and are never
   * exposed through API Gateway.
   */
  readonly auth: 'public' | 'key' | 'operator' | 'internal';
  readonly limit?: LimitClass;
  readonly plane?: 'data';
}

/** Keyed `METHOD path` in find-my-way syntax (`:name` parameters, `*` for the rest of the path). */
export const ROUTE_TABLE = {
  'GET /health': { auth: 'public' },
  'GET /ready': { auth: 'public' },
  'GET /v1/models': { auth: 'public' },
  'GET /v1/models/*': { auth: 'public' },
  'POST /api-keys': { auth: 'key' },
  'GET /api-keys': { auth: 'key' },
  'DELETE /api-keys/:id': { auth: 'key' },
  'POST /auth/sessions': { auth: 'key' },
  'POST /teams': { auth: 'operator' },
  'GET /teams': { auth: 'operator' },
  'POST /teams/:id/credits': { auth: 'operator' },
  'PATCH /teams/:id': { auth: 'operator' },
  'GET /team': { auth: 'key' },
  'PATCH /team': { auth: 'key' },
  'GET /base-models': { auth: 'key' },
  'POST /projects': { auth: 'key' },
  'GET /projects': { auth: 'key' },
  'GET /projects/:id': { auth: 'key' },
  'DELETE /projects/:id': { auth: 'key' },
  'POST /projects/:id/deployments': { auth: 'key' },
  'GET /projects/:id/deployments': { auth: 'key' },
  'POST /projects/:id/rollback': { auth: 'key' },
  'DELETE /projects/:id/deployments': { auth: 'key' },
  'POST /projects/:id/adaptive-cycles': { auth: 'key' },
  'GET /projects/:id/adaptive-cycles': { auth: 'key' },
  'GET /projects/:id/adaptive-cycles/:cycle_id': { auth: 'key' },
  'POST /projects/:id/adaptive-cycles/:cycle_id/promote': { auth: 'key' },
  'POST /core/datasets/upload/url': { auth: 'key' },
  'POST /core/datasets/upload/process': { auth: 'key' },
  'GET /core/datasets': { auth: 'key' },
  'GET /core/datasets/:name': { auth: 'key' },
  'GET /core/datasets/:name/:version': { auth: 'key' },
  'GET /core/datasets/:name/:version/report': { auth: 'key' },
  'DELETE /core/datasets/:name': { auth: 'key' },
  'POST /core/training-jobs': { auth: 'key', limit: 'training_create' },
  'GET /core/training-jobs': { auth: 'key' },
  'GET /core/training-jobs/:id': { auth: 'key' },
  'GET /core/training-jobs/:id/logs': { auth: 'key' },
  'GET /core/training-jobs/:id/checkpoints': { auth: 'key' },
  'GET /core/training-jobs/:id/download': { auth: 'key' },
  'POST /core/training-jobs/:id/stop': { auth: 'key' },
  'POST /core/training-jobs/:id/deploy': { auth: 'key' },
  'DELETE /core/training-jobs/:id/deploy': { auth: 'key' },
  'DELETE /core/training-jobs/:id': { auth: 'key' },
  'POST /core/evaluations': { auth: 'key' },
  'GET /core/evaluations': { auth: 'key' },
  'GET /core/evaluations/:id': { auth: 'key' },
  'DELETE /core/evaluations/:id': { auth: 'key' },
  'GET /inferences': { auth: 'key' },
  'GET /inferences/:id': { auth: 'key' },
  'POST /inferences/:id/feedback': { auth: 'key' },
  'GET /billing/usage/requests': { auth: 'key' },
  'GET /billing/usage/requests/list': { auth: 'key' },
  'POST /inference': { auth: 'key', limit: 'inference', plane: 'data' },
  'POST /gliner-2': { auth: 'key', limit: 'gliner', plane: 'data' },
  'POST /gliner-2/entities': { auth: 'key', limit: 'gliner', plane: 'data' },
  'POST /gliner-2/classify': { auth: 'key', limit: 'gliner', plane: 'data' },
  'POST /gliner-2/extract-json': { auth: 'key', limit: 'gliner', plane: 'data' },
  'POST /gliner-2/relations': { auth: 'key', limit: 'gliner', plane: 'data' },
  'POST /gliner-2/extract': { auth: 'key', limit: 'gliner', plane: 'data' },
  'POST /generate': { auth: 'key', limit: 'generate' },
  'GET /generate/jobs': { auth: 'key' },
  'GET /generate/jobs/:job_id': { auth: 'key' },
  'POST /generate/ner/label-existing': { auth: 'key', limit: 'generate', plane: 'data' },
  'POST /generate/classification/label-existing': { auth: 'key', limit: 'generate', plane: 'data' },
  'POST /v1/chat/completions': { auth: 'key', limit: 'compat', plane: 'data' },
  'POST /v1/completions': { auth: 'key', limit: 'compat', plane: 'data' },
  'POST /v1/responses': { auth: 'key', limit: 'compat', plane: 'data' },
  'POST /v1/messages': { auth: 'key', limit: 'compat', plane: 'data' },
  'POST /v1/messages/count_tokens': { auth: 'key', limit: 'compat', plane: 'data' },
  'POST /v1/files': { auth: 'key' },
  'GET /v1/files': { auth: 'key' },
  'GET /v1/files/:file_id': { auth: 'key' },
  'GET /v1/files/:file_id/content': { auth: 'key' },
  'DELETE /v1/files/:file_id': { auth: 'key' },
  'POST /v1/fine_tuning/jobs': { auth: 'key', limit: 'training_create' },
  'GET /v1/fine_tuning/jobs': { auth: 'key' },
  'GET /v1/fine_tuning/jobs/:job_id': { auth: 'key' },
  'POST /v1/fine_tuning/jobs/:job_id/cancel': { auth: 'key' },
  'GET /v1/fine_tuning/jobs/:job_id/events': { auth: 'key' },
  'GET /v1/fine_tuning/jobs/:job_id/checkpoints': { auth: 'key' },
  'GET /openapi.json': { auth: 'public' },
  'POST /internal/tasks/evaluation.shard': { auth: 'internal', plane: 'data' },
  'POST /internal/tasks/training.validate': { auth: 'internal', plane: 'data' },
  'POST /internal/tasks/generation.shard': { auth: 'internal', plane: 'data' },
} as const satisfies Record<string, RouteEntry>;

export type RouteKey = keyof typeof ROUTE_TABLE;

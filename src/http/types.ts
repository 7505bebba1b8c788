import type { z } from 'zod';
import type { Principal, Services } from '../core/context';
import type { LimitClass } from '../core/rateLimits';

/** A request as every runtime adapter (node:http, Lambda, ECS) hands it to the router. */
export interface ApiRequest {
  method: string;
  path: string;
  query: Record<string, string | undefined>;
  /** Lower-cased header names. */
  headers: Record<string, string | undefined>;
  body?: Buffer;
  sourceIp: string;
  /** Aborted when the client goes away (streams stop, work is cancelled). */
  signal?: AbortSignal;
}

export interface ApiResponse {
  status: number;
  headers?: Record<string, string>;
  /** JSON-serialised unless `raw` or `stream` is set. */
  body?: unknown;
  raw?: Buffer | string;
  stream?: AsyncIterable<string | Uint8Array>;
}

export type ErrorFormat = 'native' | 'openai' | 'anthropic';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface HandlerContext<B, Q, P> {
  svc: Services;
  req: ApiRequest;
  requestId: string;
  principal: Principal;
  body: B;
  query: Q;
  params: P;
}

type Infer<S> = S extends z.ZodType ? z.output<S> : undefined;

export interface ResponseDoc {
  description: string;
  schema?: z.ZodType;
  contentType?: string;
}

export interface RouteSpec<
  B extends z.ZodType | undefined = z.ZodType | undefined,
  Q extends z.ZodType | undefined = z.ZodType | undefined,
  P extends z.ZodType | undefined = z.ZodType | undefined,
> {
  method: HttpMethod;
  /** find-my-way syntax: `/core/datasets/:name`. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  /**
   * `public` routes run without credentials; `operator` needs the installation's bootstrap key;
   * `internal` routes answer only service-to-service calls carrying the shared internal token
   * (anyone else gets 404, as if the route did not exist).
   */
  auth: 'public' | 'key' | 'operator' | 'internal';
  limit?: LimitClass;
  /**
   * Error body shape: `native` = `{detail}`; `openai` / `anthropic` = the vendor envelope plus `detail`
   * (compat routes). Unset: chosen by path (`/v1/messages*` → anthropic, other `/v1/*` → openai).
   */
  errorFormat?: ErrorFormat;
  body?: B;
  query?: Q;
  params?: P;
  responses: Record<number, ResponseDoc>;
  handler: (ctx: HandlerContext<Infer<B>, Infer<Q>, Infer<P>>) => Promise<ApiResponse>;
}

/** Identity function that keeps each route's body/query/params types tied to its handler. */
export function route<
  B extends z.ZodType | undefined = undefined,
  Q extends z.ZodType | undefined = undefined,
  P extends z.ZodType | undefined = undefined,
>(spec: RouteSpec<B, Q, P>): RouteSpec {
  return spec as unknown as RouteSpec;
}

export const json = (status: number, body: unknown, headers?: Record<string, string>): ApiResponse => ({
  status,
  body,
  ...(headers ? { headers } : {}),
});

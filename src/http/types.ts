import type { z } from 'zod';
import type { Principal, Services } from '../core/context';
import type { LimitClass } from '../core/limits';
import { ROUTE_TABLE, type RouteEntry } from './routeTable';

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
  /** From the route table (routeTable.ts), never written in the route itself. */
  auth: RouteEntry['auth'];
  limit?: LimitClass;
  /**
   * Error body shape: `native` = `{detail}`; `openai` / `anthropic` = the vendor envelope plus `detail`
   * (compat routes). Unset: chosen by path (`/v1/messages*` → anthropic, other `/v1/*` → openai).
   */
  errorFormat?: ErrorFormat;
  body?: B;
  /**
   * How the body arrives: JSON (default), or `multipart` form data (file uploads: `body` then
   * validates the form's fields, each a string or a `File`).
   */
  bodyType?: 'json' | 'multipart';
  query?: Q;
  params?: P;
  responses: Record<number, ResponseDoc>;
  handler: (ctx: HandlerContext<Infer<B>, Infer<Q>, Infer<P>>) => Promise<ApiResponse>;
}

/**
 * A route: its handler and schemas as written, its auth and limit class from the route table
 * (routeTable.ts), so a route without a table entry fails when its module loads. Also keeps each
 * route's body/query/params types tied to its handler.
 */
export function route<
  B extends z.ZodType | undefined = undefined,
  Q extends z.ZodType | undefined = undefined,
  P extends z.ZodType | undefined = undefined,
>(spec: Omit<RouteSpec<B, Q, P>, 'auth' | 'limit'>): RouteSpec {
  const key = `${spec.method} ${spec.path}`;
  const entry = (ROUTE_TABLE as Record<string, RouteEntry>)[key];
  if (!entry) throw new Error(`Route ${key} has no entry in src/http/routeTable.ts (its auth, limit class and plane)`);
  return { ...spec, auth: entry.auth, ...(entry.limit ? { limit: entry.limit } : {}) } as unknown as RouteSpec;
}

export const json = (status: number, body: unknown, headers?: Record<string, string>): ApiResponse => ({
  status,
  body,
  ...(headers ? { headers } : {}),
});

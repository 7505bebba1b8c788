import { z } from 'zod';
import { AnthropicErrorBody, OpenAiErrorBody } from './routes/compat/common';
import { errorFormatFor } from './errorFormats';
import type { ErrorFormat, RouteSpec } from './types';
import { documentedAs, ErrorBody, openApiOverrides, ValidationErrorBody } from './validation';

type Json = Record<string, unknown>;
const COMPONENTS = '#/components/schemas/';

/**
 * zod → JSON Schema for one request or response part. Named schemas (`.meta({id})`) come back in
 * `$defs`; they are moved into `components` (shared by the whole document) and every
 * `#/$defs/X` becomes `#/components/schemas/X`, so no reference dangles.
 */
class SchemaCollector {
  readonly components: Record<string, Json> = {};

  convert(schema: z.ZodType, io: 'input' | 'output'): Json {
    const shown = documentedAs.get(schema) ?? schema;
    const out = z.toJSONSchema(shown, {
      target: 'draft-2020-12',
      io,
      unrepresentable: 'any',
      reused: 'inline',
      override: ({ zodSchema, jsonSchema }) => {
        const doc = openApiOverrides.get(zodSchema);
        if (!doc) return;
        for (const key of Object.keys(jsonSchema)) delete (jsonSchema as Json)[key];
        Object.assign(jsonSchema, doc.jsonSchema);
      },
    }) as Json;
    const { $schema: _dialect, $defs, ...rest } = out as Json & { $defs?: Record<string, Json> };
    for (const [id, def] of Object.entries($defs ?? {})) this.add(id, rewriteRefs(def));
    return rewriteRefs(rest);
  }

  /** One name, one shape: a named schema whose input and output forms differ would need two names. */
  private add(id: string, def: Json): void {
    const existing = this.components[id];
    if (existing && JSON.stringify(existing) !== JSON.stringify(def))
      throw new Error(`Two different schemas are named '${id}' in the OpenAPI document`);
    this.components[id] = def;
  }
}

function rewriteRefs<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => rewriteRefs(v)) as T;
  if (value === null || typeof value !== 'object') return value;
  const out: Json = {};
  for (const [key, v] of Object.entries(value as Json)) {
    out[key] =
      key === '$ref' && typeof v === 'string' && v.startsWith('#/$defs/')
        ? COMPONENTS + v.slice('#/$defs/'.length)
        : rewriteRefs(v);
  }
  return out as T;
}

const ERROR_COMPONENT: Record<ErrorFormat, string> = {
  native: 'Error',
  openai: 'OpenAiError',
  anthropic: 'AnthropicError',
};
const errorSchema = (format: ErrorFormat, status: string) => ({
  $ref: COMPONENTS + (format === 'native' && status === '422' ? 'ValidationError' : ERROR_COMPONENT[format]),
});

/** Errors every route of a given kind can answer with, beside those it documents itself. */
function standardErrors(spec: RouteSpec, hasPathParams: boolean): Record<number, string> {
  const errors: Record<number, string> = {
    429: 'Rate limit exceeded (Retry-After)',
    500: 'Unexpected server error',
    // every route reaches a store (keys, limits, records): one that is throttled or down is a 503, never a 404 (StoreUnavailableError)
    503: 'A store the service depends on is unavailable; retry after Retry-After seconds',
  };
  if (spec.auth !== 'public') errors[401] = 'API key missing, invalid or revoked';
  if (spec.auth === 'operator') errors[403] = 'Needs the operator key';
  // internal routes answer 404 to anyone without the internal token; a path names a resource that may not exist
  if (spec.auth === 'internal' || hasPathParams) errors[404] = 'Not found';
  // vendor formats answer validation failures with 400, as the vendors do (errorFormats.ts); a route without a
  // body schema refuses a body (app.ts rejectBody) except on GET
  if (spec.body || spec.query || spec.params || spec.method !== 'GET')
    errors[errorFormatFor(spec.path, spec) === 'native' ? 422 : 400] = 'Validation failed: `errors` names each field';
  if (spec.body) {
    errors[413] = 'Request body over the size limit';
    errors[415] = 'Content-Type is not JSON';
  }
  return errors;
}

/** `/core/datasets/:name` → `/core/datasets/{name}`; the `/v1/models/*` wildcard is the model id. */
export const openApiPath = (path: string) => path.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{model_id}');

function pathParameters(spec: RouteSpec, path: string, schemas: SchemaCollector): Json[] {
  const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);
  const declared = spec.params
    ? ((schemas.convert(spec.params, 'input') as { properties?: Record<string, Json> }).properties ?? {})
    : {};
  return names.map((name) => ({
    name,
    in: 'path',
    required: true,
    schema: declared[name] ?? declared[name === 'model_id' ? '*' : name] ?? { type: 'string' },
  }));
}

/** OpenAPI 3.1, generated from the same zod schemas that validate requests. */
export function buildOpenApi(routes: RouteSpec[], version: string): Record<string, unknown> {
  const schemas = new SchemaCollector();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of routes) {
    const path = openApiPath(spec.path);
    const parameters = pathParameters(spec, path, schemas);
    if (spec.query) {
      const schema = schemas.convert(spec.query, 'input') as {
        properties?: Record<string, unknown>;
        required?: string[];
      };
      for (const [name, prop] of Object.entries(schema.properties ?? {})) {
        parameters.push({ name, in: 'query', required: schema.required?.includes(name) ?? false, schema: prop });
      }
    }
    const format = errorFormatFor(spec.path, spec);
    const responses: Record<string, unknown> = {};
    for (const [status, doc] of Object.entries(spec.responses)) {
      if (format !== 'native' && status === '422') continue;
      const isError = Number(status) >= 400;
      const schema = doc.schema
        ? schemas.convert(doc.schema, 'output')
        : isError
          ? errorSchema(format, status)
          : undefined;
      responses[status] = {
        description: doc.description,
        ...(schema ? { content: { [doc.contentType ?? 'application/json']: { schema } } } : {}),
      };
    }
    for (const [status, description] of Object.entries(
      standardErrors(
        spec,
        parameters.some((p) => p.in === 'path'),
      ),
    )) {
      responses[status] ??= { description, content: { 'application/json': { schema: errorSchema(format, status) } } };
    }
    paths[path] ??= {};
    paths[path][spec.method.toLowerCase()] = {
      tags: [spec.tag],
      summary: spec.summary,
      ...(spec.description ? { description: spec.description } : {}),
      operationId: `${spec.method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      security:
        spec.auth === 'public' ? [] : path.startsWith('/v1/') ? [{ apiKey: [] }, { bearer: [] }] : [{ apiKey: [] }],
      ...(parameters.length ? { parameters } : {}),
      ...(spec.body
        ? {
            requestBody: {
              required: true,
              content: {
                [spec.bodyType === 'multipart' ? 'multipart/form-data' : 'application/json']: {
                  schema: schemas.convert(spec.body, 'input'),
                },
              },
            },
          }
        : {}),
      responses,
    };
  }
  // the error bodies every operation refers to
  for (const body of [ErrorBody, ValidationErrorBody, OpenAiErrorBody, AnthropicErrorBody])
    schemas.convert(body, 'output');
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sift API',
      version,
      description: 'Training and inference for GLiNER2-family encoders and small decoder LLMs.',
    },
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        bearer: { type: 'http', scheme: 'bearer', description: 'On /v1/* only: an svc_sk_ API key or a session token' },
      },
      schemas: Object.fromEntries(Object.entries(schemas.components).sort(([a], [b]) => a.localeCompare(b))),
    },
  };
}

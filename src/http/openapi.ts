import { z } from 'zod';
import type { RouteSpec } from './types';
import { ErrorBody, ValidationErrorBody } from './validation';

const toSchema = (schema: z.ZodType, io: 'input' | 'output') =>
  z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any', reused: 'inline' }) as Record<string, unknown>;

/** Errors every route of a given kind can answer with, beside those it documents itself. */
function standardErrors(spec: RouteSpec): Record<number, string> {
  const errors: Record<number, string> = { 429: 'Rate limit exceeded (Retry-After)', 500: 'Unexpected server error' };
  if (spec.auth !== 'public') errors[401] = 'API key missing, invalid or revoked';
  if (spec.auth === 'operator') errors[403] = 'Needs the operator key';
  if (spec.body || spec.query || spec.params) errors[422] = 'Validation failed: `errors` names each field';
  if (spec.body) {
    errors[413] = 'Request body over the size limit';
    errors[415] = 'Content-Type is not JSON';
  }
  return errors;
}

/** OpenAPI 3.1, generated from the same zod schemas that validate requests. */
export function buildOpenApi(routes: RouteSpec[], version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const spec of routes) {
    const path = spec.path.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{model_id}');
    const parameters: unknown[] = [];
    for (const [name] of path.matchAll(/\{(\w+)\}/g)) {
      parameters.push({ name: name.slice(1, -1), in: 'path', required: true, schema: { type: 'string' } });
    }
    if (spec.query) {
      const schema = toSchema(spec.query, 'input') as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, prop] of Object.entries(schema.properties ?? {})) {
        parameters.push({ name, in: 'query', required: schema.required?.includes(name) ?? false, schema: prop });
      }
    }
    const responses: Record<string, unknown> = {};
    for (const [status, doc] of Object.entries(spec.responses)) {
      const isError = Number(status) >= 400;
      const errorRef = status === '422' ? 'ValidationError' : 'Error';
      const schema = doc.schema ? toSchema(doc.schema, 'output') : isError ? { $ref: `#/components/schemas/${errorRef}` } : undefined;
      responses[status] = { description: doc.description, ...(schema ? { content: { [doc.contentType ?? 'application/json']: { schema } } } : {}) };
    }
    for (const [status, description] of Object.entries(standardErrors(spec))) {
      if (responses[status]) continue;
      const ref = status === '422' ? 'ValidationError' : 'Error';
      responses[status] = { description, content: { 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } } };
    }
    paths[path] ??= {};
    paths[path][spec.method.toLowerCase()] = {
      tags: [spec.tag],
      summary: spec.summary,
      ...(spec.description ? { description: spec.description } : {}),
      operationId: `${spec.method.toLowerCase()}${path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_, c: string | undefined) => (c ? c.toUpperCase() : ''))}`,
      security: spec.auth === 'public' ? [] : path.startsWith('/v1/') ? [{ apiKey: [] }, { bearer: [] }] : [{ apiKey: [] }],
      ...(parameters.length ? { parameters } : {}),
      ...(spec.body ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(spec.body, 'input') } } } } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Sift API', version, description: 'Training and inference for GLiNER2-family encoders and small decoder LLMs.' },
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        bearer: { type: 'http', scheme: 'bearer', description: 'On /v1/* only: an svc_sk_ API key or a session token' },
      },
      schemas: { Error: toSchema(ErrorBody, 'output'), ValidationError: toSchema(ValidationErrorBody, 'output') },
    },
  };
}

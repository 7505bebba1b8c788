/**
 * Encoder extraction over HTTP: the encoder branch of `POST /inference` (registered into the
 * native inference route, which dispatches `task: "generate"` to the decoder), the per-head
 * `/gliner-2/*` endpoints (rate-limit class `gliner`), and extraction through the compatible
 * routes (`schema` extra field).
 */
import { z } from 'zod';
import { checkTexts, EncoderInferenceBody, runExtraction, SchemaBody, toEncoderSchema, type ExtractionOutput } from '../../core/encoder/api';
import { ValidationError } from '../../core/errors';
import { json, route, type ApiResponse, type HandlerContext } from '../types';
import { nonBlank, parseWith } from '../validation';
import { registerEncoderExtraction } from './compat/common';
import { modelRunErrors } from './errorDocs';
import { registerEncoderInference } from './generateInference';

const ExtractionResponse = z.looseObject({
  inference_id: z.string(),
  model_id: z.string(),
  type: z.literal('encoder'),
  latency_ms: z.number(),
  usage: z.object({ input_tokens: z.number() }),
  result: z.unknown(),
});

/** `POST /inference` without `task: "generate"`: extraction with a `schema` (DESIGN §3). */
export async function encoderInference(ctx: HandlerContext<Record<string, unknown>, unknown, unknown>): Promise<ApiResponse> {
  if (ctx.body.task !== undefined) throw ValidationError.field(['body', 'task'], `unknown task '${String(ctx.body.task)}': omit task for extraction with a schema, or send task: "generate" with messages`);
  const body = parseWith(EncoderInferenceBody, ctx.body, 'body');
  const schema = toEncoderSchema(body.schema);
  const texts = checkTexts(body.text);
  const out = await runExtraction({
    svc: ctx.svc,
    principal: ctx.principal,
    modelId: body.model_id,
    texts,
    batch: Array.isArray(body.text),
    schema,
    rawInput: { text: body.text, schema: body.schema, ...(body.threshold !== undefined ? { threshold: body.threshold } : {}) },
    threshold: body.threshold,
    store: body.store ?? true,
    endpoint: '/inference',
    limitClass: 'inference',
    signal: ctx.req.signal,
  });
  return json(200, out);
}

const common = {
  model_id: z.string().min(1),
  text: z.union([nonBlank('text must not be empty'), z.array(nonBlank('text must not be empty')).min(1)]),
  threshold: z.number().min(0).max(1).optional(),
  store: z.boolean().optional(),
};
const shape = SchemaBody.shape;

function glinerRoute<K extends 'entities' | 'classifications' | 'structures' | 'relations' | 'schema'>(path: string, key: K, summary: string) {
  const body = z.strictObject({ ...common, [key]: key === 'schema' ? SchemaBody : (shape[key as Exclude<K, 'schema'>] as z.ZodOptional<z.ZodType>).unwrap() } as typeof common & Record<K, z.ZodType>);
  return route({
    method: 'POST',
    path,
    tag: 'inference',
    summary,
    auth: 'key',
    limit: 'gliner',
    body,
    responses: {
      200: { description: 'Extraction result with inference_id and usage (DESIGN §3 shape)', schema: ExtractionResponse },
      ...modelRunErrors,
      413: { description: 'Text over the documented size limit' },
      422: { description: 'Invalid schema or text' },
    },
    handler: async (ctx): Promise<ApiResponse> => {
      const b = ctx.body as z.output<typeof body> & Record<string, unknown>;
      const rawSchema = key === 'schema' ? (b[key] as z.output<typeof SchemaBody>) : ({ [key]: b[key] } as z.output<typeof SchemaBody>);
      const schema = toEncoderSchema(rawSchema, key === 'schema' ? ['body', 'schema'] : ['body']);
      const texts = checkTexts(b.text as string | string[]);
      const out: ExtractionOutput = await runExtraction({
        svc: ctx.svc,
        principal: ctx.principal,
        modelId: b.model_id as string,
        texts,
        batch: Array.isArray(b.text),
        schema,
        rawInput: { text: b.text, schema: rawSchema, ...(b.threshold !== undefined ? { threshold: b.threshold } : {}) },
        threshold: b.threshold as number | undefined,
        store: (b.store as boolean | undefined) ?? true,
        endpoint: path,
        limitClass: 'gliner',
        signal: ctx.req.signal,
      });
      return json(200, out);
    },
  });
}

export const glinerRoutes = [
  glinerRoute('/gliner-2/entities', 'entities', 'Named entities: `entities` = types (list) or type → description'),
  glinerRoute('/gliner-2/classify', 'classifications', 'Text classification: `classifications` = [{task, labels, multi_label?, top_k?}]'),
  glinerRoute('/gliner-2/extract-json', 'structures', 'Structured extraction: `structures` = {name: {fields: [...]}}'),
  glinerRoute('/gliner-2/relations', 'relations', 'Relation extraction: `relations` = names or {name, description?}'),
  glinerRoute('/gliner-2/extract', 'schema', 'Every head at once: `schema` as in POST /inference'),
];

/** Wires the encoder into the shared inference route and the compatible routes. */
export function registerEncoderRoutes(): void {
  registerEncoderInference(encoderInference);
  registerEncoderExtraction(async ({ svc, principal, model, text, schema, threshold, store, endpoint }) => {
    const parsed = toEncoderSchema(parseWith(SchemaBody, schema, 'schema'), ['body', 'schema']);
    const out = await runExtraction({
      svc,
      principal,
      modelId: model.requested,
      texts: checkTexts(text, ['body', 'messages']),
      batch: false,
      schema: parsed,
      rawInput: { text, schema, ...(threshold !== undefined ? { threshold } : {}) },
      threshold,
      store,
      endpoint,
      limitClass: 'inference',
    });
    return { inference_id: out.inference_id, result: out.result, input_tokens: out.usage.input_tokens };
  });
}

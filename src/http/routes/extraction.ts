/**
 * Native inference over HTTP: `POST /inference` (extraction with a `schema`, or `task: "generate"`,
 * which goes to the decoder branch in textGeneration.ts) and the per-head `/gliner-2/*`
 * endpoints (rate-limit class `gliner`). Extraction through the compatible routes (`schema` extra
 * field) is compat/common.ts's extractThroughCompat. Each request resolves its model once.
 */
import { z } from 'zod';
import {
  checkTexts,
  EncoderInferenceBody,
  runExtraction,
  SchemaBody,
  toEncoderSchema,
  type ExtractionOutput,
} from '../../core/extraction/api';
import { clientModel, clientSchema, Gliner2ClientBody, libraryResult } from '../../core/extraction/gliner2Client';
import type { Principal, Services } from '../../core/context';
import { ValidationError } from '../../core/errors';
import { requireRuntime, resolveServable } from '../../core/models';
import { json, route, type ApiResponse, type HandlerContext } from '../types';
import { documentedAs, nonBlank, parseWith } from '../validation';
import { modelRunErrors } from './errorDocs';
import { generateInference, GenerateInferenceBody } from './textGeneration';

const windowCount = z.number().int().min(1);
const ExtractionResponse = z.looseObject({
  inference_id: z.string(),
  model_id: z.string(),
  type: z.literal('encoder'),
  latency_ms: z.number(),
  usage: z.object({ input_tokens: z.number() }),
  result: z.unknown(),
  windows: z
    .union([windowCount, z.array(windowCount)])
    .describe(
      "Per text, the encoder passes it was read in: 1 = the whole text at once; more = a text longer than the model's window, read in overlapping word windows whose results are merged back into the text's own offsets (never truncated). A number when `text` is a string, an array in input order when `text` is an array (docs/reference/decisions.md#encoder-response)",
    ),
});

/** `POST /inference` with `task: "generate"` (textGeneration.ts). */
const GenerationResponse = z.looseObject({
  inference_id: z.string(),
  model_id: z.string(),
  type: z.literal('decoder'),
  completion: z.string(),
  latency_ms: z.number(),
  usage: z.looseObject({
    prompt_tokens: z.number(),
    cache_read_tokens: z.number(),
    cache_write_tokens: z.number(),
    completion_tokens: z.number(),
    total_tokens: z.number(),
  }),
});

/** The model of an extraction route, resolved once (weights checked, engine attached): a decoder here is a 422 on `body.model_id`. */
const extractionModel = (
  svc: Services,
  principal: Pick<Principal, 'team_id'>,
  model: string,
  field: (string | number)[] = ['body', 'model_id'],
) => resolveServable(svc, principal, model, { want: 'encoder', field });

/** `POST /inference` without `task: "generate"`: extraction with a `schema` (docs/reference/decisions.md#encoder-response). */
async function encoderInference(ctx: HandlerContext<Record<string, unknown>, unknown, unknown>): Promise<ApiResponse> {
  if (ctx.body.task !== undefined)
    throw ValidationError.field(
      ['body', 'task'],
      `unknown task '${String(ctx.body.task)}': omit task for extraction with a schema, or send task: "generate" with messages`,
    );
  // before the body is read: a deployment without the engine says so whatever the request
  requireRuntime(ctx.svc, 'encoder', 'send task: "generate" with messages for a decoder model');
  const body = parseWith(EncoderInferenceBody, ctx.body, 'body');
  const schema = toEncoderSchema(body.schema);
  const texts = checkTexts(body.text);
  const out = await runExtraction({
    svc: ctx.svc,
    principal: ctx.principal,
    servable: await extractionModel(ctx.svc, ctx.principal, body.model_id),
    texts,
    batch: Array.isArray(body.text),
    schema,
    rawInput: {
      text: body.text,
      schema: body.schema,
      ...(body.threshold !== undefined ? { threshold: body.threshold } : {}),
    },
    threshold: body.threshold,
    store: body.store ?? true,
    endpoint: '/inference',
    limitClass: 'inference',
    signal: ctx.req.signal,
  });
  return json(200, out);
}

/** Routes on `task`; documented as the two bodies the branches accept (encoder: no task, texts not blank). */
const InferenceRouterBody = z.looseObject({ model_id: z.string().min(1), task: z.string().optional() });
const documentedText = nonBlank('text must not be empty');
const EncoderBranch: z.ZodType = EncoderInferenceBody.omit({ task: true }).extend({
  text: z.union([documentedText, z.array(documentedText).min(1)]),
});
documentedAs.set(InferenceRouterBody, z.union([EncoderBranch, GenerateInferenceBody]));

export const inferenceRoutes = [
  route({
    method: 'POST',
    path: '/inference',
    tag: 'inference',
    summary: 'Native inference: encoder extraction (`schema`) or decoder generation (`task: "generate"`, `messages`)',
    // Each branch validates strictly; this only routes on `task`.
    body: InferenceRouterBody,
    responses: {
      200: {
        description: 'Per-head results with `windows` (encoder) or `{completion, usage}` (decoder), with inference_id',
        schema: z.union([ExtractionResponse, GenerationResponse]),
      },
      ...modelRunErrors,
    },
    handler: async (ctx) => {
      if (ctx.body.task === 'generate')
        return generateInference({ ...ctx, body: parseWith(GenerateInferenceBody, ctx.body, 'body') });
      return encoderInference(ctx as HandlerContext<Record<string, unknown>, unknown, unknown>);
    },
  }),
];

const common = {
  model_id: z.string().min(1),
  text: z.union([nonBlank('text must not be empty'), z.array(nonBlank('text must not be empty')).min(1)]),
  threshold: z.number().min(0).max(1).optional(),
  store: z.boolean().optional(),
};
const shape = SchemaBody.shape;

function glinerRoute<K extends 'entities' | 'classifications' | 'structures' | 'relations' | 'schema'>(
  path: string,
  key: K,
  summary: string,
) {
  const body = z.strictObject({
    ...common,
    [key]: key === 'schema' ? SchemaBody : (shape[key as Exclude<K, 'schema'>] as z.ZodOptional<z.ZodType>).unwrap(),
  } as typeof common & Record<K, z.ZodType>);
  return route({
    method: 'POST',
    path,
    tag: 'inference',
    summary,
    body,
    responses: {
      200: {
        description: 'Extraction result with inference_id and usage (docs/reference/decisions.md#encoder-response)',
        schema: ExtractionResponse,
      },
      ...modelRunErrors,
      413: { description: 'Text over the documented size limit' },
      422: { description: 'Invalid schema or text' },
    },
    handler: async (ctx): Promise<ApiResponse> => {
      const b = ctx.body as z.output<typeof body> & Record<string, unknown>;
      const rawSchema =
        key === 'schema' ? (b[key] as z.output<typeof SchemaBody>) : ({ [key]: b[key] } as z.output<typeof SchemaBody>);
      const schema = toEncoderSchema(rawSchema, key === 'schema' ? ['body', 'schema'] : ['body']);
      const texts = checkTexts(b.text as string | string[]);
      const out: ExtractionOutput = await runExtraction({
        svc: ctx.svc,
        principal: ctx.principal,
        servable: await extractionModel(ctx.svc, ctx.principal, b.model_id as string),
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
  glinerRoute(
    '/gliner-2/classify',
    'classifications',
    'Text classification: `classifications` = [{task, labels, multi_label?, top_k?}]',
  ),
  glinerRoute('/gliner-2/extract-json', 'structures', 'Structured extraction: `structures` = {name: {fields: [...]}}'),
  glinerRoute('/gliner-2/relations', 'relations', 'Relation extraction: `relations` = names or {name, description?}'),
  glinerRoute('/gliner-2/extract', 'schema', 'Every head at once: `schema` as in POST /inference'),
];

/** `POST /gliner-2`: the gliner2 package's own client (`GLiNER2.from_api`), answered in the library's output format. */
export const gliner2ClientRoute = route({
  method: 'POST',
  path: '/gliner-2',
  tag: 'inference',
  summary:
    "The gliner2 package's API client (`GLiNER2.from_api(api_key=…, api_base_url=…)`): `task` + `schema` as it sends them, `result` in the library's own output format (docs/reference/decisions.md#gliner2-client)",
  body: Gliner2ClientBody,
  responses: {
    200: {
      description:
        "`result`: what the library's method returns locally (a list for a `text` list), with inference_id and usage",
      schema: ExtractionResponse,
    },
    ...modelRunErrors,
    413: { description: 'Text over the documented size limit' },
    422: { description: 'Invalid task, schema, threshold or text; `detail` names the field' },
  },
  handler: async (ctx): Promise<ApiResponse> => {
    requireRuntime(ctx.svc, 'encoder');
    const b = ctx.body;
    const { schema, shape } = clientSchema(b.task, b.schema);
    const texts = checkTexts(b.text);
    const model = await clientModel(ctx.svc, ctx.principal.team_id, b.model);
    const format = {
      includeConfidence: b.include_confidence,
      includeSpans: b.include_spans,
      formatResults: b.format_results,
    };
    const out = await runExtraction({
      svc: ctx.svc,
      principal: ctx.principal,
      servable: await extractionModel(ctx.svc, ctx.principal, model, ['body', 'model']),
      texts,
      batch: Array.isArray(b.text),
      schema,
      rawInput: { task: b.task, text: b.text, schema: b.schema, threshold: b.threshold },
      threshold: b.threshold,
      store: b.store ?? true,
      endpoint: '/gliner-2',
      limitClass: 'gliner',
      format: (r) => libraryResult(r, schema, shape, format),
      signal: ctx.req.signal,
    });
    return json(200, out);
  },
});

/**
 * docs/reference/decisions.md#generation, synchronous part: label existing texts with an encoder
 * (`/generate/ner/label-existing`, `/generate/classification/label-existing`). The texts go through
 * the same extraction path as `POST /inference` (model resolution, limits, billing) in batches;
 * annotations are returned, not stored as inferences (they are dataset material).
 */
import { resolveServable, type ServableEncoder } from '../../core/models';
import { z } from 'zod';
import { checkTexts, runExtraction, toEncoderSchema, ENCODER_LIMITS } from '../../core/extraction/api';
import { ValidationError } from '../../core/errors';
import {
  createSyntheticDataJob,
  SYNTHETIC_DATA_LIMITS,
  SyntheticDataRequest,
  getSyntheticDataJob,
  listSyntheticDataJobs,
} from '../../core/syntheticData/jobs';
import { json, route, type HandlerContext } from '../types';
import { nonBlank } from '../validation';
import { computeStartErrors, modelRunErrors } from './errorDocs';

/** The encoder used when the request names none: an operator setting, else the built-in mini model. */
export const LABEL_EXISTING_MAX_INPUTS = 1000;

const LabelExistingBody = z.strictObject({
  labels: z.array(z.string().min(1).max(ENCODER_LIMITS.maxLabelChars)).min(1).max(ENCODER_LIMITS.maxLabels),
  inputs: z.array(nonBlank('input must not be empty')).min(1).max(LABEL_EXISTING_MAX_INPUTS),
  model_id: z.string().min(1).optional(),
  threshold: z.number().min(0).max(1).optional(),
});
type LabelExisting = z.output<typeof LabelExistingBody>;

async function annotate(ctx: HandlerContext<LabelExisting, unknown, unknown>, kind: 'ner' | 'classification') {
  const { body } = ctx;
  const dupe = body.labels.find((l, i) => body.labels.indexOf(l) !== i);
  if (dupe !== undefined) throw ValidationError.field(['body', 'labels'], `duplicate label '${dupe}'`);
  const schemaInput =
    kind === 'ner' ? { entities: body.labels } : { classifications: [{ task: 'label', labels: body.labels }] };
  const schema = toEncoderSchema(schemaInput, ['body', 'labels']);
  body.inputs.forEach((t, i) => {
    if (!t.trim()) throw ValidationError.field(['body', 'inputs', i], 'input must not be empty');
  });
  const modelId = body.model_id ?? ctx.svc.config.defaultEncoder;
  let servable: ServableEncoder | undefined;
  const results: Record<string, unknown>[] = [];
  let inputTokens = 0;
  for (let i = 0; i < body.inputs.length; i += ENCODER_LIMITS.maxTexts) {
    const chunk = body.inputs.slice(i, i + ENCODER_LIMITS.maxTexts);
    checkTexts(chunk, ['body', 'inputs']);
    // resolved once, after the first chunk's texts are checked (as before, when each chunk resolved it)
    servable ??= await resolveServable(ctx.svc, ctx.principal, modelId, {
      want: 'encoder',
      field: ['body', 'model_id'],
    });
    const out = await runExtraction({
      svc: ctx.svc,
      principal: ctx.principal,
      servable,
      texts: chunk,
      batch: true,
      schema,
      rawInput: {},
      threshold: body.threshold,
      store: false,
      endpoint: ctx.req.path,
      limitClass: 'generate',
    });
    inputTokens += out.usage.input_tokens;
    const passes = out.windows as number[];
    (out.result as Record<string, unknown>[]).forEach((r, j) => {
      const text = chunk[j] as string;
      if (kind === 'ner') {
        results.push({
          text,
          windows: passes[j],
          entities: (r.entities as Record<string, unknown>[]).map(({ text: t, label, start, end, score }) => ({
            text: t,
            label,
            start,
            end,
            score,
          })),
        });
      } else {
        const top = (r.classifications as Record<string, { label: string; score: number }[]>).label?.[0];
        results.push({ text, windows: passes[j], label: top?.label ?? null, score: top?.score ?? null });
      }
    });
  }
  return json(200, { model_id: modelId, results, usage: { input_tokens: inputTokens } });
}

/** Per input, as `windows` on POST /inference: 1 = read in one pass, more = overlapping windows merged back. */
const windows = z
  .number()
  .int()
  .min(1)
  .describe('Encoder passes the input was read in: 1 = at once, more = overlapping windows of a long input, merged');

const responses = (item: z.ZodType) => ({
  ...modelRunErrors,
  200: {
    description: 'Annotations, one per input, in order',
    schema: z.object({ model_id: z.string(), results: z.array(item), usage: z.object({ input_tokens: z.number() }) }),
  },
});

const GenerationJobSchema = z.looseObject({
  job_id: z.string(),
  status: z.enum(['queued', 'running', 'complete', 'failed']),
  task_type: z.string(),
  dataset_name: z.string(),
  dataset_version: z.number().nullable(),
  num_examples: z.number(),
  generated: z.number(),
  warnings: z.array(z.string()),
  error: z.string().nullable(),
});

export const syntheticDataRoutes = [
  route({
    method: 'POST',
    path: '/generate',
    tag: 'generate',
    summary: 'Generate a labelled dataset (ner, classification) or chat pairs (decoder) asynchronously',
    description: `\`num_examples\` 1–${SYNTHETIC_DATA_LIMITS.maxExamples}; \`labels\` required for ner/classification. Poll GET /generate/jobs/{job_id} until complete; the dataset is then a new version of \`dataset_name\`.`,
    body: SyntheticDataRequest,
    responses: {
      202: { description: 'Queued', schema: z.object({ job_id: z.string(), status: z.string() }) },
      ...computeStartErrors,
    },
    handler: async ({ svc, principal, body }) => {
      const job = await createSyntheticDataJob(svc, principal.team_id, body);
      return json(202, { job_id: job.job_id, status: job.status });
    },
  }),
  route({
    method: 'GET',
    path: '/generate/jobs',
    tag: 'generate',
    summary: 'Generation jobs, newest first',
    responses: { 200: { description: 'Jobs', schema: z.object({ data: z.array(GenerationJobSchema) }) } },
    handler: async ({ svc, principal }) => json(200, { data: await listSyntheticDataJobs(svc, principal.team_id) }),
  }),
  route({
    method: 'GET',
    path: '/generate/jobs/:job_id',
    tag: 'generate',
    summary: 'A generation job: status, progress (`generated`), the dataset version it produced',
    params: z.object({ job_id: z.string().min(1).max(64) }),
    responses: { 200: { description: 'Job', schema: GenerationJobSchema }, 404: { description: 'Not found' } },
    handler: async ({ svc, principal, params }) =>
      json(200, await getSyntheticDataJob(svc, principal.team_id, params.job_id)),
  }),
  route({
    method: 'POST',
    path: '/generate/ner/label-existing',
    tag: 'generate',
    summary: 'Annotate existing texts with entity spans (offsets in code points), synchronously',
    description: `1–${LABEL_EXISTING_MAX_INPUTS} inputs; \`model_id\` defaults to the installation's default encoder.`,
    body: LabelExistingBody,
    responses: responses(
      z.object({
        text: z.string(),
        windows,
        entities: z.array(
          z.object({ text: z.string(), label: z.string(), start: z.number(), end: z.number(), score: z.number() }),
        ),
      }),
    ),
    handler: (ctx) => annotate(ctx, 'ner'),
  }),
  route({
    method: 'POST',
    path: '/generate/classification/label-existing',
    tag: 'generate',
    summary: 'Classify existing texts into one of the labels (top label and its score), synchronously',
    description: `1–${LABEL_EXISTING_MAX_INPUTS} inputs; \`model_id\` defaults to the installation's default encoder.`,
    body: LabelExistingBody,
    responses: responses(
      z.object({ text: z.string(), windows, label: z.string().nullable(), score: z.number().nullable() }),
    ),
    handler: (ctx) => annotate(ctx, 'classification'),
  }),
];

import { z } from 'zod';
import { CATALOG } from '../../core/catalog';
import { NotFoundError } from '../../core/errors';
import { readiness } from '../../core/readiness';
import { servedFineTunedModel, servedFineTunedModels, type TrainingJob } from '../../core/trainingJobs';
import { json, route } from '../types';
import { ModelBuildSchema } from './schemas';

const CREATED = Math.floor(Date.parse('2026-01-01T00:00:00Z') / 1000);
/** One body both SDKs accept (compat.md §6): OpenAI's Model plus Anthropic's ModelInfo keys. */
const openAiModel = (id: string) => ({
  id,
  object: 'model' as const,
  created: CREATED,
  owned_by: id.split('/')[0] ?? 'sift',
  type: 'model' as const,
  display_name: id.split('/').at(-1) ?? id,
  created_at: new Date(CREATED * 1000).toISOString().replace('.000Z', 'Z'),
});
/** A fine-tuned decoder as OpenAI lists one: owned by the team, created when its job finished. */
const fineTunedModel = ({ name, job }: { name: string; job: TrainingJob }, teamId: string) => {
  const finished = Date.parse(job.finished_at ?? job.created_at);
  return {
    ...openAiModel(name),
    created: Math.floor(finished / 1000),
    owned_by: teamId,
    display_name: name,
    created_at: new Date(finished).toISOString().replace(/\.\d{3}Z$/, 'Z'),
  };
};
const OpenAiModel = z.object({
  id: z.string(),
  object: z.literal('model'),
  created: z.number(),
  owned_by: z.string(),
  type: z.literal('model'),
  display_name: z.string(),
  created_at: z.string(),
});

const ReadinessSchema = z.object({
  ready: z.boolean(),
  checks: z.record(z.string(), z.object({ ok: z.boolean(), detail: z.string().optional(), ms: z.number() })),
  builds: z.record(z.string(), ModelBuildSchema).optional(),
});

/** Routes that need no credentials. `/openapi.json` is added by openapi.ts, which needs every route. */
export const metaRoutes = [
  route({
    method: 'GET',
    path: '/health',
    tag: 'meta',
    summary: 'Liveness: the process answers',
    responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
    handler: async () => json(200, { status: 'ok' }),
  }),
  route({
    method: 'GET',
    path: '/ready',
    tag: 'meta',
    summary:
      'Readiness: stores reachable, preloaded models (SIFT_PRELOAD_MODELS) loaded and no model still building (local first start); 503 until then',
    responses: {
      200: { description: 'Ready', schema: ReadinessSchema },
      503: { description: 'Not ready (the body says which check failed)', schema: ReadinessSchema },
    },
    handler: async ({ svc }) => {
      const report = await readiness(svc);
      return json(report.ready ? 200 : 503, report);
    },
  }),
  route({
    method: 'GET',
    path: '/v1/models',
    tag: 'compatible',
    summary:
      "List models (OpenAI/Anthropic-compatible; public, 200 without credentials; with a key, also the team's deployed fine-tuned decoders by their ft: names)",
    responses: {
      200: {
        description: 'Model list (OpenAI list shape merged with Anthropic paging keys)',
        schema: z.object({
          object: z.literal('list'),
          data: z.array(OpenAiModel),
          has_more: z.boolean(),
          first_id: z.string().nullable(),
          last_id: z.string().nullable(),
        }),
      },
    },
    handler: async ({ svc, principal }) => {
      // with a valid key, also the team's fine-tuned decoders by their ft: names (OpenAI lists them too)
      const tuned = principal ? await servedFineTunedModels(svc, principal.team_id) : [];
      const data = [
        ...CATALOG.map((m) => openAiModel(m.id)),
        ...tuned.map((t) => fineTunedModel(t, principal!.team_id)),
      ];
      return json(200, {
        object: 'list',
        data,
        has_more: false,
        first_id: data[0]?.id ?? null,
        last_id: data.at(-1)?.id ?? null,
      });
    },
  }),
  route({
    method: 'GET',
    path: '/v1/models/*',
    tag: 'compatible',
    summary: 'One model (ids contain a slash: /v1/models/fastino/gliner2-base-v1)',
    params: z.object({ '*': z.string() }),
    responses: { 200: { description: 'Model', schema: OpenAiModel }, 404: { description: 'Unknown model' } },
    handler: async ({ svc, principal, params }) => {
      // The OpenAI SDK percent-encodes the id (`HuggingFaceTB%2FSmolLM2-135M-Instruct`).
      let id = params['*'];
      try {
        id = decodeURIComponent(id);
      } catch {
        /* keep as sent */
      }
      const model = CATALOG.find((m) => m.id === id);
      if (model) return json(200, openAiModel(model.id));
      const match = principal ? await servedFineTunedModel(svc, principal.team_id, id) : undefined;
      if (!match) throw new NotFoundError(`Model '${id}' not found`);
      return json(200, fineTunedModel(match, principal!.team_id));
    },
  }),
];

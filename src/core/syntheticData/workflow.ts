/**
 * The generation state machine's tasks (lib/workflows/definitions.ts: PlanGeneration →
 * GenerateShards (Map) → AssembleDataset; failures → MarkGenerationFailed). Texts come from the
 * decoder; NER rows are then labelled by the encoder (as `label-existing` does); classification
 * rows carry the label they were written for; decoder rows are question/answer chat pairs. The
 * result becomes a new dataset version through the ordinary processing path, so every row rule holds.
 */
import { createHash } from 'node:crypto';
import type { Services } from '../context';
import { getVersion } from '../datasets/service';
import { reserveProducedVersion, submitProducedRows, waitForProcessing } from '../datasets/produced';
import { resolveEncoderModel } from '../extraction/runtime';
import type { EvaluationPredictor } from '../evaluation/workflow';
import { failureReason, type TaskTable, type WorkflowError } from '../workflowTasks';
import { finishSyntheticDataJob, getSyntheticDataJob, type SyntheticDataJob } from './jobs';
import { generationItem } from '../recordKeys';
import { generationUsagePrefix, type GenerationShardUsage } from '../billing/compute';
import { WriteConflict } from '../ports';

export const SYNTHETIC_DATA_SHARD = 25;
/** Attempts per wanted example before a shard gives up (duplicates and empty outputs are retried). */
const ATTEMPTS_PER_EXAMPLE = 3;

/** The decoder, wherever it runs. */
export interface TextGenerator {
  /** The catalog decoder it runs (its prices bill the job: billing/prices.ts). */
  readonly model: string;
  /** One completion, and the tokens it read and wrote (billed, kept or not). */
  complete(
    system: string,
    user: string,
    opts: { seed: number; maxTokens: number; temperature: number },
  ): Promise<{ text: string; inputTokens: number; outputTokens: number }>;
}

export interface SyntheticDataShard {
  index: number;
  count: number;
}

const shardKey = (teamId: string, jobId: string, index: number) =>
  `generation/${teamId}/${jobId}/shards/${String(index).padStart(6, '0')}.jsonl`;

/** One line, no wrapping quotes or list markers, bounded length; '' when nothing usable is left. */
export function cleanGenerated(raw: string): string {
  const line =
    raw
      .split('\n')
      .map((l) => l.trim())
      .find((l) => l.length > 0) ?? '';
  const text = line
    .replace(/^(\d+[.)]|[-*•])\s+/, '')
    .replace(/^["'“”]+|["'“”]+$/g, '')
    .replace(/\s+/g, ' ')
    .trim();
  return text.length >= 8 ? text.slice(0, 500) : '';
}

const SYSTEM = 'You write short, realistic, varied example texts. Answer with the text only.';

function domainHint(job: SyntheticDataJob): string {
  return job.domain_description ? ` The domain: ${job.domain_description}.` : '';
}

function classificationPrompt(job: SyntheticDataJob, label: string): string {
  const seeds = job.classified_examples.filter((e) => e.label === label).slice(0, 3);
  const examples = seeds.length ? ` Examples of "${label}": ${seeds.map((e) => `"${e.text}"`).join(' ')}` : '';
  return `Write one short message that is clearly about "${label}".${domainHint(job)}${examples}${job.prompt ? ` ${job.prompt}` : ''}`;
}

function nerPrompt(job: SyntheticDataJob, seed: number): string {
  const pick = job.labels.filter((_, i) => (seed >> i) % 2 === 0 || job.labels.length === 1);
  const types = (pick.length ? pick : job.labels).join(', ');
  return `Write one sentence that mentions a ${types}, with concrete names.${domainHint(job)}${job.prompt ? ` ${job.prompt}` : ''}`;
}

/** `generation.plan`: shards, and the job is running (never reopened once it ended: its slot is freed and its bill written). */
export async function planSyntheticData(
  svc: Services,
  input: { jobId: string; teamId: string },
): Promise<{ shards: SyntheticDataShard[] }> {
  const job = await getSyntheticDataJob(svc, input.teamId, input.jobId);
  const key = generationItem(input.teamId, job.job_id);
  try {
    await svc.records.update(key.pk, key.sk, {
      set: { status: 'running', generated: 0 },
      condition: [
        {
          anyOf: [
            { attr: 'status', equals: 'queued' },
            { attr: 'status', equals: 'running' },
          ],
        },
      ],
    });
  } catch (err) {
    if (err instanceof WriteConflict) throw new Error(`generation job ${job.job_id} has already ended (${job.status})`);
    throw err;
  }
  const shards: SyntheticDataShard[] = [];
  for (let i = 0, n = 0; n < job.num_examples; i++, n += SYNTHETIC_DATA_SHARD)
    shards.push({ index: i, count: Math.min(SYNTHETIC_DATA_SHARD, job.num_examples - n) });
  return { shards };
}

/** `generation.shard`: writes the shard's rows to the blob store; returns where (Step Functions' state cap). */
export async function generateSyntheticDataShard(
  svc: Services,
  generator: TextGenerator,
  labeller: EvaluationPredictor,
  input: { jobId: string; teamId: string; shard: SyntheticDataShard },
  encoderModel = svc.config.defaultEncoder,
): Promise<{ key: string; rows: number }> {
  const job = await getSyntheticDataJob(svc, input.teamId, input.jobId);
  const seen = new Set<string>();
  const rows: Record<string, unknown>[] = [];
  const texts: { text: string; label?: string; answer?: string }[] = [];
  const usage: GenerationShardUsage = {
    model: generator.model,
    input_tokens: 0,
    output_tokens: 0,
    label_model: null,
    label_tokens: 0,
  };
  // every completion is billed, also the ones dropped as empty or duplicate: the decoder ran
  const complete = async (
    system: string,
    user: string,
    opts: { seed: number; maxTokens: number; temperature: number },
  ) => {
    const out = await generator.complete(system, user, opts);
    usage.input_tokens += out.inputTokens;
    usage.output_tokens += out.outputTokens;
    return out.text;
  };
  for (
    let attempt = 0;
    texts.length < input.shard.count && attempt < input.shard.count * ATTEMPTS_PER_EXAMPLE;
    attempt++
  ) {
    // deterministic per (job, shard, attempt): a retried shard writes the same rows
    const seed = parseInt(
      createHash('sha256').update(`${job.job_id}:${input.shard.index}:${attempt}`).digest('hex').slice(0, 8),
      16,
    );
    const opts = { seed, maxTokens: 60, temperature: 0.9 };
    if (job.task_type === 'classification') {
      const label = job.labels[(input.shard.index * SYNTHETIC_DATA_SHARD + texts.length) % job.labels.length] as string;
      const text = cleanGenerated(await complete(SYSTEM, classificationPrompt(job, label), opts));
      if (text && !seen.has(text)) texts.push({ text, label });
      if (text) seen.add(text);
    } else if (job.task_type === 'ner') {
      const text = cleanGenerated(await complete(SYSTEM, nerPrompt(job, seed), opts));
      if (text && !seen.has(text)) texts.push({ text });
      if (text) seen.add(text);
    } else {
      const question = cleanGenerated(
        await complete(
          SYSTEM,
          `Write one question a user could ask an assistant.${domainHint(job)}${job.prompt ? ` ${job.prompt}` : ''}`,
          opts,
        ),
      );
      if (!question || seen.has(question)) continue;
      seen.add(question);
      const answer = (
        await complete('You are a helpful assistant. Answer briefly.', question, {
          ...opts,
          maxTokens: 120,
          temperature: 0.3,
        })
      ).trim();
      if (answer) texts.push({ text: question, answer });
    }
  }
  if (job.task_type === 'ner' && texts.length) {
    const model = await resolveEncoderModel(svc, input.teamId, encoderModel);
    const { predictions, inputTokens } = await labeller.predict(
      model,
      texts.map((t) => t.text),
      { entities: job.labels },
      0.5,
    );
    usage.label_model = model.baseModel;
    usage.label_tokens = inputTokens;
    texts.forEach((t, i) => {
      const entities = (predictions[i]?.entities ?? []).map((e) => ({
        text: e.text,
        label: e.label,
        start: e.start,
        end: e.end,
      }));
      // rows where the labeller found nothing would teach "no entities here" for texts written to have some
      if (entities.length) rows.push({ text: t.text, entities });
    });
  } else if (job.task_type === 'classification') {
    for (const t of texts) rows.push({ text: t.text, label: t.label });
  } else {
    for (const t of texts)
      rows.push({
        messages: [
          { role: 'user', content: t.text },
          { role: 'assistant', content: t.answer },
        ],
      });
  }
  const key = shardKey(input.teamId, job.job_id, input.shard.index);
  await svc.blobs.put(
    key,
    rows.map((r) => JSON.stringify(r)).join('\n') + (rows.length ? '\n' : ''),
    'application/x-ndjson',
  );
  // what the job is billed for when it ends (a retried shard overwrites its own note: counted once)
  await svc.blobs.put(
    `${generationUsagePrefix(input.teamId, job.job_id)}${String(input.shard.index).padStart(6, '0')}.json`,
    JSON.stringify(usage),
    'application/json',
  );
  const item = generationItem(input.teamId, job.job_id);
  await svc.records.update(item.pk, item.sk, { add: { generated: rows.length } });
  return { key, rows: rows.length };
}

/** `generation.assemble`: one new dataset version from the shards, processed like any upload. */
export async function assembleSyntheticData(
  svc: Services,
  input: { jobId: string; teamId: string; shards?: { key: string; rows: number }[] },
  waitMs = 10 * 60_000,
): Promise<{ dataset_name: string; version: number; status: string }> {
  const job = await getSyntheticDataJob(svc, input.teamId, input.jobId);
  const item = generationItem(input.teamId, job.job_id);
  const total = (input.shards ?? []).reduce((n, s) => n + s.rows, 0);
  if (total === 0)
    throw new Error(
      'the generator produced no usable example (all outputs were empty, duplicates, or had no entity the labeller could find)',
    );
  let version = job.dataset_version;
  if (version === null) {
    version = await reserveProducedVersion(svc, input.teamId, job.dataset_name, 'generated.jsonl');
    // remember the version first: a retried assemble must not reserve another one
    await svc.records.update(item.pk, item.sk, { set: { dataset_version: version } });
  }
  if ((await getVersion(svc, input.teamId, job.dataset_name, version)).status === 'pending_upload') {
    let parts = '';
    for (const s of input.shards ?? []) {
      if (!s.key.startsWith(`generation/${input.teamId}/${job.job_id}/`))
        throw new Error(`shard ${s.key} is not this job's`);
      parts += await svc.blobs.getText(s.key);
    }
    await submitProducedRows(svc, input.teamId, job.dataset_name, version, parts);
  }
  const v = await waitForProcessing(svc, input.teamId, job.dataset_name, version, waitMs);
  const warnings =
    total < job.num_examples
      ? [
          `${total} of ${job.num_examples} requested examples were produced (the rest were empty, duplicates, or unlabelled)`,
        ]
      : [];
  await finishSyntheticDataJob(
    svc,
    input.teamId,
    job.job_id,
    v.status === 'ready'
      ? { status: 'complete', warnings }
      : {
          status: 'failed',
          error: `the generated rows failed validation: ${v.errors
            .slice(0, 3)
            .map((e) => e.message)
            .join('; ')}`,
        },
  );
  return { dataset_name: job.dataset_name, version, status: v.status };
}

/** `generation.failed`. */
export async function recordSyntheticDataFailure(
  svc: Services,
  input: { jobId: string; teamId: string; error?: WorkflowError },
): Promise<{ status: string }> {
  const item = generationItem(input.teamId, input.jobId);
  if (
    await finishSyntheticDataJob(svc, input.teamId, input.jobId, {
      status: 'failed',
      error: failureReason(input.error, 'the generation workflow failed'),
    })
  )
    return { status: 'failed' };
  // already ended (a retried failure step): left as it is
  return { status: (await svc.records.get<SyntheticDataJob>(item.pk, item.sk))?.status ?? 'deleted' };
}

type ShardInput = { jobId: string; teamId: string; shard: SyntheticDataShard };

/** The generation tasks by ASL task name; `shard` runs here (`generateSyntheticDataShard`) or in the gateway (workflow Lambda). */
export function syntheticDataTasks(
  svc: Services,
  shard: (input: ShardInput) => Promise<{ key: string; rows: number }>,
): TaskTable {
  return {
    'generation.plan': (input: { jobId: string; teamId: string }) => planSyntheticData(svc, input),
    'generation.shard': shard,
    'generation.assemble': (input: { jobId: string; teamId: string; shards?: { key: string; rows: number }[] }) =>
      assembleSyntheticData(svc, input),
    'generation.failed': (input: { jobId: string; teamId: string; error?: WorkflowError }) =>
      recordSyntheticDataFailure(svc, input),
  } as TaskTable;
}

/**
 * Synthetic-data generation jobs (docs/reference/decisions.md#generation): `queued → running →
 * complete | failed`; the finished job names the dataset version it produced. The work itself is
 * the generation state machine (generation/workflow.ts).
 */
import { byCreation, generationItem, generationsIndex } from '../recordKeys';
import { z } from 'zod';
import type { Services } from '../context';
import { NotFoundError, ValidationError } from '../errors';
import { isUuid, newUuid } from '../ids';
import { admitCompute, billGeneration } from '../billing/compute';
import { releaseComputeSlot } from '../computeSlots';
import { WriteConflict } from '../ports';

export type SyntheticDataStatus = 'queued' | 'running' | 'complete' | 'failed';

/** Documented caps (README "Synthetic data"). */
export const SYNTHETIC_DATA_LIMITS = { maxExamples: 10_000, maxLabels: 50, maxSeedExamples: 50 } as const;

export const SyntheticDataRequest = z.strictObject({
  task_type: z.enum(['ner', 'classification', 'decoder']),
  dataset_name: z
    .string()
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/,
      'letters, digits, ".", "_" and "-", starting with a letter or digit (at most 128)',
    ),
  num_examples: z.number().int().min(1).max(SYNTHETIC_DATA_LIMITS.maxExamples),
  labels: z.array(z.string().trim().min(1).max(100)).min(1).max(SYNTHETIC_DATA_LIMITS.maxLabels).optional(),
  domain_description: z.string().max(2000).optional(),
  classified_examples: z
    .array(z.strictObject({ text: z.string().min(1).max(2000), label: z.string().min(1) }))
    .max(SYNTHETIC_DATA_LIMITS.maxSeedExamples)
    .optional(),
  prompt: z.string().max(4000).optional(),
});
export type SyntheticDataInput = z.output<typeof SyntheticDataRequest>;

export interface SyntheticDataJob {
  job_id: string;
  status: SyntheticDataStatus;
  task_type: SyntheticDataInput['task_type'];
  dataset_name: string;
  dataset_version: number | null;
  num_examples: number;
  generated: number;
  labels: string[];
  domain_description: string | null;
  classified_examples: { text: string; label: string }[];
  prompt: string | null;
  warnings: string[];
  error: string | null;
  created_at: string;
  finished_at: string | null;
}

export async function createSyntheticDataJob(
  svc: Services,
  teamId: string,
  input: SyntheticDataInput,
): Promise<SyntheticDataJob> {
  const labels = [...new Set(input.labels ?? [])];
  if (input.task_type !== 'decoder' && labels.length === 0)
    throw ValidationError.field(
      ['body', 'labels'],
      `labels are required for task_type '${input.task_type}'`,
      'missing',
    );
  if (input.task_type === 'decoder' && input.labels)
    throw ValidationError.field(['body', 'labels'], "task_type 'decoder' generates chat pairs and takes no labels");
  if (input.classified_examples && input.task_type !== 'classification') {
    throw ValidationError.field(
      ['body', 'classified_examples'],
      'classified_examples are for task_type classification only',
    );
  }
  (input.classified_examples ?? []).forEach((e, i) => {
    if (!labels.includes(e.label))
      throw ValidationError.field(['body', 'classified_examples', i, 'label'], `'${e.label}' is not one of labels`);
  });
  // compute is money: out of credit (402), past the daily cap or at the plan's running cap (429) → nothing is written
  const jobId = newUuid();
  await admitCompute(svc, teamId, 'generation', jobId);
  const job: SyntheticDataJob = {
    job_id: jobId,
    status: 'queued',
    task_type: input.task_type,
    dataset_name: input.dataset_name,
    dataset_version: null,
    num_examples: input.num_examples,
    generated: 0,
    labels,
    domain_description: input.domain_description ?? null,
    classified_examples: input.classified_examples ?? [],
    prompt: input.prompt ?? null,
    warnings: [],
    error: null,
    created_at: svc.now().toISOString(),
    finished_at: null,
  };
  const key = generationItem(teamId, job.job_id);
  try {
    await svc.records.put(
      { ...key, gsi1pk: generationsIndex(teamId), gsi1sk: byCreation(job.created_at, job.job_id) },
      job,
      { ifAbsent: true },
    );
  } catch (err) {
    await releaseComputeSlot(svc, teamId, 'generation', jobId);
    throw err;
  }
  try {
    if (!svc.workflows) throw new Error('this deployment has no workflow runner configured');
    await svc.workflows.start('generation', `gen-${job.job_id}`, { jobId: job.job_id, teamId });
  } catch (err) {
    const failed = { status: 'failed' as const, error: `could not start the generation: ${(err as Error).message}` };
    return (
      (await finishSyntheticDataJob(svc, teamId, jobId, failed)) ?? {
        ...job,
        ...failed,
        finished_at: svc.now().toISOString(),
      }
    );
  }
  return job;
}

/**
 * The one transition that ends a generation job (`queued|running` → `complete` | `failed`),
 * conditional on it still running: only the write that wins bills the shards that ran and frees the
 * team's slot, so a retried assemble or failure step does nothing. Undefined when it had already ended.
 */
export async function finishSyntheticDataJob(
  svc: Services,
  teamId: string,
  jobId: string,
  set: { status: 'complete' | 'failed'; error?: string; warnings?: string[] },
): Promise<SyntheticDataJob | undefined> {
  const key = generationItem(teamId, jobId);
  let after: SyntheticDataJob;
  try {
    after = await svc.records.update<SyntheticDataJob>(key.pk, key.sk, {
      set: { ...set, finished_at: svc.now().toISOString() },
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
    if (err instanceof WriteConflict) return undefined;
    throw err;
  }
  await billGeneration(svc, teamId, jobId);
  await releaseComputeSlot(svc, teamId, 'generation', jobId);
  return after;
}

export async function getSyntheticDataJob(svc: Services, teamId: string, id: string): Promise<SyntheticDataJob> {
  const key = generationItem(teamId, id);
  const found = isUuid(id) ? await svc.records.get<SyntheticDataJob>(key.pk, key.sk) : undefined;
  if (!found) throw new NotFoundError(`Generation job '${id}' not found`);
  return found;
}

export async function listSyntheticDataJobs(svc: Services, teamId: string): Promise<SyntheticDataJob[]> {
  return svc.records.queryAll<SyntheticDataJob>(generationsIndex(teamId), { index: 'gsi1', newestFirst: true });
}

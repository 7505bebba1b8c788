/**
 * Core unit tests' fixtures: a team with a ready dataset and training jobs, made through the same
 * domain calls the HTTP routes make, on the in-memory service graph (src/adapters/memory/services.ts).
 */
import { createMemoryServices, type MemoryServices } from '../../src/adapters/memory/services';
import { createUploadUrl, getVersion, sourceKey, startProcessing } from '../../src/core/datasets/service';
import { createTeam } from '../../src/core/teams';
import { createTrainingJob, transitionJob, type TrainingJob } from '../../src/core/trainingJobs';
import { modelPrefix } from '../../src/core/training/artifacts';
import { handleWorkMessage } from '../../src/core/worker';

export const ENCODER = 'fastino/gliner2-base-v1';

const NER_ROWS = [
  {
    text: 'Tim Cook leads Apple.',
    entities: [
      ['Tim Cook', 'person'],
      ['Apple', 'company'],
    ],
  },
  {
    text: 'Satya Nadella runs Microsoft.',
    entities: [
      ['Satya Nadella', 'person'],
      ['Microsoft', 'company'],
    ],
  },
];

/** Uploads a dataset version and runs the queued processing, as the worker does. */
export async function readyDataset(
  svc: MemoryServices,
  teamId: string,
  name: string,
  rows: object[] = NER_ROWS,
): Promise<void> {
  const url = await createUploadUrl(svc, teamId, { dataset_name: name, file_name: 'rows.jsonl', new_version: true });
  // the client's PUT to the presigned URL: the file lands where the version's record says
  await svc.blobs.put(
    sourceKey(teamId, await getVersion(svc, teamId, name, url.version)),
    `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`,
  );
  await startProcessing(svc, teamId, name, url.version);
  for (const message of svc.sent.splice(0)) await handleWorkMessage(svc, message);
}

export async function teamWithDataset(
  opts: { now?: () => Date; credit_balance_usd?: number; daily_spend_cap_usd?: number } = {},
) {
  const svc = createMemoryServices(opts.now ? { now: opts.now } : {});
  const team = await createTeam(svc, {
    name: 'acme',
    ...(opts.credit_balance_usd !== undefined ? { credit_balance_usd: opts.credit_balance_usd } : {}),
    ...(opts.daily_spend_cap_usd !== undefined ? { daily_spend_cap_usd: opts.daily_spend_cap_usd } : {}),
  });
  await readyDataset(svc, team.id, 'ner-set');
  return { svc, teamId: team.id };
}

export const newJob = (svc: MemoryServices, teamId: string, model_name = 'my-ner') =>
  createTrainingJob(svc, teamId, { model_name, base_model: ENCODER, datasets: [{ name: 'ner-set' }] });

/** A complete encoder job whose exported model (an ONNX export in its manifest) is in the blob store. */
export async function completeJob(svc: MemoryServices, teamId: string, model_name = 'my-ner'): Promise<TrainingJob> {
  const job = await newJob(svc, teamId, model_name);
  await transitionJob(svc, teamId, job.id, 'running');
  await svc.blobs.put(`${modelPrefix(teamId, job.id)}manifest.json`, JSON.stringify({ files: { onnx_dir: 'onnx/' } }));
  return transitionJob(svc, teamId, job.id, 'complete');
}

/**
 * A complete encoder job whose weights are a copy of the built mini model, for tests whose subject
 * is what happens after training (deployments, routing, evaluations' bookkeeping). Training itself
 * is tested for real in test/training; here it would only add minutes.
 */
import { newUuid } from '../../src/core/ids';
import { modelPrefix, registerCheckpoint } from '../../src/core/training/artifacts';
import { createTrainingJob, transitionJob, type TrainingJob } from '../../src/core/trainingJobs';
import type { TestStack } from './localStack';

export async function seedCompleteEncoderJob(
  stack: TestStack,
  teamId: string,
  dataset: string,
  modelName = 'seeded',
): Promise<TrainingJob> {
  const svc = stack.svc;
  // recorded without submitting it: a stack that trains must not start this job for real; its
  // explicit epochs keep a job continued from it (an adaptive candidate) short instead of data-sized
  const { training: _unused, ...recordOnly } = svc;
  const job = await createTrainingJob(recordOnly, teamId, {
    model_name: modelName,
    base_model: 'sift/gliner2-mini-v1',
    datasets: [{ name: dataset }],
    training_type: 'full',
    nr_epochs: 10,
  });
  await transitionJob(svc, teamId, job.id, 'running');
  const from = 'models/sift/gliner2-mini-v1/';
  const to = modelPrefix(teamId, job.id);
  const keys = await svc.blobs.list(from);
  if (!keys.some((k) => k.endsWith('manifest.json')))
    throw new Error('the mini model is not in the model store: start the stack withModels');
  for (const k of keys) await svc.blobs.copy(k, to + k.slice(from.length));
  const finalId = newUuid();
  await registerCheckpoint(svc, teamId, {
    id: finalId,
    job_id: job.id,
    root_model: job.root_model,
    blob_prefix: to,
    step: 1,
    epoch: 1,
    metrics: null,
    is_best: false,
    is_final: true,
    created_at: svc.now().toISOString(),
  });
  return transitionJob(svc, teamId, job.id, 'complete', { final_checkpoint_id: finalId });
}

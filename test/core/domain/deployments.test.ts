/** Deployments and model ids on the in-memory store (no emulators): src/core/deployments.ts. */
import {
  clearProjectDeployment,
  deployTrainingJob,
  listProjectDeployments,
  promoteToProject,
  resolveServingTarget,
  rollbackProject,
  undeployTrainingJob,
} from '../../../src/core/deployments';
import { ConflictError, NotFoundError } from '../../../src/core/errors';
import { createProject } from '../../../src/core/projects';
import { transitionJob } from '../../../src/core/trainingJobs';
import { modelPrefix } from '../../../src/core/training/artifacts';
import { completeJob, ENCODER, newJob, teamWithDataset } from '../../helpers/memoryDomain';

describe('deployments on the in-memory store', () => {
  it('a catalog id resolves to the catalog; an unknown id is 404', async () => {
    const { svc, teamId } = await teamWithDataset();
    expect(await resolveServingTarget(svc, teamId, ENCODER)).toMatchObject({
      kind: 'catalog',
      model: { id: ENCODER },
      projectId: null,
      job: null,
    });
    await expect(resolveServingTarget(svc, teamId, 'no-such-model')).rejects.toBeInstanceOf(NotFoundError);
  });

  it('only a complete job with servable weights deploys; a deployed job id then resolves to its weights', async () => {
    const { svc, teamId } = await teamWithDataset();
    const pending = await newJob(svc, teamId);
    await expect(deployTrainingJob(svc, teamId, pending.id)).rejects.toThrow(
      /is requested; only a complete job can be deployed/,
    );
    await transitionJob(svc, teamId, pending.id, 'running');
    await transitionJob(svc, teamId, pending.id, 'complete');
    await expect(deployTrainingJob(svc, teamId, pending.id)).rejects.toThrow(
      /has no servable weights \(an ONNX export\)/,
    );
    await expect(resolveServingTarget(svc, teamId, pending.id)).rejects.toThrow(
      new ConflictError(`Training job '${pending.id}' has no active inference deployment`),
    );

    const job = await completeJob(svc, teamId);
    const deployed = await deployTrainingJob(svc, teamId, job.id);
    expect(deployed.deployment).toMatchObject({ status: 'active', blob_prefix: modelPrefix(teamId, job.id) });
    expect(await resolveServingTarget(svc, teamId, job.id)).toMatchObject({
      kind: 'deployment',
      job: { id: job.id },
      projectId: null,
      model: { id: ENCODER },
    });
    // deploying again changes nothing
    expect(await deployTrainingJob(svc, teamId, job.id)).toEqual(deployed);
  });

  it('a project follows promote, rollback and clear, with an append-only history', async () => {
    // a clock that ticks a second per reading: history entries are ordered by their time
    let t = Date.parse('2026-01-01T00:00:00Z');
    const now = () => {
      t += 1000;
      return new Date(t);
    };
    const { svc, teamId } = await teamWithDataset({ now });
    const project = await createProject(svc, teamId, { name: 'support-bot' });
    await expect(resolveServingTarget(svc, teamId, 'support-bot')).rejects.toThrow(
      /has no active inference deployment: deploy a trained model to it first/,
    );
    const first = await completeJob(svc, teamId, 'first');
    const second = await completeJob(svc, teamId, 'second');

    await promoteToProject(svc, teamId, 'support-bot', { training_job_id: first.id });
    expect(await resolveServingTarget(svc, teamId, 'support-bot')).toMatchObject({
      job: { id: first.id },
      projectId: project.id,
    });
    const promoted = await promoteToProject(svc, teamId, project.id, { training_job_id: second.id });
    expect(promoted.project.active_training_job_id).toBe(second.id);
    expect(await resolveServingTarget(svc, teamId, project.id)).toMatchObject({ job: { id: second.id } });

    // a job that serves a project can't be undeployed under it
    await expect(undeployTrainingJob(svc, teamId, second.id)).rejects.toThrow(/is serving project 'support-bot'/);

    const rolled = await rollbackProject(svc, teamId, 'support-bot', {});
    expect(rolled.project.active_training_job_id).toBe(first.id);
    expect(rolled.deployment).toMatchObject({
      action: 'rollback',
      training_job_id: first.id,
      previous_training_job_id: second.id,
    });

    await clearProjectDeployment(svc, teamId, 'support-bot');
    await expect(resolveServingTarget(svc, teamId, 'support-bot')).rejects.toBeInstanceOf(ConflictError);
    const history = await listProjectDeployments(svc, teamId, 'support-bot');
    expect(history.deployments.map((d) => [d.action, d.training_job_id])).toEqual([
      ['clear', null],
      ['rollback', first.id],
      ['promote', second.id],
      ['promote', first.id],
    ]);
    // once no project serves it, the job can be undeployed, and its id stops resolving
    await undeployTrainingJob(svc, teamId, second.id);
    await expect(resolveServingTarget(svc, teamId, second.id)).rejects.toBeInstanceOf(ConflictError);
  });

  it('of two promotes racing from the same project state, one wins and the other is told to retry', async () => {
    const { svc, teamId } = await teamWithDataset();
    await createProject(svc, teamId, { name: 'p' });
    const a = await completeJob(svc, teamId, 'a');
    const b = await completeJob(svc, teamId, 'b');
    await deployTrainingJob(svc, teamId, a.id);
    await deployTrainingJob(svc, teamId, b.id);
    const results = await Promise.allSettled(
      [a, b].map((job) => promoteToProject(svc, teamId, 'p', { training_job_id: job.id })),
    );
    const rejected = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    expect(rejected).toHaveLength(1);
    expect((rejected[0]!.reason as Error).message).toMatch(/changed while this request ran; read it again and retry/);
    expect((await listProjectDeployments(svc, teamId, 'p')).deployments).toHaveLength(1);
  });
});

/** Training-job state machine on the in-memory store (no emulators): src/core/trainingJobs.ts. */
import { ConflictError, NotFoundError } from '../../../src/core/errors';
import {
  deleteTrainingJob,
  getTrainingJob,
  listTrainingJobs,
  recordJobProgress,
  stopTrainingJob,
  transitionJob,
} from '../../../src/core/trainingJobs';
import { WriteConflict } from '../../../src/core/ports';
import { newJob, readyDataset, teamWithDataset } from '../../helpers/memoryDomain';

describe('training jobs on the in-memory store', () => {
  it('a new job is requested and pins the newest ready version of its dataset', async () => {
    const { svc, teamId } = await teamWithDataset();
    await readyDataset(svc, teamId, 'ner-set');
    const job = await newJob(svc, teamId);
    expect(job).toMatchObject({
      status: 'requested',
      datasets: [{ name: 'ner-set', version: 2 }],
      task_types: ['ner'],
      started_at: null,
      finished_at: null,
    });
    expect(await getTrainingJob(svc, teamId, job.id)).toEqual(job);
  });

  it('moves requested → running → complete, stamping the times; a finished job moves no further', async () => {
    let t = Date.parse('2026-01-01T00:00:00Z');
    const { svc, teamId } = await teamWithDataset({ now: () => new Date(t) });
    const job = await newJob(svc, teamId);
    t += 60_000;
    const running = await transitionJob(svc, teamId, job.id, 'running');
    expect(running).toMatchObject({ status: 'running', started_at: '2026-01-01T00:01:00.000Z' });
    t += 60_000;
    const done = await transitionJob(svc, teamId, job.id, 'complete', { metrics: { f1: 0.9 } as never });
    expect(done).toMatchObject({ status: 'complete', finished_at: '2026-01-01T00:02:00.000Z', metrics: { f1: 0.9 } });
    await expect(transitionJob(svc, teamId, job.id, 'running')).rejects.toThrow(
      new ConflictError(`Training job '${job.id}' is complete; it cannot become running`),
    );
    await expect(stopTrainingJob(svc, teamId, job.id)).rejects.toBeInstanceOf(ConflictError);
  });

  it('of a stop and a completion racing from running, exactly one wins; the loser gets 409 naming the winner', async () => {
    const { svc, teamId } = await teamWithDataset();
    const job = await newJob(svc, teamId);
    await transitionJob(svc, teamId, job.id, 'running');
    const [a, b] = await Promise.allSettled([
      transitionJob(svc, teamId, job.id, 'stopped'),
      transitionJob(svc, teamId, job.id, 'complete'),
    ]);
    const won = [a, b].filter((r) => r.status === 'fulfilled') as PromiseFulfilledResult<{ status: string }>[];
    const lost = [a, b].filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    expect(won).toHaveLength(1);
    expect(lost).toHaveLength(1);
    expect(lost[0]!.reason).toBeInstanceOf(ConflictError);
    expect((lost[0]!.reason as Error).message).toContain(`changed to ${won[0]!.value.status} meanwhile`);
    expect((await getTrainingJob(svc, teamId, job.id)).status).toBe(won[0]!.value.status);
  });

  it('records progress on the job, but never re-creates a deleted one', async () => {
    const { svc, teamId } = await teamWithDataset();
    const job = await newJob(svc, teamId);
    await transitionJob(svc, teamId, job.id, 'running');
    await recordJobProgress(svc, teamId, job.id, { epoch: 1, step: 10, total_steps: 40 }, 0.42);
    expect(await getTrainingJob(svc, teamId, job.id)).toMatchObject({
      progress: { epoch: 1, step: 10, total_steps: 40 },
      last_loss: 0.42,
    });
    await transitionJob(svc, teamId, job.id, 'failed', { error: 'out of memory' });
    await deleteTrainingJob(svc, teamId, job.id);
    await expect(
      recordJobProgress(svc, teamId, job.id, { epoch: 2, step: 20, total_steps: 40 }),
    ).rejects.toBeInstanceOf(WriteConflict);
    await expect(getTrainingJob(svc, teamId, job.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('a running job cannot be deleted; a stopped one can, and leaves the listing', async () => {
    const { svc, teamId } = await teamWithDataset();
    const job = await newJob(svc, teamId);
    const other = await newJob(svc, teamId, 'second');
    await transitionJob(svc, teamId, job.id, 'running');
    await expect(deleteTrainingJob(svc, teamId, job.id)).rejects.toThrow(/is running; stop it before deleting it/);
    expect((await stopTrainingJob(svc, teamId, job.id)).status).toBe('stopped');
    expect((await listTrainingJobs(svc, teamId, { status: 'stopped' })).map((j) => j.id)).toEqual([job.id]);
    await deleteTrainingJob(svc, teamId, job.id);
    expect((await listTrainingJobs(svc, teamId)).map((j) => j.id)).toEqual([other.id]);
  });

  it("one team cannot reach another team's job", async () => {
    const { svc, teamId } = await teamWithDataset();
    const job = await newJob(svc, teamId);
    await expect(getTrainingJob(svc, 'some-other-team', job.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(transitionJob(svc, 'some-other-team', job.id, 'running')).rejects.toBeInstanceOf(NotFoundError);
  });
});

/**
 * The adaptive loop on a schedule (locally SIFT_ADAPTIVE_EVERY_MINUTES; on AWS the EventBridge rule
 * with the same input): every deployed project of an eligible team gets a cycle, Free teams' none.
 */
import { jsonl, TestStack } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';

let stack: TestStack;

beforeAll(async () => {
  stack = await TestStack.start({ withModels: true, adaptiveEveryMs: 1000, workflowPollMs: 50 });
}, 120_000);
afterAll(async () => stack?.stop());

async function deployedProject(key: string | undefined, teamId: string, name: string) {
  const opts = key ? { key } : {};
  expect(
    (
      await stack.uploadDataset(
        `${name}-data`,
        jsonl([{ text: 'Tim Cook runs Apple', entities: [['Tim Cook', 'person']] }]),
        opts,
      )
    ).status,
  ).toBe('ready');
  const job = await seedCompleteEncoderJob(stack, teamId, `${name}-data`);
  expect((await stack.call('POST', '/projects', { ...opts, body: { name } })).status).toBe(201);
  expect(
    (await stack.call('POST', `/projects/${name}/deployments`, { ...opts, body: { training_job_id: job.id } })).status,
  ).toBe(201);
}

it('runs a cycle for each deployed project of an eligible team, and none for a Free team', async () => {
  const teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
  await deployedProject(undefined, teamId, 'scheduled');
  const free = await stack.call('POST', '/teams', { body: { name: 'free-sched', plan: 'free' } });
  await deployedProject(free.body.api_key.key, free.body.team.id, 'free-scheduled');

  let cycles: any[] = [];
  for (let i = 0; i < 60 && !cycles.some((c) => c.status !== 'running'); i++) {
    await new Promise((r) => setTimeout(r, 500));
    cycles = (await stack.call('GET', '/projects/scheduled/adaptive-cycles')).body.data;
  }
  const done = cycles.find((c) => c.status !== 'running');
  expect(done).toMatchObject({ trigger: 'schedule', status: 'skipped' });
  expect(done.reason).toMatch(/reviewed traces/);
  const freeCycles = await stack.call('GET', '/projects/free-scheduled/adaptive-cycles', {
    key: free.body.api_key.key,
  });
  expect(freeCycles.body.data).toEqual([]);
}, 120_000);

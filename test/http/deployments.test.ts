/**
 * Deployments and projects through HTTP: a job id routes only while deployed, a project name follows
 * promotions and rollbacks with no client change, and nothing that serves traffic can be pulled out
 * from under a project. Inference runs on the real engine over a copy of the mini model.
 */
import OpenAI from 'openai7';
import { jsonl, OPERATOR_KEY, TestStack } from '../helpers/localStack';
import { seedCompleteEncoderJob } from '../helpers/seedJobs';

let stack: TestStack;
let teamId: string;
let jobA: string;
let jobB: string;

const text = 'Tim Cook visited the Apple office in Paris.';
const schema = { entities: ['person', 'company', 'city'] };
const infer = (model_id: string) => stack.call('POST', '/inference', { body: { model_id, text, schema } });

beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
  teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
  expect((await stack.uploadDataset('people', jsonl([{ text, entities: [['Tim Cook', 'person']] }]))).status).toBe(
    'ready',
  );
  jobA = (await seedCompleteEncoderJob(stack, teamId, 'people', 'model-a')).id;
  jobB = (await seedCompleteEncoderJob(stack, teamId, 'people', 'model-b')).id;
}, 180_000);
afterAll(async () => stack?.stop());

describe('training job deployments', () => {
  it('a job id answers 409 until it is deployed, then serves inference; undeploy makes it 409 again', async () => {
    const before = await infer(jobA);
    expect(before.status).toBe(409);
    expect(before.body.detail).toMatch(/has no active inference deployment/);

    const deployed = await stack.call('POST', `/core/training-jobs/${jobA}/deploy`);
    expect(deployed.status).toBe(200);
    expect(deployed.body.deployment).toMatchObject({ status: 'active', checkpoint_id: expect.any(String) });
    expect(deployed.body.deployment.blob_prefix).toBeUndefined();
    expect((await stack.call('GET', `/core/training-jobs/${jobA}`)).body.deployment.status).toBe('active');

    const res = await infer(jobA);
    expect(res.status).toBe(200);
    expect(res.body.model_id).toBe(jobA);
    expect(res.body.result.entities.some((e: any) => e.text === 'Tim Cook' && e.label === 'person')).toBe(true);
    const stored = await stack.call('GET', `/inferences?training_job_id=${jobA}`);
    expect(stored.body.data.map((i: any) => i.inference_id)).toContain(res.body.inference_id);

    expect((await stack.call('POST', `/core/training-jobs/${jobA}/deploy`)).status).toBe(200); // idempotent
    expect((await stack.call('DELETE', `/core/training-jobs/${jobA}/deploy`)).status).toBe(200);
    expect((await infer(jobA)).status).toBe(409);
    expect((await stack.call('DELETE', `/core/training-jobs/${jobA}/deploy`)).status).toBe(409);
  });

  it('rejects what cannot be deployed with a clear error', async () => {
    const requested = await stack.call('POST', '/core/training-jobs', {
      body: { model_name: 'pending', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'people' }] },
    });
    const notDone = await stack.call('POST', `/core/training-jobs/${requested.body.id}/deploy`);
    expect(notDone.status).toBe(409);
    expect(notDone.body.detail).toMatch(/requested; only a complete job can be deployed/);
    const badCkpt = await stack.call('POST', `/core/training-jobs/${jobA}/deploy`, {
      body: { checkpoint_id: '00000000-0000-4000-8000-000000000000' },
    });
    expect(badCkpt.status).toBe(422);
    expect(badCkpt.body.errors[0].loc).toEqual(['body', 'checkpoint_id']);
    expect((await stack.call('POST', '/core/training-jobs/00000000-0000-4000-8000-000000000000/deploy')).status).toBe(
      404,
    );
    const extra = await stack.call('POST', `/core/training-jobs/${jobA}/deploy`, { body: { replicas: 3 } });
    expect(extra.status).toBe(422);
    expect(extra.body.errors[0].loc).toEqual(['body', 'replicas']);
  });

  it('deploys a named checkpoint of the job (the final one here) and re-pins on a new deploy', async () => {
    const ckpts = (await stack.call('GET', `/core/training-jobs/${jobB}/checkpoints`)).body.checkpoints;
    const final = ckpts.find((c: any) => c.is_final);
    const res = await stack.call('POST', `/core/training-jobs/${jobB}/deploy`, { body: { checkpoint_id: final.id } });
    expect(res.status).toBe(200);
    expect(res.body.deployment.checkpoint_id).toBe(final.id);
    expect((await infer(jobB)).status).toBe(200);
    expect((await stack.call('DELETE', `/core/training-jobs/${jobB}/deploy`)).status).toBe(200);
  });
});

describe('projects', () => {
  it('a project name follows promotions and rollbacks, on native and compat routes, echoing the name', async () => {
    const project = (await stack.call('POST', '/projects', { body: { name: 'support-ner' } })).body;
    const none = await infer('support-ner');
    expect(none.status).toBe(409);
    expect(none.body.detail).toMatch(/no active inference deployment/);

    const p1 = await stack.call('POST', '/projects/support-ner/deployments', { body: { training_job_id: jobA } });
    expect(p1.status).toBe(201);
    expect(p1.body.project.active_training_job_id).toBe(jobA);
    expect(p1.body.deployment).toMatchObject({
      action: 'promote',
      training_job_id: jobA,
      previous_training_job_id: null,
    });
    // promotion deployed the job, so its id routes too
    expect((await infer(jobA)).status).toBe(200);

    const byName = await infer('support-ner');
    expect(byName.status).toBe(200);
    expect(byName.body.model_id).toBe('support-ner');
    const rec = (await stack.call('GET', `/inferences/${byName.body.inference_id}`)).body;
    expect(rec).toMatchObject({ project_id: project.id, training_job_id: jobA });
    for (const filter of [project.id, 'support-ner']) {
      const listed = await stack.call('GET', `/inferences?project_id=${filter}`);
      expect(listed.body.data.map((i: any) => i.inference_id)).toEqual([byName.body.inference_id]);
    }

    const openai = new OpenAI({ apiKey: OPERATOR_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
    const chat = await openai.chat.completions.create({
      model: project.id,
      messages: [{ role: 'user', content: text }],
      schema,
    } as any);
    expect(chat.model).toBe(project.id);
    expect(JSON.parse(chat.choices[0]!.message.content!).entities.some((e: any) => e.label === 'person')).toBe(true);

    const p2 = await stack.call('POST', `/projects/${project.id}/deployments`, { body: { training_job_id: jobB } });
    expect(p2.status).toBe(201);
    expect(p2.body.deployment.previous_training_job_id).toBe(jobA);
    const after = await infer('support-ner');
    expect((await stack.call('GET', `/inferences/${after.body.inference_id}`)).body.training_job_id).toBe(jobB);

    // jobB serves the project: it can be neither undeployed nor deleted
    const undeploy = await stack.call('DELETE', `/core/training-jobs/${jobB}/deploy`);
    expect(undeploy.status).toBe(409);
    expect(undeploy.body.detail).toMatch(/serving project 'support-ner'/);
    expect((await stack.call('DELETE', `/core/training-jobs/${jobB}`)).status).toBe(409);

    const rolled = await stack.call('POST', '/projects/support-ner/rollback');
    expect(rolled.status).toBe(201);
    expect(rolled.body.deployment).toMatchObject({
      action: 'rollback',
      training_job_id: jobA,
      previous_training_job_id: jobB,
    });
    const back = await infer('support-ner');
    expect((await stack.call('GET', `/inferences/${back.body.inference_id}`)).body.training_job_id).toBe(jobA);

    const history = await stack.call('GET', '/projects/support-ner/deployments');
    expect(history.status).toBe(200);
    expect(history.body.data.map((d: any) => [d.action, d.training_job_id])).toEqual([
      ['rollback', jobA],
      ['promote', jobB],
      ['promote', jobA],
    ]);

    // roll forward to a named history entry
    const promoteB = history.body.data[1].id;
    const fwd = await stack.call('POST', '/projects/support-ner/rollback', { body: { deployment_id: promoteB } });
    expect(fwd.status).toBe(201);
    expect(fwd.body.project.active_training_job_id).toBe(jobB);
    const unknown = await stack.call('POST', '/projects/support-ner/rollback', { body: { deployment_id: 'nope' } });
    expect(unknown.status).toBe(422);
    expect(unknown.body.errors[0].loc).toEqual(['body', 'deployment_id']);

    const cleared = await stack.call('DELETE', '/projects/support-ner/deployments');
    expect(cleared.status).toBe(200);
    expect(cleared.body.project.active_training_job_id).toBeNull();
    expect((await infer('support-ner')).status).toBe(409);
    expect((await stack.call('DELETE', '/projects/support-ner/deployments')).status).toBe(409);
    // now nothing serves from jobB through the project, so it can be undeployed
    expect((await stack.call('DELETE', `/core/training-jobs/${jobB}/deploy`)).status).toBe(200);

    expect((await stack.call('DELETE', '/projects/support-ner')).status).toBe(200);
    expect((await stack.call('GET', '/projects/support-ner/deployments')).status).toBe(404);
  });

  it('validates promotions', async () => {
    await stack.call('POST', '/projects', { body: { name: 'empty-one' } });
    const unknownJob = await stack.call('POST', '/projects/empty-one/deployments', {
      body: { training_job_id: 'not-a-job' },
    });
    expect(unknownJob.status).toBe(422);
    expect(unknownJob.body.errors[0].loc).toEqual(['body', 'training_job_id']);
    const missing = await stack.call('POST', '/projects/empty-one/deployments', { body: {} });
    expect(missing.status).toBe(422);
    expect(missing.body.errors[0].loc).toEqual(['body', 'training_job_id']);
    expect(
      (await stack.call('POST', '/projects/no-such-project/deployments', { body: { training_job_id: jobA } })).status,
    ).toBe(404);
    const nothing = await stack.call('POST', '/projects/empty-one/rollback');
    expect(nothing.status).toBe(409);
    expect(nothing.body.detail).toMatch(/no earlier deployment/);
  });

  it('keeps teams apart: another team can neither deploy nor call our jobs or projects', async () => {
    const other = await stack.newTeam('deploy-other');
    expect((await stack.call('POST', `/core/training-jobs/${jobA}/deploy`, { key: other.key })).status).toBe(404);
    const res = await stack.call('POST', '/inference', { key: other.key, body: { model_id: jobA, text, schema } });
    expect(res.status).toBe(404);
  });
});

/** /projects over HTTP against the local stack (src/http/routes/projects.ts; deployments: deployments.test.ts). */
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack.stop());

describe('projects', () => {
  it('creates, lists, reads by id and by name, rejects duplicates, deletes', async () => {
    const created = await stack.call('POST', '/projects', { body: { name: 'support-bot', description: 'tickets' } });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ name: 'support-bot', active_training_job_id: null });
    expect((await stack.call('POST', '/projects', { body: { name: 'support-bot' } })).status).toBe(409);
    expect((await stack.call('GET', `/projects/${created.body.id}`)).body.name).toBe('support-bot');
    expect((await stack.call('GET', '/projects/support-bot')).body.id).toBe(created.body.id);
    expect((await stack.call('GET', '/projects')).body.data.map((p: any) => p.name)).toContain('support-bot');
    expect((await stack.call('DELETE', '/projects/support-bot')).status).toBe(200);
    expect((await stack.call('GET', `/projects/${created.body.id}`)).status).toBe(404);
    // The name is free again.
    expect((await stack.call('POST', '/projects', { body: { name: 'support-bot' } })).status).toBe(201);
  });

  it('rejects unsafe names', async () => {
    for (const name of ['../etc', 'a/b', '..', '', 'x'.repeat(200)]) {
      const res = await stack.call('POST', '/projects', { body: { name } });
      expect(res.status).toBe(422);
      expect(res.body.errors[0].loc).toEqual(['body', 'name']);
    }
  });
});

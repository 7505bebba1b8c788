/** Inference history and feedback over HTTP against the local stack (src/http/routes/inferenceHistory.ts). */
import { newInferenceId, storeInference } from '../../src/core/inferences';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
let teamId: string;
beforeAll(async () => {
  stack = await TestStack.start();
  teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
});
afterAll(async () => stack.stop());

describe('inference history and feedback', () => {
  const text = 'Tim Cook 🍎 runs Apple';
  const base = {
    type: 'encoder' as const,
    endpoint: '/inference',
    output: {},
    usage: { input_tokens: 7 },
    latency_ms: 3,
  };
  let nerId: string;
  let clsId: string;
  beforeAll(async () => {
    nerId = newInferenceId();
    await storeInference(
      stack.svc,
      teamId,
      {
        ...base,
        inference_id: nerId,
        model_id: 'fastino/gliner2-base-v1',
        tasks: ['ner'],
        project_id: null,
        training_job_id: null,
        input: { text, schema: { entities: ['person', 'company'] } },
      },
      true,
    );
    clsId = newInferenceId();
    await storeInference(
      stack.svc,
      teamId,
      {
        ...base,
        inference_id: clsId,
        model_id: 'my-project',
        tasks: ['classification'],
        project_id: 'p-1',
        training_job_id: '11111111-2222-4333-8444-555555555555',
        input: {
          text: 'great',
          schema: { classifications: [{ task: 'sentiment', labels: ['positive', 'negative'] }] },
        },
      },
      true,
    );
    await storeInference(
      stack.svc,
      teamId,
      {
        ...base,
        inference_id: newInferenceId(),
        model_id: 'x',
        tasks: ['ner'],
        project_id: null,
        training_job_id: null,
        input: { text: 'secret' },
      },
      false,
    );
  });

  it('lists newest first with every filter and bounded pagination', async () => {
    const all = await stack.call('GET', '/inferences');
    expect(all.body.data.map((i: any) => i.inference_id)).toEqual([clsId, nerId]);
    expect(JSON.stringify(all.body)).not.toContain('secret');
    expect((await stack.call('GET', '/inferences?task=ner')).body.data.map((i: any) => i.inference_id)).toEqual([
      nerId,
    ]);
    expect(
      (await stack.call('GET', '/inferences?model_id=my-project')).body.data.map((i: any) => i.inference_id),
    ).toEqual([clsId]);
    expect((await stack.call('GET', '/inferences?project_id=p-1')).body.data).toHaveLength(1);
    expect(
      (await stack.call('GET', '/inferences?training_job_id=11111111-2222-4333-8444-555555555555')).body.data,
    ).toHaveLength(1);
    const page = await stack.call('GET', '/inferences?limit=1&offset=1');
    expect(page.body).toMatchObject({ limit: 1, offset: 1, has_more: false });
    expect(page.body.data.map((i: any) => i.inference_id)).toEqual([nerId]);
    expect((await stack.call('GET', '/inferences?limit=1')).body.has_more).toBe(true);
    expect((await stack.call('GET', '/inferences?limit=0')).body.errors[0].loc).toEqual(['query', 'limit']);
    expect((await stack.call('GET', '/inferences?limit=201')).status).toBe(422);
    expect((await stack.call('GET', '/inferences?offset=-1')).status).toBe(422);
  });

  it('reads one inference; unknown ids are 404', async () => {
    expect((await stack.call('GET', `/inferences/${nerId}`)).body).toMatchObject({
      inference_id: nerId,
      tasks: ['ner'],
      feedback: null,
    });
    expect((await stack.call('GET', '/inferences/inf_01ARZ3NDEKTSV4RRFFQ69G5FAV')).status).toBe(404);
    const other = await stack.newTeam('history-other');
    expect((await stack.call('GET', `/inferences/${nerId}`, { key: other.key })).status).toBe(404);
  });

  it('validates feedback against the inference task, with code-point offsets', async () => {
    const path = `/inferences/${nerId}/feedback`;
    expect((await stack.call('POST', path, { body: { verdict: 'maybe' } })).body.errors[0].loc).toEqual([
      'body',
      'verdict',
    ]);
    expect((await stack.call('POST', path, { body: { verdict: 'incorrect' } })).body.errors[0].loc).toEqual([
      'body',
      'corrected_output',
    ]);
    expect(
      (await stack.call('POST', path, { body: { verdict: 'correct', corrected_output: { entities: [] } } })).status,
    ).toBe(422);
    const wrongHead = await stack.call('POST', path, {
      body: { verdict: 'incorrect', corrected_output: { classifications: { x: 'y' } } },
    });
    expect(wrongHead.body.errors[0].loc).toEqual(['body', 'corrected_output', 'classifications']);
    // "Apple" starts at code point 16 (the emoji is one code point, two UTF-16 units).
    const badOffsets = await stack.call('POST', path, {
      body: {
        verdict: 'incorrect',
        corrected_output: { entities: [{ text: 'Apple', label: 'company', start: 17, end: 22 }] },
      },
    });
    expect(badOffsets.status).toBe(422);
    expect(badOffsets.body.errors[0].loc).toEqual(['body', 'corrected_output', 'entities', 0]);
    const good = await stack.call('POST', path, {
      body: {
        verdict: 'incorrect',
        corrected_output: {
          entities: [
            { text: 'Tim Cook', label: 'person', start: 0, end: 8 },
            { text: 'Apple', label: 'company', start: 16, end: 21 },
          ],
        },
      },
    });
    expect(good.status).toBe(200);
    expect(good.body.feedback).toMatchObject({ verdict: 'incorrect' });
    expect((await stack.call('GET', `/inferences/${nerId}`)).body.feedback.corrected_output.entities).toHaveLength(2);

    const clsPath = `/inferences/${clsId}/feedback`;
    expect(
      (
        await stack.call('POST', clsPath, {
          body: { verdict: 'incorrect', corrected_output: { classifications: { sentiment: 'neutral' } } },
        })
      ).status,
    ).toBe(422);
    expect(
      (
        await stack.call('POST', clsPath, {
          body: { verdict: 'incorrect', corrected_output: { classifications: { sentiment: 'negative' } } },
        })
      ).status,
    ).toBe(200);
    expect((await stack.call('POST', clsPath, { body: { verdict: 'correct' } })).status).toBe(200);
    expect(
      (
        await stack.call('POST', '/inferences/inf_01ARZ3NDEKTSV4RRFFQ69G5FAV/feedback', {
          body: { verdict: 'correct' },
        })
      ).status,
    ).toBe(404);
  });
});

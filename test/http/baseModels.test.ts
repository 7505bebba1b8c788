/** GET /base-models over HTTP against the local stack (src/http/routes/baseModels.ts). */
import { baseModelManifestKey } from '../../src/core/modelLayout';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack.stop());

describe('GET /base-models', () => {
  it('lists the catalog (decisions.md#encoder-catalog), filters, and reports availability from the model store', async () => {
    const all = await stack.call('GET', '/base-models');
    expect(all.status).toBe(200);
    const ids = all.body.data.map((m: any) => m.id);
    expect(ids).toEqual(
      expect.arrayContaining([
        'fastino/gliner2-base-v1',
        'fastino/gliner2-large-v1',
        'fastino/gliner2-multi-v1',
        'fastino/gliner2-multi-large-v1',
      ]),
    );
    expect(all.body.data.every((m: any) => m.available === false)).toBe(true);

    await stack.svc.blobs.put(baseModelManifestKey('sift/gliner2-mini-v1'), '{}', 'application/json');
    const encoders = await stack.call('GET', '/base-models?task_type=encoder&supports_training=true');
    expect(encoders.body.data.every((m: any) => m.task_type === 'encoder')).toBe(true);
    expect(encoders.body.data.find((m: any) => m.id === 'sift/gliner2-mini-v1').available).toBe(true);
    const decoders = await stack.call('GET', '/base-models?task_type=decoder');
    expect(decoders.body.data.map((m: any) => m.id)).toEqual(['HuggingFaceTB/SmolLM2-135M-Instruct']);

    expect((await stack.call('GET', '/base-models?supports_training=yes')).body.errors[0].loc).toEqual([
      'query',
      'supports_training',
    ]);
    expect((await stack.call('GET', '/base-models?task_type=audio')).status).toBe(422);
    expect((await stack.call('GET', '/base-models?colour=red')).status).toBe(422);
  });
});

import { allRoutes } from '../../src/http/routes';
import { TestStack } from '../helpers/localStack';

let stack: TestStack;
beforeAll(async () => {
  stack = await TestStack.start();
});
afterAll(async () => stack.stop());

describe('GET /openapi.json', () => {
  it('is a public OpenAPI 3.1 document covering every route with its errors', async () => {
    const res = await stack.call('GET', '/openapi.json', { key: null });
    expect(res.status).toBe(200);
    const doc = res.body;
    expect(doc.openapi).toBe('3.1.0');
    for (const spec of allRoutes()) {
      const path = spec.path.replace(/:(\w+)/g, '{$1}').replace(/\*$/, '{model_id}');
      const op = doc.paths[path]?.[spec.method.toLowerCase()];
      expect(op).toBeDefined();
      expect(op.responses['500']).toBeDefined();
      expect(op.responses['429']).toBeDefined();
      if (spec.auth !== 'public') expect(op.responses['401']).toBeDefined();
      if (spec.body) {
        expect(op.requestBody.content['application/json'].schema.type).toBe('object');
        expect(op.responses['422'].content['application/json'].schema.$ref).toBe('#/components/schemas/ValidationError');
      }
    }
    const upload = doc.paths['/core/datasets/upload/url'].post.requestBody.content['application/json'].schema;
    expect(upload.required).toEqual(expect.arrayContaining(['dataset_name', 'file_name']));
    expect(upload.additionalProperties).toBe(false);
    const params = doc.paths['/inferences'].get.parameters.map((p: any) => p.name);
    expect(params).toEqual(expect.arrayContaining(['limit', 'offset', 'model_id', 'task', 'project_id', 'training_job_id']));
  });

  it('documents response shapes that match what the service returns', async () => {
    const routes = allRoutes();
    const schemaOf = (method: string, path: string, status: number) => routes.find((r) => r.method === method && r.path === path)?.responses[status]?.schema;
    const checks: [string, string, number, unknown][] = [
      ['GET', '/base-models', 200, (await stack.call('GET', '/base-models')).body],
      ['GET', '/api-keys', 200, (await stack.call('GET', '/api-keys')).body],
      ['POST', '/projects', 201, (await stack.call('POST', '/projects', { body: { name: 'doc' } })).body],
      ['GET', '/core/training-jobs', 200, (await stack.call('GET', '/core/training-jobs')).body],
    ];
    for (const [method, path, status, body] of checks) {
      const schema = schemaOf(method, path, status);
      expect(schema).toBeDefined();
      expect(schema!.safeParse(body).success).toBe(true);
    }
  });
});

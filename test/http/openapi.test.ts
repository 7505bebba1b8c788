import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { allRoutes } from '../../src/http/routes';
import { REPO_ROOT } from '../../src/paths';
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
        const type = spec.bodyType === 'multipart' ? 'multipart/form-data' : 'application/json';
        const body = op.requestBody.content[type].schema;
        // an object, or (POST /inference) the objects its branches accept
        for (const branch of body.anyOf ?? [body]) expect(branch.type).toBe('object');
        // the compatible routes answer invalid requests as their vendor does: 400 with its envelope
        const vendor = path.startsWith('/v1/messages')
          ? 'AnthropicError'
          : path.startsWith('/v1/')
            ? 'OpenAiError'
            : undefined;
        const invalid = vendor ? op.responses['400'] : op.responses['422'];
        expect(invalid.content['application/json'].schema.$ref).toBe(
          `#/components/schemas/${vendor ?? 'ValidationError'}`,
        );
        if (vendor) expect(op.responses['422']).toBeUndefined();
      }
    }
    // a file upload is documented as the form it is, its file as binary
    const form = doc.paths['/v1/files'].post.requestBody.content['multipart/form-data'].schema;
    expect(form.properties.file).toMatchObject({ type: 'string', format: 'binary' });
    expect(form.required).toEqual(expect.arrayContaining(['purpose', 'file']));
    const upload = doc.paths['/core/datasets/upload/url'].post.requestBody.content['application/json'].schema;
    expect(upload.required).toEqual(expect.arrayContaining(['dataset_name', 'file_name']));
    expect(upload.additionalProperties).toBe(false);
    const params = doc.paths['/inferences'].get.parameters.map((p: any) => p.name);
    expect(params).toEqual(
      expect.arrayContaining(['limit', 'offset', 'model_id', 'task', 'project_id', 'training_job_id']),
    );
  });

  it('documents response shapes that match what the service returns', async () => {
    const routes = allRoutes();
    const schemaOf = (method: string, path: string, status: number) =>
      routes.find((r) => r.method === method && r.path === path)?.responses[status]?.schema;
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

  it('passes openapi-spec-validator: valid OpenAPI 3.1, every $ref resolves', async () => {
    const res = await stack.call('GET', '/openapi.json', { key: null });
    const file = join(stack.dataDir, 'openapi.json');
    writeFileSync(file, res.text);
    // the pinned tool venv (created once, then a stamp check)
    const python = execFileSync('bash', [join(REPO_ROOT, 'scripts', 'setup-api-check.sh')], {
      encoding: 'utf8',
    }).trim();
    const run = spawnSync(python, ['-m', 'openapi_spec_validator', file], { encoding: 'utf8' });
    expect(run.stdout + run.stderr).toContain(': OK');
    expect(run.status).toBe(0);
    const refs = [...res.text.matchAll(/"\$ref":"([^"]+)"/g)].map((m) => m[1] as string);
    expect(refs.length).toBeGreaterThan(0);
    for (const ref of refs) expect(ref).toMatch(/^#\/components\/schemas\/\w+$/);
  }, 180_000);
});

describe('the server refuses what the document forbids, with the field named', () => {
  it('documents and enforces path, query and body constraints', async () => {
    const doc = (await stack.call('GET', '/openapi.json', { key: null })).body;
    const versionParam = doc.paths['/core/datasets/{name}/{version}'].get.parameters.find(
      (p: any) => p.name === 'version',
    );
    expect(versionParam.schema.pattern).toBe('^[1-9]\\d{0,5}$');
    expect((await stack.call('GET', '/core/datasets/abc/0')).body.errors[0].loc).toEqual(['path', 'version']);
    const limit = doc.paths['/inferences'].get.parameters.find((p: any) => p.name === 'limit');
    expect(limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 200 });
    expect((await stack.call('GET', '/inferences?limit=0')).body.errors[0].loc).toEqual(['query', 'limit']);

    const upload = await stack.call('POST', '/core/datasets/upload/url', {
      body: { dataset_name: 'a..b', file_name: 'rows.txt' },
    });
    expect(upload.status).toBe(422);
    expect(upload.body.errors.map((e: any) => e.loc.join('.'))).toEqual(['body.dataset_name', 'body.file_name']);
    expect(upload.body.errors[1].msg).toBe('must end in .jsonl, .ndjson, .json or .csv');
    expect(
      (
        await stack.call('POST', '/core/datasets/upload/url', {
          body: { dataset_name: 'a.b', file_name: 'Rows.JSONL' },
        })
      ).status,
    ).toBe(200);

    // a union (string or list) reports the branch whose type matched
    const blank = await stack.call('POST', '/gliner-2/entities', {
      body: { model_id: 'sift/gliner2-mini-v1', text: '  ', entities: ['person'] },
    });
    expect(blank.status).toBe(422);
    expect(blank.body.errors).toEqual([
      { loc: ['body', 'text'], msg: 'text must not be empty', type: 'invalid_format' },
    ]);
    const blankItem = await stack.call('POST', '/gliner-2/entities', {
      body: { model_id: 'sift/gliner2-mini-v1', text: ['ok', ''], entities: ['person'] },
    });
    expect(blankItem.body.errors[0].loc).toEqual(['body', 'text', 1]);

    const team = await stack.call('POST', '/teams', { body: { name: 't', credit_balance_usd: -1e37 } });
    expect(team.status).toBe(422);
    expect(team.body.errors[0].loc).toEqual(['body', 'credit_balance_usd']);
  });

  it('answers 405 with an Allow header that matches the document where a parametric route overlaps a fixed path', async () => {
    const doc = (await stack.call('GET', '/openapi.json', { key: null })).body;
    for (const path of ['/core/datasets/upload/url', '/core/datasets/upload/process']) {
      const documented = Object.keys(doc.paths[path]).map((m) => m.toUpperCase());
      for (const method of ['GET', 'OPTIONS']) {
        const res = await stack.call(method, path);
        expect(res.status).toBe(405);
        expect(res.headers.get('allow')).toBe(documented.join(', '));
      }
    }
    // the parametric route itself still answers, and names a bad parameter
    expect((await stack.call('GET', '/core/datasets/upload/x1')).status).toBe(422);
    expect((await stack.call('GET', '/core/datasets/upload/1')).status).toBe(404);
  });
});

/**
 * The synthesized templates against the AWS rules of lib/aws-rules.ts (each cited there):
 * SageMaker volume keys, API Gateway authorizer identity sources, gateway response templates, and
 * the keep-alive order behind the ALB (template + the decoder's entrypoint + the gateway's server).
 */
import { spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, mkdtempSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  acceptsVolumeKmsKey,
  authorizerRuns,
  GATEWAY_RESPONSE_DEFAULT_STATUS,
  gatewayResponseStatus,
  KEEP_ALIVE,
  renderGatewayResponse,
} from '../../lib/aws-rules';
import { GATEWAY_STATUS_OVERRIDES } from '../../lib/constructs/gateway-responses';
import { gatewayMethods } from '../../lib/gateway-routes';
import { TRAINING_INSTANCE_TYPES } from '../../lib/config';
import { CONTAINERS_DIR } from '../../lib/paths';
import { createKeepAliveServer } from '../../src/http/keepAlive';
import { buildApp, resourcesOfType, type Built } from './helpers';

const dev = buildApp();

describe('SageMaker: a volume KMS key only on instance types with an EBS volume', () => {
  it('knows the instance-storage (NVMe) families from the EBS ones', () => {
    for (const t of [
      'ml.g5.xlarge',
      'ml.g6.2xlarge',
      'ml.g6e.xlarge',
      'ml.p4d.24xlarge',
      'ml.p5.48xlarge',
      'ml.g4dn.xlarge',
      'ml.m5d.large',
    ]) {
      expect([t, acceptsVolumeKmsKey(t)]).toEqual([t, false]);
    }
    for (const t of ['ml.m5.xlarge', 'ml.c5.2xlarge', 'ml.p3.2xlarge'])
      expect([t, acceptsVolumeKmsKey(t)]).toEqual([t, true]);
    expect(() => acceptsVolumeKmsKey('g5.xlarge')).toThrow(/ml\.<family>\.<size>/);
  });

  const trainResourceConfig = (built: Built): Record<string, unknown> => {
    const sm = Object.values(
      resourcesOfType(built.template(built.stacks.workflows), 'AWS::StepFunctions::StateMachine'),
    ).find((m) => m.Properties?.StateMachineName === `sift-${built.config.stage}-training`)!;
    const def = JSON.parse(sm.Properties?.DefinitionString as string) as {
      States: { Train: { Parameters: { ResourceConfig: Record<string, unknown> } } };
    };
    return def.States.Train.Parameters.ResourceConfig;
  };

  it(`the default training type (${dev.config.trainingInstanceType}) gets no volume key; the job's output stays KMS-encrypted`, () => {
    expect(acceptsVolumeKmsKey(dev.config.trainingInstanceType)).toBe(false);
    expect(trainResourceConfig(dev)).not.toHaveProperty('VolumeKmsKeyId');
    expect(trainResourceConfig(dev)).toMatchObject({ InstanceCount: 1, VolumeSizeInGB: 100 });
  });

  it('an EBS-backed training type (ml.m5.xlarge) gets the data key on its volume', () => {
    const m5 = buildApp({ trainingInstanceType: 'ml.m5.xlarge' });
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a CloudFormation Fn::Sub placeholder
    expect(trainResourceConfig(m5)).toMatchObject({ VolumeKmsKeyId: '${DataKeyArn}' });
    // and the task function trains on that same type
    const fn = Object.values(resourcesOfType(m5.template(m5.stacks.workflows), 'AWS::Lambda::Function')).find((f) =>
      JSON.stringify(f.Properties?.Environment ?? {}).includes('SIFT_TRAINING_INSTANCE_TYPE'),
    )!;
    expect(
      (fn.Properties!.Environment as { Variables: Record<string, string> }).Variables.SIFT_TRAINING_INSTANCE_TYPE,
    ).toBe('ml.m5.xlarge');
  });

  it('refuses a training type outside the offered list', () => {
    expect(() => buildApp({ trainingInstanceType: 'ml.g5.nope' })).toThrow(/trainingInstanceType must be one of/);
    // every offered type is a well-formed SageMaker name the rule can judge
    for (const t of TRAINING_INSTANCE_TYPES) expect(() => acceptsVolumeKmsKey(t)).not.toThrow();
  });
});

describe('API Gateway: who reaches the authorizer', () => {
  const t = dev.template(dev.stacks.api);
  const resources = resourcesOfType(t, 'AWS::ApiGateway::Resource');
  const authorizers = resourcesOfType(t, 'AWS::ApiGateway::Authorizer');
  const pathOf = (ref: unknown): string => {
    const r = resources[(ref as { Ref?: string }).Ref ?? ''];
    return r ? `${pathOf(r.Properties?.ParentId)}/${String(r.Properties?.PathPart)}` : '';
  };
  const methods = Object.values(resourcesOfType(t, 'AWS::ApiGateway::Method')).map((m) => ({
    path: pathOf(m.Properties?.ResourceId),
    method: String(m.Properties?.HttpMethod),
    authorizer: authorizers[(m.Properties?.AuthorizerId as { Ref?: string } | undefined)?.Ref ?? '']?.Properties,
  }));
  const asRule = (a: Record<string, unknown>) => ({
    type: a.Type as 'TOKEN' | 'REQUEST',
    identitySources: a.IdentitySource
      ? String(a.IdentitySource)
          .split(',')
          .map((s) => s.trim())
      : [],
    ttlSeconds: Number(a.AuthorizerResultTtlInSeconds ?? 300),
  });
  const v1 = methods.filter(
    (m) =>
      m.path.startsWith('/v1/') &&
      m.method !== 'OPTIONS' &&
      !gatewayMethods().some((p) => p.access === 'public' && p.path === m.path && p.method === m.method),
  );

  it('every guarded /v1/ method runs its authorizer with X-API-Key alone and with Authorization alone (docs/reference/decisions.md#authentication rule 3)', () => {
    expect(v1.map((m) => m.path)).toEqual(
      expect.arrayContaining(['/v1/chat/completions', '/v1/messages', '/v1/{proxy+}']),
    );
    for (const m of v1) {
      const rule = asRule(m.authorizer!);
      expect({
        route: `${m.method} ${m.path}`,
        xApiKey: authorizerRuns(rule, ['X-API-Key']),
        bearer: authorizerRuns(rule, ['Authorization']),
      }).toEqual({
        route: `${m.method} ${m.path}`,
        xApiKey: true,
        bearer: true,
      });
    }
  });

  it('the native routes keep the cached X-API-Key authorizer (a request without the header is a 401 before any Lambda)', () => {
    const native = methods.find((m) => m.path === '/core/training-jobs' && m.method === 'POST')!;
    expect(asRule(native.authorizer!)).toEqual({
      type: 'TOKEN',
      identitySources: ['method.request.header.X-API-Key'],
      ttlSeconds: 60,
    });
    expect(authorizerRuns(asRule(native.authorizer!), ['Authorization'])).toBe(false);
  });

  it('the rule itself: listed sources must all be present; none listed is allowed only uncached', () => {
    expect(
      authorizerRuns({ type: 'REQUEST', identitySources: ['method.request.header.Authorization'], ttlSeconds: 0 }, [
        'X-API-Key',
      ]),
    ).toBe(false);
    expect(authorizerRuns({ type: 'REQUEST', identitySources: [], ttlSeconds: 0 }, [])).toBe(true);
    expect(authorizerRuns({ type: 'REQUEST', identitySources: [], ttlSeconds: 60 }, ['X-API-Key'])).toBe(false);
  });
});

describe('API Gateway: gateway responses are JSON whatever the error text', () => {
  const responses = Object.values(resourcesOfType(dev.template(dev.stacks.api), 'AWS::ApiGateway::GatewayResponse'));
  const hostile = 'instance type (string) does not match "object"\n\tand it\'s \\ broken }';

  it.each(responses.map((r) => [String(r.Properties?.ResponseType), r.Properties] as const))(
    '%s renders to a JSON object with a string detail',
    (_type, props) => {
      const template = (props!.ResponseTemplates as Record<string, string>)['application/json']!;
      const body = JSON.parse(
        renderGatewayResponse(template, hostile, '4f9c1e1a-2b3c-4d5e-8f90-123456789abc'),
      ) as Record<string, unknown>;
      expect(typeof body.detail).toBe('string');
      expect(body.request_id).toBe('4f9c1e1a-2b3c-4d5e-8f90-123456789abc');
    },
  );

  it('a 422 carries an errors array naming the body (docs/reference/decisions.md#errors)', () => {
    const bad = responses.find((r) => r.Properties?.ResponseType === 'BAD_REQUEST_BODY')!;
    const body = JSON.parse(
      renderGatewayResponse(
        (bad.Properties!.ResponseTemplates as Record<string, string>)['application/json']!,
        hostile,
        'r',
      ),
    );
    expect(bad.Properties?.StatusCode).toBe('422');
    expect(body.errors).toEqual([expect.objectContaining({ loc: ['body'], msg: expect.any(String) })]);
  });
});

describe('API Gateway: each gateway response keeps its own status', () => {
  const responses = Object.values(resourcesOfType(dev.template(dev.stacks.api), 'AWS::ApiGateway::GatewayResponse'));
  const configured: Record<string, string | undefined> = Object.fromEntries(
    responses.map((r) => [String(r.Properties?.ResponseType), r.Properties?.StatusCode as string | undefined]),
  );

  it("sets no status on DEFAULT_4XX or DEFAULT_5XX (it would replace every other 4xx/5xx type's)", () => {
    expect(Object.keys(configured)).toEqual(expect.arrayContaining(['DEFAULT_4XX', 'DEFAULT_5XX']));
    expect({ DEFAULT_4XX: configured.DEFAULT_4XX, DEFAULT_5XX: configured.DEFAULT_5XX }).toEqual({
      DEFAULT_4XX: undefined,
      DEFAULT_5XX: undefined,
    });
  });

  it.each(
    Object.entries(GATEWAY_RESPONSE_DEFAULT_STATUS)
      .filter(([, status]) => status !== null)
      .map(([type]) => [type] as const),
  )("%s is sent with AWS's default status, or the override chosen for it", (type) => {
    const expected = GATEWAY_STATUS_OVERRIDES[type]?.status ?? GATEWAY_RESPONSE_DEFAULT_STATUS[type];
    expect(gatewayResponseStatus(type, configured)).toBe(expected);
  });

  it("the stand-in follows the documented fallback: a class default status replaces an unset type's", () => {
    expect(gatewayResponseStatus('INVALID_API_KEY', {})).toBe(403);
    expect(gatewayResponseStatus('INVALID_API_KEY', { DEFAULT_4XX: '400' })).toBe(400);
    expect(gatewayResponseStatus('INTEGRATION_TIMEOUT', { DEFAULT_5XX: '500' })).toBe(500);
    expect(gatewayResponseStatus('INTEGRATION_TIMEOUT', { DEFAULT_4XX: '400' })).toBe(504);
    expect(gatewayResponseStatus('THROTTLED', { THROTTLED: '429', DEFAULT_4XX: '400' })).toBe(429);
    expect(() => gatewayResponseStatus('NOT_A_TYPE', {})).toThrow(/not a gateway response type/);
  });
});

describe('keep-alive: every target outlives the ALB idle timeout', () => {
  const t = dev.template(dev.stacks.inference);
  const lb = Object.values(resourcesOfType(t, 'AWS::ElasticLoadBalancingV2::LoadBalancer'))[0]!;
  const albIdle = Number(
    (lb.Properties!.LoadBalancerAttributes as Array<{ Key: string; Value: string }>).find(
      (a) => a.Key === 'idle_timeout.timeout_seconds',
    )!.Value,
  );
  const containers = Object.values(resourcesOfType(t, 'AWS::ECS::TaskDefinition')).map(
    (d) => (d.Properties!.ContainerDefinitions as Array<Record<string, any>>)[0]!,
  );
  const vllmEnv = Object.fromEntries(
    (containers.find((c) => c.Name === 'vllm')!.Environment as Array<{ Name: string; Value: string }>).map((e) => [
      e.Name,
      e.Value,
    ]),
  );

  /** Runs containers/decoder/entrypoint.sh with a stand-in python3 that prints what vLLM would read. */
  const entrypoint = (env: Record<string, string>) => {
    const bin = mkdtempSync(join(tmpdir(), 'sift-vllm-'));
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion in the stub script
    writeFileSync(join(bin, 'python3'), '#!/bin/sh\necho "keepalive=${VLLM_HTTP_TIMEOUT_KEEP_ALIVE:-unset}"\n');
    // `aws s3 sync <src> <dir>` of the base weights (run for real in test/deploy/decoderStart.test.ts)
    writeFileSync(
      join(bin, 'aws'),
      '#!/bin/sh\ncd "$4" && touch manifest.json config.json tokenizer.json model.safetensors\n',
    );
    for (const f of ['python3', 'aws']) chmodSync(join(bin, f), 0o755);
    const base = {
      PATH: `${bin}:/usr/bin:/bin`,
      SIFT_BUCKET: 'b',
      SIFT_DECODER_MODEL_DIR: bin,
      SIFT_DECODER_MODEL: 'm',
      SIFT_MAX_LORAS: '8',
      SIFT_MAX_MODEL_LEN: '8192',
    };
    return spawnSync('sh', [join(CONTAINERS_DIR, 'decoder', 'entrypoint.sh')], {
      env: { ...base, ...env },
      encoding: 'utf8',
    });
  };

  it('the ALB idle timeout covers a 15-minute stream', () => {
    expect(albIdle).toBe(KEEP_ALIVE.albIdleTimeoutSeconds);
    expect(albIdle).toBeGreaterThanOrEqual(900);
  });

  it('vLLM, started by the real entrypoint with the task definition environment, keeps connections longer', () => {
    const r = entrypoint(vllmEnv);
    expect(r.status).toBe(0);
    const keepAlive = Number(/keepalive=(\S+)/.exec(r.stdout)![1]);
    expect(keepAlive).toBeGreaterThan(albIdle);
  });

  it('the entrypoint refuses to start without the number (uvicorn would default to 5 s)', () => {
    const r = entrypoint({});
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('SIFT_KEEP_ALIVE_SECONDS');
  });

  it("the gateway image's real entry program answers with a keep-alive longer than the ALB idle timeout", async () => {
    const { spawn } = await import('node:child_process');
    const { createServer: freePort } = await import('node:net');
    const port = await new Promise<number>((ok) => {
      const probe = freePort().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as AddressInfo).port;
        probe.close(() => ok(p));
      });
    });
    const env = {
      ...process.env,
      PORT: String(port),
      SIFT_TABLE: 't',
      SIFT_BUCKET: 'b',
      SIFT_QUEUE_URL: 'http://127.0.0.1:9/q',
      AWS_ACCESS_KEY_ID: 'x',
      AWS_SECRET_ACCESS_KEY: 'x',
    };
    const gateway = spawn(process.execPath, ['--import', 'tsx', 'bin/gateway.ts'], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    try {
      await new Promise<void>((ok, fail) => {
        gateway.stdout.on('data', (d: Buffer) => d.toString().includes('listening') && ok());
        gateway.once('exit', (code) => fail(new Error(`gateway exited with ${code}`)));
      });
      const res = await fetch(`http://127.0.0.1:${port}/health`);
      expect(res.status).toBe(200);
      const timeout = Number(/timeout=(\d+)/.exec(res.headers.get('keep-alive') ?? '')?.[1]);
      expect(timeout).toBeGreaterThan(albIdle);
    } finally {
      // waited for: a gateway still exiting when the file ends keeps Jest's worker from exiting
      const exited =
        gateway.exitCode !== null || gateway.signalCode !== null ? Promise.resolve() : once(gateway, 'exit');
      gateway.kill('SIGKILL');
      await exited;
    }
    expect(gateway.signalCode ?? gateway.exitCode).not.toBeNull();
  }, 60_000);

  it("the gateway's node:http server keeps connections longer, with headersTimeout above its keep-alive", async () => {
    const server = createKeepAliveServer((_req, res) => res.end('ok'));
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(await res.text()).toBe('ok');
      expect(server.keepAliveTimeout).toBeGreaterThan(albIdle * 1000);
      expect(server.headersTimeout).toBeGreaterThan(server.keepAliveTimeout);
      expect(server.requestTimeout).toBeGreaterThanOrEqual(server.headersTimeout);
    } finally {
      await new Promise<void>((ok) => server.close(() => ok()));
    }
  });
});

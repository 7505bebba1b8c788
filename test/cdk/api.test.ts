/**
 * API stack: authorizers on every non-public route, per-method throttles from
 * docs/reference/decisions.md#limits, the streaming VPC-link integrations, WAF, logging, and the
 * least-privilege roles of the Lambda functions.
 */
import { App, Stack } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { throttleFor } from '../../lib/api-stack';
import { API_GATEWAY_ACCOUNT_THROTTLE, throttled } from '../../lib/aws-rules';
import { loadStageConfig, PLANS, SPEC_DEFAULT_PER_MINUTE } from '../../lib/config';
import { addGatewayResponses } from '../../lib/constructs/gateway-responses';
import { CORS_EXPOSE_HEADERS } from '../../src/http/cors';
import { gatewayMethods } from '../../lib/gateway-routes';
import { asArray, buildApp, policyStatements, resourcesOfType } from './helpers';

const built = buildApp();
const t = built.template(built.stacks.api);

type Res = { Type: string; Properties?: Record<string, unknown> };
const resources = resourcesOfType(t, 'AWS::ApiGateway::Resource');
const methods = resourcesOfType(t, 'AWS::ApiGateway::Method');
const authorizers = resourcesOfType(t, 'AWS::ApiGateway::Authorizer');

/** Full path of an API Gateway resource (from its ParentId chain). */
function pathOf(resourceRef: unknown): string {
  const ref = resourceRef as { Ref?: string; 'Fn::GetAtt'?: [string, string] };
  if (ref['Fn::GetAtt']) return ''; // RootResourceId
  const r = resources[ref.Ref ?? ''] as Res | undefined;
  if (!r) return '';
  return `${pathOf(r.Properties?.ParentId)}/${String(r.Properties?.PathPart)}`;
}
const routes = Object.entries(methods).map(([id, m]) => ({
  id,
  path: pathOf(m.Properties?.ResourceId) || '/',
  method: String(m.Properties?.HttpMethod),
  props: m.Properties ?? {},
}));
// Which routes are public, data-plane or limited comes from the route table; that the table matches
// the app's registered routes, route by route, is test/cdk/routeTable.test.ts.
const derived = gatewayMethods();
const PUBLIC_ROUTES = derived.filter((m) => m.access === 'public');
const COMPAT_ROUTES = derived.filter((m) => m.access === 'key-or-bearer').map((m) => m.path);
const INFERENCE_ROUTES = derived.filter((m) => m.plane === 'data').map((m) => m.path);
const SPEC_METHOD_LIMITS_PER_MINUTE = derived.flatMap((m) =>
  m.perMinute === undefined ? [] : [{ path: m.path, method: m.method, perMinute: m.perMinute }],
);
const authorizerIdOf = (name: string): string =>
  Object.entries(authorizers).find(([, a]) => a.Properties?.Name === name)![0];

describe('routes and authorization', () => {
  it('has a REGIONAL REST API', () => {
    t.hasResourceProperties('AWS::ApiGateway::RestApi', { EndpointConfiguration: { Types: ['REGIONAL'] } });
  });

  it('passes a multipart upload (POST /v1/files) to the Lambda as binary, not re-encoded text', () => {
    t.hasResourceProperties('AWS::ApiGateway::RestApi', { BinaryMediaTypes: ['multipart/form-data'] });
  });

  it('leaves only the public routes (decisions.md#public-routes) (and CORS preflights) without an authorizer', () => {
    const open = routes.filter((r) => r.props.AuthorizationType !== 'CUSTOM');
    for (const r of open) {
      const isPublic = PUBLIC_ROUTES.some((p) => p.path === r.path && p.method === r.method);
      expect({ route: `${r.method} ${r.path}`, ok: isPublic || r.method === 'OPTIONS' }).toEqual({
        route: `${r.method} ${r.path}`,
        ok: true,
      });
    }
    for (const p of PUBLIC_ROUTES) {
      expect(
        routes.some((r) => r.path === p.path && r.method === p.method && r.props.AuthorizationType === 'NONE'),
      ).toBe(true);
    }
  });

  it('puts an authorizer on every other method', () => {
    const guarded = routes.filter(
      (r) => r.method !== 'OPTIONS' && !PUBLIC_ROUTES.some((p) => p.path === r.path && p.method === r.method),
    );
    expect(guarded.length).toBeGreaterThan(15);
    for (const r of guarded) {
      expect({
        route: `${r.method} ${r.path}`,
        type: r.props.AuthorizationType,
        hasAuthorizer: r.props.AuthorizerId !== undefined,
        key: r.props.ApiKeyRequired,
      }).toEqual({
        route: `${r.method} ${r.path}`,
        type: 'CUSTOM',
        hasAuthorizer: true,
        key: true, // counted against the team's usage plan
      });
    }
  });

  it('uses a cached TOKEN authorizer on X-API-Key and a REQUEST authorizer on the compatible routes', () => {
    t.hasResourceProperties('AWS::ApiGateway::Authorizer', {
      Name: 'api-key',
      Type: 'TOKEN',
      IdentitySource: 'method.request.header.X-API-Key',
      AuthorizerResultTtlInSeconds: 60,
    });
    t.hasResourceProperties('AWS::ApiGateway::Authorizer', {
      Name: 'api-key-or-bearer',
      Type: 'REQUEST',
      AuthorizerResultTtlInSeconds: 0,
    });
    const compat = authorizerIdOf('api-key-or-bearer');
    for (const path of COMPAT_ROUTES) {
      const r = routes.find((x) => x.path === path && x.method === 'POST')!;
      expect(r.props.AuthorizerId).toEqual({ Ref: compat });
    }
    const key = authorizerIdOf('api-key');
    expect(routes.find((x) => x.path === '/inference' && x.method === 'POST')!.props.AuthorizerId).toEqual({
      Ref: key,
    });
    expect(routes.find((x) => x.path === '/{proxy+}' && x.method === 'ANY')!.props.AuthorizerId).toEqual({ Ref: key });
  });

  it('routes the data plane through the VPC link with response streaming and a 15-minute timeout', () => {
    for (const path of INFERENCE_ROUTES) {
      const r = routes.find((x) => x.path === path && x.method === 'POST')!;
      expect(r.props.Integration).toMatchObject({
        Type: 'HTTP_PROXY',
        ConnectionType: 'VPC_LINK',
        ConnectionId: expect.anything(),
        IntegrationTarget: expect.anything(),
        ResponseTransferMode: 'STREAM',
        TimeoutInMillis: 900000,
        RequestParameters: expect.objectContaining({
          'integration.request.header.x-sift-principal': 'context.authorizer.principalId',
        }),
      });
    }
  });

  it('sends everything else to the control-plane Lambda (buffered proxy)', () => {
    const r = routes.find((x) => x.path === '/{proxy+}' && x.method === 'ANY')!;
    expect(r.props.Integration).toMatchObject({ Type: 'AWS_PROXY' });
  });

  it('answers authorizer failures and throttling with the error shape of decisions.md#errors', () => {
    // statuses: test/cdk/aws-rules.test.ts checks each against AWS's defaults
    t.hasResourceProperties('AWS::ApiGateway::GatewayResponse', {
      ResponseType: 'UNAUTHORIZED',
      ResponseTemplates: { 'application/json': Match.stringLikeRegexp('"detail"') },
    });
    t.hasResourceProperties('AWS::ApiGateway::GatewayResponse', { ResponseType: 'ACCESS_DENIED', StatusCode: '401' });
    t.hasResourceProperties('AWS::ApiGateway::GatewayResponse', {
      ResponseType: 'THROTTLED',
      ResponseParameters: Match.objectLike({ 'gatewayresponse.header.Retry-After': Match.anyValue() }),
    });
  });
});

describe('CORS on the responses API Gateway makes itself', () => {
  /** The gateway responses' headers for a console origin list (static values: API Gateway substitutes nothing there). */
  const headersFor = (origins: string[]) => {
    const stack = new Stack(new App(), 'Cors');
    const api = new apigw.RestApi(stack, 'Api');
    api.root.addMethod('GET');
    addGatewayResponses(api, origins);
    return Object.values(resourcesOfType(Template.fromStack(stack), 'AWS::ApiGateway::GatewayResponse')).map(
      (r) => [r.Properties?.ResponseType, r.Properties?.ResponseParameters as Record<string, string>] as const,
    );
  };

  it("one console origin: every gateway response (the authorizer's 401, throttles, 5xx) names it and exposes Retry-After", () => {
    for (const [type, headers] of headersFor(['https://console.example.com']))
      expect({ type, headers }).toEqual({
        type,
        headers: expect.objectContaining({
          'gatewayresponse.header.Access-Control-Allow-Origin': "'https://console.example.com'",
          'gatewayresponse.header.Access-Control-Expose-Headers': `'${CORS_EXPOSE_HEADERS.join(', ')}'`,
        }),
      });
  });

  it('several origins: none is named (a static header cannot choose), never a wildcard', () => {
    for (const [, headers] of headersFor(['https://a.example.com', 'https://b.example.com']))
      expect(Object.keys(headers).filter((h) => /Access-Control/i.test(h))).toEqual([]);
  });

  it('the stage config refuses an origin a browser never sends (a wildcard, a path, a trailing slash)', () => {
    const config = (origins: string) =>
      loadStageConfig(new App({ context: { stage: 'dev', consoleOrigins: origins } }).node).consoleOrigins;
    expect(config('https://console.example.com, http://localhost:5173')).toEqual([
      'https://console.example.com',
      'http://localhost:5173',
    ]);
    for (const bad of ['*', 'https://console.example.com/', 'https://console.example.com/app', 'console.example.com'])
      expect(() => config(bad)).toThrow(/not an exact origin/);
  });
});

describe('usage plans', () => {
  const plans = Object.values(resourcesOfType(t, 'AWS::ApiGateway::UsagePlan'));

  it('take the key to count from the authorizer, so a client can never choose one', () => {
    t.hasResourceProperties('AWS::ApiGateway::RestApi', { ApiKeySourceType: 'AUTHORIZER' });
  });

  it('has one usage plan per plan tier on the stage, throttled as configured', () => {
    expect(plans.map((p) => p.Properties?.UsagePlanName).sort()).toEqual(PLANS.map((p) => `sift-dev-${p}`).sort());
    for (const plan of PLANS) {
      const p = plans.find((x) => x.Properties?.UsagePlanName === `sift-dev-${plan}`)!;
      expect(p.Properties).toMatchObject({
        Throttle: {
          RateLimit: built.config.usagePlans[plan].rateLimit,
          BurstLimit: built.config.usagePlans[plan].burstLimit,
        },
        ApiStages: [{ ApiId: expect.anything(), Stage: expect.anything() }],
      });
      expect(p.Properties?.Quota).toBeUndefined(); // credits and spend caps are the service's (docs/reference/decisions.md#limits)
    }
    expect(built.config.usagePlans.free.rateLimit).toBeLessThan(built.config.usagePlans.pro.rateLimit);
  });

  it('lets the authorizer make keys only inside those plans, in a policy the function does not wait on', () => {
    const policy = Object.entries(resourcesOfType(t, 'AWS::IAM::Policy')).find(([id]) =>
      id.startsWith('AuthorizerUsagePlanKeys'),
    )!;
    const text = JSON.stringify(policy[1].Properties);
    expect(text).toContain('/usageplans/');
    expect(text).not.toMatch(/"apigateway:\*"/);
    // deleting keys: only this stage's team keys, never any key in the region
    const statements = (policy[1].Properties!.PolicyDocument as { Statement: Array<Record<string, unknown>> })
      .Statement;
    const deletes = statements.filter((st) => JSON.stringify(st.Action).includes('apigateway:DELETE'));
    expect(deletes.length).toBeGreaterThan(0);
    for (const st of deletes)
      expect(st.Condition).toEqual({ StringEquals: { 'aws:ResourceTag/sift:stage': built.config.stage } });
    const fn = Object.values(resourcesOfType(t, 'AWS::Lambda::Function')).find((f) =>
      String(f.Properties?.Description).includes('authorizer'),
    )!;
    expect(JSON.stringify((fn as { DependsOn?: unknown }).DependsOn ?? [])).not.toContain(policy[0]);
  });
});

describe('stage', () => {
  const stage = Object.values(resourcesOfType(t, 'AWS::ApiGateway::Stage'))[0]!.Properties!;
  const settings = stage.MethodSettings as Array<Record<string, unknown>>;
  const scale = built.config.throttleScale;

  it('throttles each method with its own limit (decisions.md#limits)', () => {
    for (const limit of SPEC_METHOD_LIMITS_PER_MINUTE) {
      const resourcePath = `/${limit.path.replace(/\//g, '~1')}`;
      const s = settings.find((x) => x.ResourcePath === resourcePath && x.HttpMethod === limit.method);
      const expected = throttleFor(limit.perMinute, scale);
      expect({ path: limit.path, rate: s?.ThrottlingRateLimit, burst: s?.ThrottlingBurstLimit }).toEqual({
        path: limit.path,
        rate: expected.rateLimit,
        burst: expected.burstLimit,
      });
    }
  });

  it('never refuses one user at the per-minute limit (the stage throttle is a token bucket, lib/aws-rules.ts)', () => {
    const limits = [...SPEC_METHOD_LIMITS_PER_MINUTE.map((l) => l.perMinute), SPEC_DEFAULT_PER_MINUTE];
    for (const perMinute of limits) {
      const bucket = throttleFor(perMinute, scale);
      const minute = (start: number, spread: number) =>
        Array.from({ length: perMinute }, (_, i) => start + (spread * i) / perMinute);
      // evenly over two minutes
      expect({ perMinute, refused: throttled(bucket, [...minute(0, 60), ...minute(60, 60)]) }).toEqual({
        perMinute,
        refused: 0,
      });
      // a whole minute's allowance at once, twice, as far as the account's burst allows any method
      if (perMinute <= API_GATEWAY_ACCOUNT_THROTTLE.burstLimit)
        expect({ perMinute, refused: throttled(bucket, [...minute(0, 0), ...minute(60, 0)]) }).toEqual({
          perMinute,
          refused: 0,
        });
    }
    // the bucket refuses what API Gateway refuses: past the burst at once
    expect(throttled({ rateLimit: 1, burstLimit: 10 }, Array(11).fill(0))).toBe(1);
  });

  it('applies the default limit (decisions.md#limits) to every other method', () => {
    const d = settings.find((x) => x.ResourcePath === '/*' && x.HttpMethod === '*');
    expect(d).toMatchObject({
      ThrottlingRateLimit: throttleFor(SPEC_DEFAULT_PER_MINUTE, scale).rateLimit,
      LoggingLevel: 'INFO',
      MetricsEnabled: true,
    });
  });

  it('converts per-minute limits to per-second rates', () => {
    // rate rounded up; burst: the whole minute, up to the account's burst of 5,000
    expect(throttleFor(5000, 1)).toEqual({ rateLimit: 83.34, burstLimit: 5000 });
    expect(throttleFor(20, 1)).toEqual({ rateLimit: 0.34, burstLimit: 20 });
    expect(throttleFor(15_000, 1)).toEqual({ rateLimit: 250, burstLimit: 5000 });
  });

  it('writes JSON access logs and traces requests', () => {
    expect(stage.TracingEnabled).toBe(true);
    expect(stage.AccessLogSetting).toMatchObject({
      DestinationArn: expect.anything(),
      Format: expect.stringContaining('$context.requestId'),
    });
  });
});

describe('WAF', () => {
  it('blocks more than 100,000 requests per IP per 60 seconds with a 429', () => {
    t.hasResourceProperties('AWS::WAFv2::WebACL', {
      Scope: 'REGIONAL',
      Rules: Match.arrayWith([
        Match.objectLike({
          Statement: { RateBasedStatement: { Limit: 100000, EvaluationWindowSec: 60, AggregateKeyType: 'IP' } },
          Action: { Block: { CustomResponse: Match.objectLike({ ResponseCode: 429 }) } },
        }),
      ]),
    });
    t.resourceCountIs('AWS::WAFv2::WebACLAssociation', 1);
  });

  it('redacts credentials from WAF logs', () => {
    t.hasResourceProperties('AWS::WAFv2::LoggingConfiguration', {
      RedactedFields: [{ SingleHeader: { Name: 'x-api-key' } }, { SingleHeader: { Name: 'authorization' } }],
    });
  });
});

describe('Lambda functions', () => {
  const fns = resourcesOfType(t, 'AWS::Lambda::Function');

  it('run nodejs22.x on arm64 with tracing and JSON logs', () => {
    expect(Object.keys(fns)).toHaveLength(3);
    for (const f of Object.values(fns)) {
      expect(f.Properties).toMatchObject({
        Runtime: 'nodejs22.x',
        Architectures: ['arm64'],
        TracingConfig: { Mode: 'Active' },
        LoggingConfig: expect.objectContaining({ LogFormat: 'JSON' }),
        Environment: {
          Variables: expect.objectContaining({ POWERTOOLS_METRICS_NAMESPACE: 'Sift', SIFT_STAGE: 'dev' }),
        },
      });
    }
  });

  it('consumes the work queue with partial batch failures', () => {
    t.hasResourceProperties('AWS::Lambda::EventSourceMapping', { FunctionResponseTypes: ['ReportBatchItemFailures'] });
  });

  it('grants no wildcard actions on a wildcard resource, and no service-wide actions', () => {
    for (const s of policyStatements(t)) {
      const actions = asArray(s.Action as string | string[]);
      for (const a of actions) expect(a).not.toMatch(/^(\*|[a-z0-9-]+:\*)$/);
      if (asArray(s.Resource as unknown).includes('*')) {
        expect({ actions, ok: actions.every((a) => /^(xray|ec2|logs|ecr|cloudwatch):/.test(a)) }).toEqual({
          actions,
          ok: true,
        });
      }
    }
  });

  it('lets the authorizer only read and stamp key items and record usage plan keys', () => {
    const role = Object.entries(resourcesOfType(t, 'AWS::IAM::Role')).find(([id]) =>
      id.startsWith('AuthorizerRole'),
    )![0];
    const policy = Object.values(resourcesOfType(t, 'AWS::IAM::Policy')).find((p) =>
      JSON.stringify(p.Properties?.Roles).includes(role),
    )!;
    const statements = (policy.Properties!.PolicyDocument as { Statement: Array<{ Action: string | string[] }> })
      .Statement;
    const dynamo = statements.flatMap((s) => asArray(s.Action)).filter((a) => a.startsWith('dynamodb:'));
    expect(dynamo.sort()).toEqual(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']);
    expect(JSON.stringify(statements)).not.toContain('s3:');
    expect(JSON.stringify(statements)).not.toContain('sqs:');
  });
});

/**
 * The API Gateway methods of the REST API: public routes without an authorizer, the inference data
 * plane through the VPC link (response streaming, 15-minute timeout), the control-plane routes with
 * their own limits, and `{proxy+}` fallbacks (control-plane Lambda) so no sub-path escapes the router.
 */
import { Duration } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { acknowledge } from '../nag';
import type { ApiAuthorizers } from './api-authorizers';
import { ResourceGroup } from './resource-group';

/** Where the inference data plane is reached (from the inference stack). */
export interface InferenceEndpoint {
  readonly vpcLinkId: string;
  readonly loadBalancerArn: string;
  readonly loadBalancerDnsName: string;
}

/** Routes that need no credentials (SPEC "Authentication"). */
export const PUBLIC_ROUTES: ReadonlyArray<{ path: string; method: string }> = [
  { path: '/health', method: 'GET' },
  { path: '/openapi.json', method: 'GET' },
  { path: '/v1/models', method: 'GET' },
];

/** OpenAI/Anthropic-compatible routes: accept `X-API-Key` or `Authorization: Bearer`. */
export const COMPAT_ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/responses', '/v1/messages'] as const;

/** Data-plane routes served by the ECS gateway (everything else is the control-plane Lambda). */
export const INFERENCE_ROUTES: ReadonlyArray<string> = [
  '/inference',
  ...COMPAT_ROUTES,
  '/gliner-2/{proxy+}',
  '/generate/ner/label-existing',
  '/generate/classification/label-existing',
];

export interface ApiRoutesProps {
  readonly api: apigw.RestApi;
  /** The control-plane Lambda (everything not routed elsewhere). */
  readonly control: lambda.IFunction;
  readonly authorizers: ApiAuthorizers;
  /** The data plane; without it (no inference stack) its routes go to the control plane too. */
  readonly inference?: InferenceEndpoint;
}

export class ApiRoutes extends ResourceGroup {
  constructor(scope: Construct, id: string, props: ApiRoutesProps) {
    super(scope, id);
    const { api, authorizers } = props;
    const validator = api.addRequestValidator('ParamValidator', {
      requestValidatorName: 'validate-parameters',
      validateRequestParameters: true,
      validateRequestBody: true,
    });
    // Bodies of POST routes must be JSON objects; field-level validation (SPEC 422
    // with `errors`) is done by the handlers, which share one schema module.
    const jsonObject = api.addModel('JsonObject', {
      contentType: 'application/json',
      modelName: 'JsonObject',
      schema: { schema: apigw.JsonSchemaVersion.DRAFT4, title: 'JsonObject', type: apigw.JsonSchemaType.OBJECT },
    });
    const controlIntegration = new apigw.LambdaIntegration(props.control, { proxy: true, scopePermissionToMethod: false });

    const routes = new RouteBuilder(api, controlIntegration, authorizers, validator, jsonObject);
    for (const r of PUBLIC_ROUTES) routes.add(r.path, r.method, { public: true });

    for (const path of INFERENCE_ROUTES) {
      const compat = (COMPAT_ROUTES as readonly string[]).includes(path);
      const method = routes.add(path, 'POST', {
        integration: props.inference ? dataPlaneIntegration(props.inference, path) : controlIntegration,
        authorizer: compat ? authorizers.compat : authorizers.native,
        ...(path.endsWith('{proxy+}') ? { requestParameters: { 'method.request.path.proxy': true } } : {}),
      });
      if (props.inference) {
        (method.node.defaultChild as apigw.CfnMethod).addPropertyOverride('Integration.IntegrationTarget', props.inference.loadBalancerArn);
      }
    }
    // Control-plane routes with their own SPEC limits need their own method.
    routes.add('/generate', 'POST', {});
    routes.add('/generate/{proxy+}', 'POST', {});
    routes.add('/generate/{proxy+}', 'ANY', {});
    routes.add('/core/training-jobs', 'POST', {});
    routes.add('/core/training-jobs', 'GET', {});
    routes.add('/core/training-jobs/{proxy+}', 'ANY', {});
    routes.add('/{proxy+}', 'ANY', {});
    routes.addFallbacks();
  }
}

/** HTTP proxy through the VPC link V2 to the ALB, streaming, with the caller's principal and request id. */
function dataPlaneIntegration(inference: InferenceEndpoint, path: string): apigw.Integration {
  const isProxy = path.endsWith('{proxy+}');
  const target = isProxy ? path.replace('{proxy+}', '{proxy}') : path;
  return new apigw.Integration({
    type: apigw.IntegrationType.HTTP_PROXY,
    integrationHttpMethod: 'POST',
    uri: `http://${inference.loadBalancerDnsName}${target}`,
    options: {
      connectionType: apigw.ConnectionType.VPC_LINK,
      // VPC link V2 (to an ALB); the L1 takes its id in ConnectionId.
      vpcLink: { vpcLinkId: inference.vpcLinkId } as unknown as apigw.IVpcLink,
      timeout: Duration.minutes(15),
      responseTransferMode: apigw.ResponseTransferMode.STREAM,
      requestParameters: {
        'integration.request.header.x-sift-principal': 'context.authorizer.principalId',
        'integration.request.header.x-request-id': 'context.requestId',
        ...(isProxy ? { 'integration.request.path.proxy': 'method.request.path.proxy' } : {}),
      },
    },
  });
}

interface RouteOptions {
  readonly public?: boolean;
  readonly integration?: apigw.Integration;
  readonly authorizer?: apigw.IAuthorizer;
  readonly requestParameters?: Record<string, boolean>;
}

/** Adds methods by path and, afterwards, `{proxy+}` fallbacks so no sub-path escapes the router. */
class RouteBuilder {
  constructor(
    private readonly api: apigw.RestApi,
    private readonly control: apigw.Integration,
    /** native: X-API-Key only (SPEC "Authentication" 1); compat: every /v1/ path, X-API-Key or Bearer (3). */
    private readonly authorizers: { native: apigw.IAuthorizer; compat: apigw.IAuthorizer },
    private readonly validator: apigw.IRequestValidator,
    private readonly jsonObject: apigw.IModel,
  ) {}

  add(path: string, httpMethod: string, opts: RouteOptions): apigw.Method {
    const resource = this.api.root.resourceForPath(path);
    const isProxy = path.endsWith('{proxy+}');
    const method = resource.addMethod(httpMethod, opts.integration ?? this.control, {
      requestValidator: this.validator,
      ...(httpMethod === 'POST' ? { requestModels: { 'application/json': this.jsonObject } } : {}),
      requestParameters: opts.requestParameters ?? (isProxy ? { 'method.request.path.proxy': true } : {}),
      ...(opts.public
        ? { authorizationType: apigw.AuthorizationType.NONE }
        : {
            authorizationType: apigw.AuthorizationType.CUSTOM,
            authorizer: opts.authorizer ?? (path.startsWith('/v1/') ? this.authorizers.compat : this.authorizers.native),
            apiKeyRequired: true,
          }),
    });
    if (opts.public) {
      const reason = 'Public by SPEC: GET /v1/models, GET /openapi.json and GET /health answer without credentials.';
      acknowledge(method, { id: 'AwsSolutions-APIG4', reason }, { id: 'AwsSolutions-COG4', reason });
    }
    return method;
  }

  /** Every resource with children but no `{proxy+}` child gets one (ANY → control plane). */
  addFallbacks(): void {
    const visit = (res: apigw.IResource): void => {
      const children = res.node.children.filter((c) => c instanceof apigw.Resource) as apigw.Resource[];
      const isProxy = (c: apigw.Resource): boolean => c.path.endsWith('/{proxy+}');
      if (children.length > 0 && res !== this.api.root && !children.some(isProxy)) {
        this.add(`${res.path}/{proxy+}`, 'ANY', {});
      }
      for (const c of children) if (!isProxy(c)) visit(c);
    };
    visit(this.api.root);
  }
}

/**
 * The API Gateway methods of the REST API, from the route table (lib/gateway-routes.ts): public
 * routes without an authorizer, the inference data plane through the VPC link (response streaming,
 * 15-minute timeout), control-plane routes with their own limits, and `{proxy+}` fallbacks
 * (control-plane Lambda) so no sub-path escapes the router.
 */
import { Duration, Names } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { gatewayMethods, hasRoutesBelow, type GatewayMethod } from '../gateway-routes';
import { acknowledge } from '../nag';
import type { ApiAuthorizers } from './api-authorizers';
import { logicalIdSkippingGroups, ResourceGroup, uniqueIdSkippingGroups } from './resource-group';

/** Where the inference data plane is reached (from the inference stack). */
export interface InferenceEndpoint {
  readonly vpcLinkId: string;
  readonly loadBalancerArn: string;
  readonly loadBalancerDnsName: string;
}

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
    // Bodies of POST routes must be JSON objects; field-level validation (422, decisions.md#errors,
    // with `errors`) is done by the handlers, which share one schema module.
    const jsonObject = api.addModel('JsonObject', {
      contentType: 'application/json',
      modelName: 'JsonObject',
      schema: { schema: apigw.JsonSchemaVersion.DRAFT4, title: 'JsonObject', type: apigw.JsonSchemaType.OBJECT },
    });
    const controlIntegration = new apigw.LambdaIntegration(props.control, {
      proxy: true,
      scopePermissionToMethod: false,
    });

    const routes = new RouteBuilder(api, controlIntegration, authorizers, validator, jsonObject);
    for (const m of gatewayMethods()) {
      const toDataPlane = m.plane === 'data' && props.inference !== undefined;
      const method = routes.add(m, toDataPlane ? dataPlaneIntegration(props.inference!, m) : controlIntegration);
      if (toDataPlane) {
        (method.node.defaultChild as apigw.CfnMethod).addPropertyOverride(
          'Integration.IntegrationTarget',
          props.inference!.loadBalancerArn,
        );
      }
    }
    routes.add({ path: '/{proxy+}', method: 'ANY', access: 'key', plane: 'control' }, controlIntegration);
    routes.addFallbacks();
    // The integration's invoke permission is named after the function's and the API's paths: keep
    // the name it had before the functions moved into a group (lib/constructs/resource-group.ts).
    const permission = api.node.findChild(
      `ApiPermission.ApiScoped.${Names.uniqueId(props.control)}.${Names.uniqueId(api)}`,
    ) as lambda.CfnPermission;
    permission.overrideLogicalId(
      logicalIdSkippingGroups(
        api,
        `ApiPermission.ApiScoped.${uniqueIdSkippingGroups(props.control)}.${uniqueIdSkippingGroups(api)}`,
      ),
    );
  }
}

/** HTTP proxy through the VPC link V2 to the ALB, streaming, with the caller's principal and request id. */
function dataPlaneIntegration(inference: InferenceEndpoint, { path, method }: GatewayMethod): apigw.Integration {
  const isProxy = path.endsWith('{proxy+}');
  const target = isProxy ? path.replace('{proxy+}', '{proxy}') : path;
  return new apigw.Integration({
    type: apigw.IntegrationType.HTTP_PROXY,
    integrationHttpMethod: method,
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

/** Adds methods by path and, afterwards, `{proxy+}` fallbacks so no sub-path escapes the router. */
class RouteBuilder {
  constructor(
    private readonly api: apigw.RestApi,
    private readonly control: apigw.Integration,
    private readonly authorizers: ApiAuthorizers,
    private readonly validator: apigw.IRequestValidator,
    private readonly jsonObject: apigw.IModel,
  ) {}

  add(m: GatewayMethod, integration: apigw.Integration): apigw.Method {
    const resource = this.api.root.resourceForPath(m.path);
    const method = resource.addMethod(m.method, integration, {
      requestValidator: this.validator,
      ...(m.method === 'POST' ? { requestModels: { 'application/json': this.jsonObject } } : {}),
      requestParameters: m.path.endsWith('{proxy+}') ? { 'method.request.path.proxy': true } : {},
      ...(m.access === 'public'
        ? { authorizationType: apigw.AuthorizationType.NONE }
        : {
            authorizationType: apigw.AuthorizationType.CUSTOM,
            // native: X-API-Key only (docs/reference/decisions.md#authentication rule 1); compat: X-API-Key or Bearer (3)
            authorizer: m.access === 'key-or-bearer' ? this.authorizers.compat : this.authorizers.native,
            apiKeyRequired: true,
          }),
    });
    if (m.access === 'public') {
      const reason = `Public by decision (docs/reference/decisions.md#public-routes): ${m.method} ${m.path} answers without credentials (auth 'public' in src/http/routeTable.ts).`;
      acknowledge(method, { id: 'AwsSolutions-APIG4', reason }, { id: 'AwsSolutions-COG4', reason });
    }
    return method;
  }

  /**
   * Every resource with children, or with app routes below it, but no `{proxy+}` child gets one
   * (ANY → control plane): API Gateway never falls back to a parent's `{proxy+}`.
   */
  addFallbacks(): void {
    const visit = (res: apigw.IResource): void => {
      const children = res.node.children.filter((c) => c instanceof apigw.Resource) as apigw.Resource[];
      const isProxy = (c: apigw.Resource): boolean => c.path.endsWith('/{proxy+}');
      if (res !== this.api.root && (children.length > 0 || hasRoutesBelow(res.path)) && !children.some(isProxy)) {
        const path = `${res.path}/{proxy+}`;
        this.add(
          { path, method: 'ANY', access: path.startsWith('/v1/') ? 'key-or-bearer' : 'key', plane: 'control' },
          this.control,
        );
      }
      for (const c of children) if (!isProxy(c)) visit(c);
    };
    visit(this.api.root);
  }
}

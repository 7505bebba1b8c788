/**
 * The two API-key authorizers, one function behind both (lambdas/authorizer.ts):
 * - `native`: cached TOKEN authorizer on X-API-Key (docs/reference/decisions.md#authentication rule 1), every native and /core route;
 * - `compat`: REQUEST authorizer for the compatible /v1/ routes, which accept X-API-Key *or*
 *   `Authorization: Bearer` (3).
 */
import { Duration, Names } from 'aws-cdk-lib';
import * as apigw from 'aws-cdk-lib/aws-apigateway';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { logicalIdSkippingGroups, ResourceGroup, uniqueIdSkippingGroups } from './resource-group';

export class ApiAuthorizers extends ResourceGroup {
  readonly native: apigw.TokenAuthorizer;
  readonly compat: apigw.RequestAuthorizer;

  constructor(scope: Construct, id: string, handler: lambda.IFunction) {
    super(scope, id);
    this.native = new apigw.TokenAuthorizer(this, 'KeyAuthorizer', {
      handler,
      identitySource: apigw.IdentitySource.header('X-API-Key'),
      resultsCacheTtl: Duration.seconds(60),
      authorizerName: 'api-key',
    });
    // A listed identity source that is missing gets a 401 from API Gateway before the function
    // runs, so this REQUEST authorizer lists none and runs uncached, for every request
    // (lib/aws-rules.ts, authorizerRuns); the function keeps its own short in-memory cache.
    this.compat = new apigw.RequestAuthorizer(this, 'CompatAuthorizer', {
      handler,
      identitySources: [],
      resultsCacheTtl: Duration.seconds(0),
      authorizerName: 'api-key-or-bearer',
    });
    // CDK writes the empty list as ""; leave the property out, as the API does for "none".
    (this.compat.node.defaultChild as apigw.CfnAuthorizer).addPropertyDeletionOverride('IdentitySource');
    // Each authorizer adds an invoke permission to the function, named after the authorizer's path:
    // keep the name it had before this group existed, so the permission is not replaced.
    for (const authorizer of [this.native, this.compat]) {
      const permission = handler.node.findChild(`${Names.uniqueId(authorizer)}:Permissions`) as lambda.CfnPermission;
      permission.overrideLogicalId(
        logicalIdSkippingGroups(handler, `${uniqueIdSkippingGroups(authorizer)}:Permissions`),
      );
    }
  }
}

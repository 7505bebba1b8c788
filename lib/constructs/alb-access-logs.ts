/**
 * ALB access logging in a region-agnostic stack.
 *
 * `ApplicationLoadBalancer.logAccessLogs()` needs a concrete region to pick the
 * Elastic Load Balancing account. Here the bucket policy allows both forms and
 * CloudFormation picks at deploy time:
 * - Regions launched before August 2022: the regional ELB account (mapping from
 *   aws-cdk-lib's region facts), statement present only where the mapping has one;
 * - newer Regions: the `logdelivery.elasticloadbalancing.amazonaws.com` service principal.
 */
import { Aws, CfnCondition, CfnMapping, Fn } from 'aws-cdk-lib';
import type * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as s3 from 'aws-cdk-lib/aws-s3';
import { Fact, FactName, RegionInfo } from 'aws-cdk-lib/region-info';
import { Construct } from 'constructs';

const NONE = 'none';

export interface AlbAccessLogsProps {
  readonly loadBalancer: elbv2.ApplicationLoadBalancer;
  readonly bucket: s3.Bucket;
  readonly prefix: string;
}

export class AlbAccessLogs extends Construct {
  constructor(scope: Construct, id: string, props: AlbAccessLogsProps) {
    super(scope, id);
    const mapping: Record<string, Record<string, string>> = {};
    for (const region of RegionInfo.regions) {
      mapping[region.name] = { account: Fact.find(region.name, FactName.ELBV2_ACCOUNT) ?? NONE };
    }
    const map = new CfnMapping(this, 'ElbAccounts', { mapping, lazy: false });
    const account = map.findInMap(Aws.REGION, 'account');
    const legacy = new CfnCondition(this, 'LegacyElbRegion', {
      expression: Fn.conditionNot(Fn.conditionEquals(account, NONE)),
    });
    const objects = `${props.bucket.bucketArn}/${props.prefix}/AWSLogs/${Aws.ACCOUNT_ID}/*`;

    // Statements go into the bucket's one policy (S3 keeps one per bucket), which auto-delete also
    // writes to. Where the region has no ELB account, the account's own root stands in: it grants
    // nothing IAM does not already allow within the account.
    props.bucket.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'ElbLogDeliveryService',
        principals: [new iam.ServicePrincipal('logdelivery.elasticloadbalancing.amazonaws.com')],
        actions: ['s3:PutObject'],
        resources: [objects],
      }),
    );
    const regionalAccount = Fn.conditionIf(legacy.logicalId, account, Aws.ACCOUNT_ID).toString();
    props.bucket.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'ElbLogDeliveryRegionalAccount',
        principals: [new iam.AccountPrincipal(regionalAccount)],
        actions: ['s3:PutObject'],
        resources: [objects],
      }),
    );
    const policy = props.bucket.policy;
    if (!policy) throw new Error('the ALB log bucket has no policy to extend');
    props.loadBalancer.setAttribute('access_logs.s3.enabled', 'true');
    props.loadBalancer.setAttribute('access_logs.s3.bucket', props.bucket.bucketName);
    props.loadBalancer.setAttribute('access_logs.s3.prefix', props.prefix);
    props.loadBalancer.node.addDependency(policy);
  }
}

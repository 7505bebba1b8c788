/**
 * WAF in front of the API stage: the per-IP edge limit (docs/reference/decisions.md#limits) as a rate-based rule answering 429 in
 * the error shape (decisions.md#errors), AWS managed rule groups (body-inspecting rules only count: bodies are user
 * text and datasets), and logs with credentials redacted.
 */
import { ArnFormat, RemovalPolicy, Stack } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as wafv2 from 'aws-cdk-lib/aws-wafv2';
import type { Construct } from 'constructs';
import { retentionDays } from './sift-function';
import { ResourceGroup } from './resource-group';

export interface ApiWafProps {
  readonly stage: string;
  /** The API stage the ACL is associated with. */
  readonly stageArn: string;
  readonly edgeLimit: { readonly limit: number; readonly windowSeconds: number };
  readonly logRetentionDays: number;
  readonly retainLogs: boolean;
}

export class ApiWaf extends ResourceGroup {
  readonly webAcl: wafv2.CfnWebACL;
  readonly webAclName: string;

  constructor(scope: Construct, id: string, props: ApiWafProps) {
    super(scope, id);
    const { stage, edgeLimit } = props;
    this.webAclName = `sift-${stage}-api`;
    this.webAcl = new wafv2.CfnWebACL(this, 'WebAcl', {
      name: this.webAclName,
      scope: 'REGIONAL',
      defaultAction: { allow: {} },
      visibilityConfig: {
        cloudWatchMetricsEnabled: true,
        metricName: `sift-${stage}-api`,
        sampledRequestsEnabled: true,
      },
      customResponseBodies: {
        'rate-limited': { contentType: 'APPLICATION_JSON', content: '{"detail":"Rate limit exceeded"}' },
      },
      rules: [
        {
          name: 'edge-rate-limit-per-ip',
          priority: 0,
          statement: {
            rateBasedStatement: {
              limit: edgeLimit.limit,
              evaluationWindowSec: edgeLimit.windowSeconds,
              aggregateKeyType: 'IP',
            },
          },
          action: {
            block: {
              customResponse: {
                responseCode: 429,
                customResponseBodyKey: 'rate-limited',
                responseHeaders: [{ name: 'Retry-After', value: String(edgeLimit.windowSeconds) }],
              },
            },
          },
          visibilityConfig: {
            cloudWatchMetricsEnabled: true,
            metricName: 'edge-rate-limit-per-ip',
            sampledRequestsEnabled: true,
          },
        },
        managedRule('AWSManagedRulesAmazonIpReputationList', 1),
        managedRule('AWSManagedRulesKnownBadInputsRuleSet', 2),
        // Request bodies are user text and datasets: body-inspecting rules only count.
        managedRule('AWSManagedRulesCommonRuleSet', 3, [
          'SizeRestrictions_BODY',
          'CrossSiteScripting_BODY',
          'GenericLFI_BODY',
          'GenericRFI_BODY',
          'EC2MetaDataSSRF_BODY',
          'NoUserAgent_HEADER',
        ]),
      ],
    });
    new wafv2.CfnWebACLAssociation(this, 'WebAclAssociation', {
      resourceArn: props.stageArn,
      webAclArn: this.webAcl.attrArn,
    });
    const wafLogName = `aws-waf-logs-sift-${stage}-api`;
    const wafLogs = new logs.LogGroup(this, 'WafLogs', {
      logGroupName: wafLogName,
      retention: retentionDays(props.logRetentionDays),
      removalPolicy: props.retainLogs ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY,
    });
    const wafLogging = new wafv2.CfnLoggingConfiguration(this, 'WafLogging', {
      resourceArn: this.webAcl.attrArn,
      logDestinationConfigs: [
        Stack.of(this).formatArn({
          service: 'logs',
          resource: 'log-group',
          resourceName: wafLogName,
          arnFormat: ArnFormat.COLON_RESOURCE_NAME,
        }),
      ],
      redactedFields: [{ singleHeader: { Name: 'x-api-key' } }, { singleHeader: { Name: 'authorization' } }],
    });
    wafLogging.node.addDependency(wafLogs);
  }
}

function managedRule(name: string, priority: number, countOnly: string[] = []): wafv2.CfnWebACL.RuleProperty {
  return {
    name,
    priority,
    overrideAction: { none: {} },
    statement: {
      managedRuleGroupStatement: {
        vendorName: 'AWS',
        name,
        ...(countOnly.length > 0
          ? { ruleActionOverrides: countOnly.map((n) => ({ name: n, actionToUse: { count: {} } })) }
          : {}),
      },
    },
    visibilityConfig: { cloudWatchMetricsEnabled: true, metricName: name, sampledRequestsEnabled: true },
  };
}

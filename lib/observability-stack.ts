/**
 * Observability and money: the finance dashboard (usage and estimated cost by
 * model and endpoint, from the EMF metrics in namespace `Sift`), the
 * operations dashboard, alarms (5xx, throttles, DLQ depth, job failures, GPU
 * capacity launch failures) to an encrypted SNS topic, and an AWS Budget.
 *
 * Usage metrics carry only the `model` and `endpoint` dimensions: never a
 * customer id (each distinct dimension set is a billed custom metric; per-team
 * usage lives in the records table and EMF metadata).
 */
import { Aws, CfnOutput, Duration, Stack, type StackProps } from 'aws-cdk-lib';
import * as budgets from 'aws-cdk-lib/aws-budgets';
import * as cw from 'aws-cdk-lib/aws-cloudwatch';
import * as cwActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as kms from 'aws-cdk-lib/aws-kms';
import * as sns from 'aws-cdk-lib/aws-sns';
import * as subs from 'aws-cdk-lib/aws-sns-subscriptions';
import type { Construct } from 'constructs';
import type { ApiStack } from './api-stack';
import type { StageConfig } from './config';
import { importDataRefs } from './data-refs';
import type { InferenceStack } from './inference-stack';
import type { WorkflowStack } from './workflow-stack';
import {
  METRICS_NAMESPACE,
  OPERATIONAL_DIMENSION,
  PROVIDER_FALLBACK_METRIC,
  USAGE_DIMENSIONS,
  USAGE_METRICS,
  type UsageDimension,
  type UsageMetric,
} from '../src/core/billing/metricNames';
// The emitter (src/core/billing/usageMetrics.ts) and these queries share one names module (above).

export interface ObservabilityStackProps extends StackProps {
  readonly config: StageConfig;
  readonly api: ApiStack;
  readonly inference: InferenceStack;
  readonly workflows: WorkflowStack;
}

/** Metrics Insights query: one usage metric summed and grouped by a usage dimension. */
export function usageQuery(metric: UsageMetric, groupBy: UsageDimension): string {
  return `SELECT SUM(${metric}) FROM SCHEMA("${METRICS_NAMESPACE}", ${USAGE_DIMENSIONS.join(', ')}) GROUP BY ${groupBy}`;
}

/** SEARCH over every (endpoint, model) series of a usage metric. */
function usageSearch(metric: UsageMetric, period: Duration): string {
  return `SEARCH('{${METRICS_NAMESPACE},${USAGE_DIMENSIONS.join(',')}} MetricName="${metric}"', 'Sum', ${period.toSeconds()})`;
}

export class ObservabilityStack extends Stack {
  readonly alarmTopic: sns.Topic;
  readonly financeDashboard: cw.Dashboard;
  readonly operationsDashboard: cw.Dashboard;
  readonly alarms: cw.Alarm[] = [];

  constructor(scope: Construct, id: string, props: ObservabilityStackProps) {
    super(scope, id, props);
    const { config, api, inference, workflows } = props;
    const data = importDataRefs(this, config.stage);

    // ---- Alarm topic (CMK that CloudWatch, EventBridge and Budgets may use) ------------
    const topicKey = new kms.Key(this, 'AlarmTopicKey', {
      description: `Sift ${config.stage} alarm topic`,
      enableKeyRotation: true,
    });
    for (const service of ['cloudwatch.amazonaws.com', 'events.amazonaws.com', 'budgets.amazonaws.com']) {
      topicKey.addToResourcePolicy(
        new iam.PolicyStatement({
          sid: `Publish${service.split('.')[0]}`,
          principals: [new iam.ServicePrincipal(service)],
          actions: ['kms:GenerateDataKey*', 'kms:Decrypt'],
          resources: ['*'],
          conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
        }),
      );
    }
    this.alarmTopic = new sns.Topic(this, 'AlarmTopic', {
      displayName: `Sift ${config.stage} alarms`,
      masterKey: topicKey,
      enforceSSL: true,
    });
    this.alarmTopic.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'BudgetsPublish',
        principals: [new iam.ServicePrincipal('budgets.amazonaws.com')],
        actions: ['sns:Publish'],
        resources: [this.alarmTopic.topicArn],
        conditions: { StringEquals: { 'aws:SourceAccount': Aws.ACCOUNT_ID } },
      }),
    );
    if (config.alarmEmail) this.alarmTopic.addSubscription(new subs.EmailSubscription(config.alarmEmail));
    const action = new cwActions.SnsAction(this.alarmTopic);
    const alarm = (alarmId: string, props: cw.AlarmProps): cw.Alarm => {
      const a = new cw.Alarm(this, alarmId, { treatMissingData: cw.TreatMissingData.NOT_BREACHING, ...props });
      a.addAlarmAction(action);
      a.addOkAction(action);
      this.alarms.push(a);
      return a;
    };

    // ---- Alarms --------------------------------------------------------------------------
    const restApi = api.api;
    alarm('Api5xxRate', {
      alarmDescription: 'More than 5% of API requests returned 5xx for 3 of the last 5 minutes',
      metric: restApi.metricServerError({ period: Duration.minutes(1), statistic: cw.Stats.AVERAGE }),
      threshold: 0.05,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    });
    alarm('EdgeRateLimited', {
      alarmDescription: 'WAF per-IP edge limit (100,000 requests / 60 s) blocked requests',
      metric: new cw.Metric({
        namespace: 'AWS/WAFV2',
        metricName: 'BlockedRequests',
        dimensionsMap: { WebACL: api.webAclName, Rule: 'edge-rate-limit-per-ip', Region: Aws.REGION },
        statistic: cw.Stats.SUM,
        period: Duration.minutes(5),
      }),
      threshold: 0,
      evaluationPeriods: 1,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    });
    const functions = [
      api.apiFunction,
      api.authorizerFunction,
      api.workerFunction,
      workflows.taskFunction,
      workflows.trainingEventsFunction,
    ];
    for (const f of functions) {
      const name = f.node.id;
      alarm(`${name}Throttles`, {
        alarmDescription: `Lambda ${name} is being throttled (concurrency limit)`,
        metric: f.fn.metricThrottles({ period: Duration.minutes(5), statistic: cw.Stats.SUM }),
        threshold: 0,
        evaluationPeriods: 1,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
      });
      alarm(`${name}Errors`, {
        alarmDescription: `Lambda ${name} errors`,
        metric: f.fn.metricErrors({ period: Duration.minutes(5), statistic: cw.Stats.SUM }),
        threshold: 5,
        evaluationPeriods: 1,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      });
    }
    alarm('WorkDlqDepth', {
      alarmDescription: 'Work items failed 3 times and are waiting in the dead-letter queue',
      metric: data.deadLetterQueue.metricApproximateNumberOfMessagesVisible({
        period: Duration.minutes(5),
        statistic: cw.Stats.MAXIMUM,
      }),
      threshold: 0,
      evaluationPeriods: 1,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    });
    for (const [name, sm] of Object.entries(workflows.stateMachines)) {
      const title = name.charAt(0).toUpperCase() + name.slice(1);
      alarm(`${title}WorkflowFailures`, {
        alarmDescription: `${name} workflow executions failed, timed out or aborted`,
        metric: new cw.MathExpression({
          expression: 'failed + timedOut + aborted',
          usingMetrics: {
            failed: sm.metricFailed({ statistic: cw.Stats.SUM }),
            timedOut: sm.metricTimedOut({ statistic: cw.Stats.SUM }),
            aborted: sm.metricAborted({ statistic: cw.Stats.SUM }),
          },
          period: Duration.minutes(5),
          label: `${name} failures`,
        }),
        threshold: 0,
        evaluationPeriods: 1,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
      });
    }
    for (const svc of [inference.encoder, inference.decoder]) {
      const name = svc.node.id;
      if (!svc.targetGroup) continue;
      alarm(`${name}Target5xx`, {
        alarmDescription: `${name} tasks returned 5xx through the ALB`,
        metric: svc.targetGroup.metrics.httpCodeTarget(elbv2.HttpCodeTarget.TARGET_5XX_COUNT, {
          period: Duration.minutes(5),
          statistic: cw.Stats.SUM,
        }),
        threshold: 10,
        evaluationPeriods: 1,
        comparisonOperator: cw.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      });
    }
    // readiness.ts emits it on each /ready a preloaded model's sessions fail SIFT_REQUIRE_EXECUTION_PROVIDER
    alarm('EncoderProviderFallback', {
      alarmDescription:
        'Encoder sessions on a GPU task fell back to CPU (the CUDA provider did not load); the task fails /ready',
      metric: new cw.Metric({
        namespace: METRICS_NAMESPACE,
        metricName: PROVIDER_FALLBACK_METRIC,
        dimensionsMap: { [OPERATIONAL_DIMENSION]: 'encoder' },
        statistic: cw.Stats.SUM,
        period: Duration.minutes(5),
      }),
      threshold: 0,
      evaluationPeriods: 1,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    });
    alarm('TrainingEventsDlq', {
      alarmDescription: 'SageMaker state-change events could not be delivered to the job-record updater',
      metric: new cw.Metric({
        namespace: 'AWS/SQS',
        metricName: 'ApproximateNumberOfMessagesVisible',
        dimensionsMap: { QueueName: workflows.trainingEventsDlq.queueName },
        statistic: cw.Stats.MAXIMUM,
        period: Duration.minutes(5),
      }),
      threshold: 0,
      evaluationPeriods: 1,
      comparisonOperator: cw.ComparisonOperator.GREATER_THAN_THRESHOLD,
    });

    // GPU capacity that cannot launch (quota, capacity) leaves tasks PROVISIONING.
    new events.Rule(this, 'GpuLaunchFailures', {
      description: `Sift ${config.stage}: GPU instances that failed to launch`,
      eventPattern: {
        source: ['aws.autoscaling'],
        detailType: ['EC2 Instance Launch Unsuccessful'],
        detail: {
          AutoScalingGroupName: [
            inference.encoder.autoScalingGroup.autoScalingGroupName,
            inference.decoder.autoScalingGroup.autoScalingGroupName,
          ],
        },
      },
      targets: [new targets.SnsTopic(this.alarmTopic)],
    });

    // ---- Finance dashboard ---------------------------------------------------------------------
    const p = config.prices;
    const day = Duration.days(1);
    const hour = Duration.hours(1);
    const total = (metric: UsageMetric, period: Duration): cw.MathExpression =>
      new cw.MathExpression({ expression: `SUM(${usageSearch(metric, period)})`, label: metric, period });
    const byDim = (metric: UsageMetric, dim: 'model' | 'endpoint', period: Duration): cw.MathExpression =>
      new cw.MathExpression({ expression: usageQuery(metric, dim), label: '', period });

    this.financeDashboard = new cw.Dashboard(this, 'FinanceDashboard', {
      dashboardName: `sift-${config.stage}-usage-and-cost`,
      defaultInterval: Duration.days(30),
    });
    this.financeDashboard.addWidgets(
      new cw.TextWidget({
        markdown: [
          `# Sift ${config.stage}: usage and estimated cost`,
          'Usage from the `Sift` EMF metrics (dimensions: `model`, `endpoint`; no customer dimension).',
          '`CostUsd` is what customers were billed (list prices per model); the estimate below values tokens at the stack config prices.',
          `Estimated cost uses the unit prices in the stack config: input $${p.inputPerMillionTokens}/M tokens,`,
          `output $${p.outputPerMillionTokens}/M, cache read $${p.cacheReadPerMillionTokens}/M, cache write`,
          `$${p.cacheWritePerMillionTokens}/M, GPU $${p.gpuPerHour}/h. Per-team usage: the billing usage endpoint.`,
        ].join('\n'),
        width: 24,
        height: 3,
      }),
    );
    this.financeDashboard.addWidgets(
      ...USAGE_METRICS.map(
        (m) =>
          new cw.SingleValueWidget({
            title: `${m} (period total)`,
            metrics: [total(m, day)],
            setPeriodToTimeRange: true,
            width: 4,
            height: 4,
          }),
      ),
    );
    const tokenCost = new cw.MathExpression({
      expression:
        `(inTok * ${p.inputPerMillionTokens} + outTok * ${p.outputPerMillionTokens} + ` +
        `cacheR * ${p.cacheReadPerMillionTokens} + cacheW * ${p.cacheWritePerMillionTokens}) / 1000000`,
      usingMetrics: {
        inTok: total('InputTokens', day),
        outTok: total('OutputTokens', day),
        cacheR: total('CacheReadTokens', day),
        cacheW: total('CacheWriteTokens', day),
      },
      label: 'Token value (USD/day)',
      period: day,
    });
    const gpuCost = new cw.MathExpression({
      expression: `gpu / 60 * ${p.gpuPerHour}`,
      usingMetrics: { gpu: total('GpuMinutes', day) },
      label: 'GPU cost (USD/day)',
      period: day,
    });
    this.financeDashboard.addWidgets(
      new cw.GraphWidget({
        title: 'Estimated USD per day',
        left: [tokenCost, gpuCost],
        stacked: true,
        width: 12,
        height: 6,
      }),
      new cw.GraphWidget({
        title: 'GPU cost by model (USD/day)',
        left: [
          new cw.MathExpression({
            expression: `gpuByModel / 60 * ${p.gpuPerHour}`,
            usingMetrics: { gpuByModel: byDim('GpuMinutes', 'model', day) },
            label: '',
            period: day,
          }),
        ],
        stacked: true,
        width: 12,
        height: 6,
      }),
    );
    for (const dim of ['model', 'endpoint'] as const) {
      this.financeDashboard.addWidgets(
        ...(['Requests', 'InputTokens', 'OutputTokens', 'CacheReadTokens'] as const).map(
          (m) =>
            new cw.GraphWidget({
              title: `${m} by ${dim}`,
              left: [byDim(m, dim, hour)],
              stacked: true,
              width: 6,
              height: 6,
            }),
        ),
      );
    }
    this.financeDashboard.addWidgets(
      new cw.GraphWidget({
        title: 'Billed USD by model (per day)',
        left: [byDim('CostUsd', 'model', day)],
        stacked: true,
        width: 12,
        height: 6,
      }),
      new cw.GraphWidget({
        title: 'Billed USD by endpoint (per day)',
        left: [byDim('CostUsd', 'endpoint', day)],
        stacked: true,
        width: 12,
        height: 6,
      }),
    );
    this.financeDashboard.addWidgets(
      new cw.GraphWidget({
        title: 'CacheWriteTokens by model',
        left: [byDim('CacheWriteTokens', 'model', hour)],
        stacked: true,
        width: 12,
        height: 6,
      }),
      new cw.GraphWidget({
        title: 'GpuMinutes by endpoint',
        left: [byDim('GpuMinutes', 'endpoint', hour)],
        stacked: true,
        width: 12,
        height: 6,
      }),
    );

    // ---- Operations dashboard -----------------------------------------------------------------
    this.operationsDashboard = new cw.Dashboard(this, 'OperationsDashboard', {
      dashboardName: `sift-${config.stage}-operations`,
      defaultInterval: Duration.hours(6),
    });
    this.operationsDashboard.addWidgets(
      new cw.GraphWidget({
        title: 'API requests and errors',
        left: [restApi.metricCount({ statistic: cw.Stats.SUM })],
        right: [
          restApi.metricClientError({ statistic: cw.Stats.SUM }),
          restApi.metricServerError({ statistic: cw.Stats.SUM }),
        ],
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'API latency (p50/p99)',
        left: [
          restApi.metricLatency({ statistic: cw.Stats.p(50) }),
          restApi.metricLatency({ statistic: cw.Stats.p(99) }),
        ],
        right: [restApi.metricIntegrationLatency({ statistic: cw.Stats.p(99) })],
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Lambda errors and throttles',
        left: functions.map((f) => f.fn.metricErrors({ statistic: cw.Stats.SUM, label: `${f.node.id} errors` })),
        right: functions.map((f) => f.fn.metricThrottles({ statistic: cw.Stats.SUM, label: `${f.node.id} throttles` })),
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Work queue and DLQ',
        left: [
          data.queue.metricApproximateNumberOfMessagesVisible({ statistic: cw.Stats.MAXIMUM }),
          data.queue.metricApproximateAgeOfOldestMessage({ statistic: cw.Stats.MAXIMUM }),
        ],
        right: [
          data.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ statistic: cw.Stats.MAXIMUM, label: 'DLQ' }),
        ],
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Workflow executions failed',
        left: Object.entries(workflows.stateMachines).map(([n, sm]) =>
          sm.metricFailed({ statistic: cw.Stats.SUM, label: n }),
        ),
        width: 12,
      }),
      new cw.GraphWidget({
        title: 'Inference tasks and targets',
        left: [inference.encoder, inference.decoder].flatMap((s) =>
          s.targetGroup ? [s.targetGroup.metrics.healthyHostCount({ label: `${s.node.id} healthy` })] : [],
        ),
        right: [inference.encoder, inference.decoder].flatMap((s) =>
          s.targetGroup
            ? [s.targetGroup.metrics.targetResponseTime({ statistic: cw.Stats.p(99), label: `${s.node.id} p99` })]
            : [],
        ),
        width: 12,
      }),
      new cw.AlarmStatusWidget({ title: 'Alarms', alarms: this.alarms, width: 24 }),
    );

    // ---- Budget ----------------------------------------------------------------------------------
    if (config.monthlyBudgetUsd > 0) {
      const subscribers: budgets.CfnBudget.SubscriberProperty[] = [
        { subscriptionType: 'SNS', address: this.alarmTopic.topicArn },
      ];
      if (config.alarmEmail) subscribers.push({ subscriptionType: 'EMAIL', address: config.alarmEmail });
      new budgets.CfnBudget(this, 'MonthlyBudget', {
        budget: {
          budgetName: `sift-${config.stage}-monthly`,
          budgetType: 'COST',
          timeUnit: 'MONTHLY',
          budgetLimit: { amount: config.monthlyBudgetUsd, unit: 'USD' },
          // Resources carry the tag sift:stage=<stage>; activate it as a cost allocation tag.
          costFilters: { TagKeyValue: [`user:sift:stage$${config.stage}`] },
        },
        notificationsWithSubscribers: [
          {
            notification: {
              notificationType: 'ACTUAL',
              comparisonOperator: 'GREATER_THAN',
              threshold: 80,
              thresholdType: 'PERCENTAGE',
            },
            subscribers,
          },
          {
            notification: {
              notificationType: 'FORECASTED',
              comparisonOperator: 'GREATER_THAN',
              threshold: 100,
              thresholdType: 'PERCENTAGE',
            },
            subscribers,
          },
        ],
      });
    }

    new CfnOutput(this, 'FinanceDashboardUrl', {
      value: `https://console.aws.amazon.com/cloudwatch/home?region=${Aws.REGION}#dashboards/dashboard/sift-${config.stage}-usage-and-cost`,
    });
    new CfnOutput(this, 'OperationsDashboardUrl', {
      value: `https://console.aws.amazon.com/cloudwatch/home?region=${Aws.REGION}#dashboards/dashboard/sift-${config.stage}-operations`,
    });
    new CfnOutput(this, 'AlarmTopicArn', { value: this.alarmTopic.topicArn });
  }
}

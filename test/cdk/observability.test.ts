/** Observability stack: finance dashboard without per-customer dimensions, alarms, budget. */
import { Match } from 'aws-cdk-lib/assertions';
import {
  METRICS_NAMESPACE,
  OPERATIONAL_DIMENSION,
  PROVIDER_FALLBACK_METRIC,
  USAGE_DIMENSIONS,
  USAGE_METRICS,
} from '../../src/core/billing/metricNames';
import { dashboardBody, dashboardQueries } from '../helpers/financeDashboard';
import { buildApp, resourcesOfType } from './helpers';

const built = buildApp({ alarmEmail: 'ops@example.com' });
const t = built.template(built.stacks.observability);

describe('finance dashboard', () => {
  const body = dashboardBody(t, 'FinanceDashboard');

  // That something emits each of these queries' metric + dimension set: test/http/financeMetrics.test.ts
  it('queries every usage metric, by exactly the usage dimensions', () => {
    const queries = dashboardQueries(body);
    for (const m of USAGE_METRICS) expect(queries.some((q) => q.metric === m)).toBe(true);
    for (const q of queries)
      expect(q).toEqual({ namespace: 'Sift', metric: expect.any(String), dimensions: [...USAGE_DIMENSIONS].sort() });
  });

  it('reads usage only by model and endpoint, never per customer', () => {
    const schemas = [...body.matchAll(/SCHEMA\(\\?"Sift\\?", ([^)]*)\)/g)].map((m) => m[1]);
    const searches = [...body.matchAll(/\{Sift,([^}]*)\}/g)].map((m) => m[1]);
    expect(schemas.length + searches.length).toBeGreaterThan(10);
    for (const dims of [...schemas, ...searches]) expect(dims!.replace(/\s/g, '')).toBe('endpoint,model');
    for (const group of body.matchAll(/GROUP BY (\w+)/g)) expect(['model', 'endpoint']).toContain(group[1]);
    const widgets = (JSON.parse(body) as { widgets: Array<{ properties: { metrics?: unknown[][] } }> }).widgets;
    const expressions = widgets
      .flatMap((w) => w.properties.metrics ?? [])
      .flat()
      .flatMap((m) =>
        typeof m === 'object' && m !== null && 'expression' in m
          ? [String((m as { expression: string }).expression)]
          : [],
      );
    expect(expressions.length).toBeGreaterThan(10);
    for (const e of expressions) expect(e).not.toMatch(/team|account|customer|tenant|user/i);
  });

  it('estimates cost from unit prices', () => {
    expect(body).toContain(`/ 60 * ${built.config.prices.gpuPerHour}`);
    expect(body).toContain('Token value (USD/day)');
  });
});

describe('alarms', () => {
  const alarms = Object.values(resourcesOfType(t, 'AWS::CloudWatch::Alarm'));
  const names = alarms.map((a) => JSON.stringify(a.Properties));

  it('covers API 5xx, throttles, DLQ depth and workflow failures', () => {
    expect(names.some((n) => n.includes('5XXError'))).toBe(true);
    expect(names.filter((n) => n.includes('"Throttles"')).length).toBe(5);
    expect(names.some((n) => n.includes('BlockedRequests'))).toBe(true);
    expect(names.filter((n) => n.includes('ApproximateNumberOfMessagesVisible')).length).toBe(2);
    for (const wf of ['training', 'generation', 'evaluation', 'adaptive']) {
      expect(names.some((n) => n.includes(`${wf} failures`))).toBe(true);
    }
  });

  it('notifies the encrypted alarm topic', () => {
    for (const a of alarms) expect(a.Properties?.AlarmActions).toHaveLength(1);
    t.hasResourceProperties('AWS::SNS::Topic', { KmsMasterKeyId: Match.anyValue() });
    t.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'ops@example.com' });
  });

  it('alarms, to the alarm topic, on the metric readiness emits when encoder sessions fall back from the required provider', () => {
    // the same names the EMF emitter writes (src/adapters/metrics/emfUsageMetrics.ts, asserted in test/http/readiness.test.ts)
    const [fallback] = alarms.filter((a) => a.Properties?.MetricName === PROVIDER_FALLBACK_METRIC);
    expect(fallback?.Properties).toMatchObject({
      Namespace: METRICS_NAMESPACE,
      Dimensions: [{ Name: OPERATIONAL_DIMENSION, Value: 'encoder' }],
      Statistic: 'Sum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
      AlarmActions: [expect.objectContaining({ Ref: expect.stringMatching(/^AlarmTopic/) })],
    });
  });

  it('reports GPU instances that fail to launch', () => {
    t.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: Match.objectLike({
        source: ['aws.autoscaling'],
        'detail-type': ['EC2 Instance Launch Unsuccessful'],
      }),
    });
  });
});

describe('budget', () => {
  it('sets a monthly cost budget from the stage config with actual and forecast notifications', () => {
    t.hasResourceProperties('AWS::Budgets::Budget', {
      Budget: Match.objectLike({
        BudgetType: 'COST',
        TimeUnit: 'MONTHLY',
        BudgetLimit: { Amount: built.config.monthlyBudgetUsd, Unit: 'USD' },
      }),
      NotificationsWithSubscribers: [
        Match.objectLike({ Notification: Match.objectLike({ NotificationType: 'ACTUAL' }) }),
        Match.objectLike({ Notification: Match.objectLike({ NotificationType: 'FORECASTED' }) }),
      ],
    });
  });

  it('takes the amount from context and can be turned off', () => {
    const none = buildApp({ monthlyBudgetUsd: 0 });
    none.template(none.stacks.observability).resourceCountIs('AWS::Budgets::Budget', 0);
  });
});

/**
 * Plays minutes of traffic against the synthesized inference template's alarms and step-scaling
 * policies, with CloudWatch and ALB behaving as lib/aws-rules.ts writes down (ALB_METRICS: which
 * metrics are published at zero targets; an alarm in ALARM re-invokes its scaling action every
 * minute; missing data per TreatMissingData). Target tracking is left out: on missing data it
 * does nothing (ALB_METRICS' doc), and these scenarios are about the minutes without targets.
 */
import type { Template } from 'aws-cdk-lib/assertions';
import { ALB_METRICS } from '../../lib/aws-rules';
import { resourcesOfType } from './helpers';

export type ServiceName = 'gateway' | 'decoder';
type Res = { Properties?: Record<string, any> };
type MetricStat = { Namespace: string; MetricName: string; Dimensions?: Array<{ Name: string; Value: unknown }> };

/** Requests arriving at each listener in one minute. */
export type Minute = Partial<Record<ServiceName, number>>;
/** A minute's traffic, or traffic that depends on which services take requests (the gateway calls the decoder only when it is up). */
export type MinuteOf = Minute | ((up: Record<ServiceName, boolean>) => Minute);

export interface SimulationOptions {
  /** Desired count at the start (default 0). */
  readonly desired?: Partial<Record<ServiceName, number>>;
  /** Minutes from a raised desired count until the task takes traffic (instance boot, model load). */
  readonly bootMinutes?: number;
}

export class ScalingSimulator {
  private readonly serviceOfTargetGroup = new Map<string, ServiceName>();
  private readonly serviceOfEcsService = new Map<string, ServiceName>();
  private readonly targetOfService = new Map<ServiceName, { id: string; min: number; max: number }>();
  private readonly alarms: Array<{ id: string; props: Record<string, any> }>;
  private readonly policies: Record<string, Res>;

  constructor(template: Template) {
    for (const [id, svc] of Object.entries(resourcesOfType(template, 'AWS::ECS::Service'))) {
      const lb = (
        svc.Properties!.LoadBalancers as Array<{ ContainerName: string; TargetGroupArn: { Ref: string } }>
      )[0]!;
      const name: ServiceName = lb.ContainerName === 'gateway' ? 'gateway' : 'decoder';
      this.serviceOfTargetGroup.set(lb.TargetGroupArn.Ref, name);
      this.serviceOfEcsService.set(id, name);
    }
    for (const [id, target] of Object.entries(
      resourcesOfType(template, 'AWS::ApplicationAutoScaling::ScalableTarget'),
    )) {
      const p = target.Properties as Record<string, any>;
      const svcId = (JSON.stringify(p.ResourceId).match(/"Fn::GetAtt":\["([^"]+)","Name"\]/) ?? [])[1]!;
      this.targetOfService.set(this.serviceOfEcsService.get(svcId)!, { id, min: p.MinCapacity, max: p.MaxCapacity });
    }
    this.alarms = Object.entries(resourcesOfType(template, 'AWS::CloudWatch::Alarm')).map(([id, a]) => ({
      id,
      props: a.Properties as Record<string, any>,
    }));
    this.policies = resourcesOfType(template, 'AWS::ApplicationAutoScaling::ScalingPolicy');
  }

  /** Runs the minutes; returns each service's desired count after every minute. */
  run(minutes: MinuteOf[], opts: SimulationOptions = {}): Array<Record<ServiceName, number>> {
    const desired: Record<ServiceName, number> = {
      gateway: opts.desired?.gateway ?? 0,
      decoder: opts.desired?.decoder ?? 0,
    };
    const boot = opts.bootMinutes ?? 5;
    // minute at which each desired task became routable: tasks present from the start are warm
    const warmSince: Record<ServiceName, number[]> = {
      gateway: Array.from({ length: desired.gateway }, () => -boot),
      decoder: Array.from({ length: desired.decoder }, () => -boot),
    };
    const history = new Map<string, Array<number | undefined>>();
    const out: Array<Record<ServiceName, number>> = [];
    minutes.forEach((minute, now) => {
      const routable = (s: ServiceName) => warmSince[s].filter((t) => now - t >= boot).length;
      const traffic =
        typeof minute === 'function'
          ? minute({ gateway: routable('gateway') > 0, decoder: routable('decoder') > 0 })
          : minute;
      const running = (s: ServiceName) => warmSince[s].length;
      const world = { traffic, routable, running };
      for (const alarm of this.alarms) {
        const points = history.get(alarm.id) ?? [];
        points.push(this.datapoint(alarm.props, world));
        history.set(alarm.id, points);
        if (!this.inAlarm(alarm.props, points)) continue;
        for (const action of (alarm.props.AlarmActions ?? []) as Array<{ Ref?: string }>) {
          const policy = action.Ref ? this.policies[action.Ref] : undefined;
          if (policy?.Properties?.PolicyType !== 'StepScaling') continue;
          const service = [...this.targetOfService].find(
            ([, t]) => t.id === policy.Properties?.ScalingTargetId?.Ref,
          )![0];
          const next = this.applyStep(
            policy,
            alarm.props.Threshold as number,
            points[points.length - 1],
            desired[service],
          );
          if (next !== undefined) desired[service] = next;
        }
      }
      for (const s of ['gateway', 'decoder'] as const) {
        while (warmSince[s].length < desired[s]) warmSince[s].push(now);
        warmSince[s].length = desired[s];
      }
      out.push({ ...desired });
    });
    return out;
  }

  /** One minute's value of the alarm's metric (undefined: no data point). */
  private datapoint(props: Record<string, any>, world: World): number | undefined {
    if (props.MetricName) return this.metric(props as MetricStat, world);
    const metrics = props.Metrics as Array<{
      Id: string;
      Expression?: string;
      MetricStat?: { Metric: MetricStat };
      ReturnData?: boolean;
    }>;
    const values: Record<string, number | undefined> = {};
    for (const m of metrics) if (m.MetricStat) values[m.Id] = this.metric(m.MetricStat.Metric, world);
    const returned = metrics.find((m) => m.ReturnData !== false)!;
    if (!returned.Expression) return values[returned.Id];
    if (Object.values(values).every((v) => v === undefined)) return undefined;
    return evaluate(returned.Expression, values);
  }

  /** What CloudWatch would hold for a metric this minute, following ALB_METRICS. */
  private metric(stat: MetricStat, world: World): number | undefined {
    const dims = Object.fromEntries((stat.Dimensions ?? []).map((d) => [d.Name, d.Value]));
    if (stat.Namespace === 'AWS/ECS') {
      const svcId = (JSON.stringify(dims.ServiceName).match(/"Fn::GetAtt":\["([^"]+)","Name"\]/) ?? [])[1]!;
      return world.running(this.serviceOfEcsService.get(svcId)!) > 0 ? 1 : undefined;
    }
    if (stat.Namespace !== 'AWS/ApplicationELB') throw new Error(`simulator: no rule for namespace ${stat.Namespace}`);
    const rule = ALB_METRICS[stat.MetricName];
    if (!rule) throw new Error(`simulator: ${stat.MetricName} is not in lib/aws-rules.ts ALB_METRICS`);
    const nonZero = (n: number) => (n > 0 ? n : undefined); // ALB publishes non-zero minutes only
    if (rule.dimension === 'TargetGroup') {
      const tg = (dims.TargetGroup as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const service = this.serviceOfTargetGroup.get(tg)!;
      if (world.routable(service) === 0 && !rule.emittedWithoutTargets) return undefined;
      return nonZero(world.traffic[service] ?? 0);
    }
    // load balancer: the ALB answers 503 itself for each request to a listener with no routable target
    const refused = (['gateway', 'decoder'] as const).reduce(
      (n, s) => n + (world.routable(s) === 0 ? (world.traffic[s] ?? 0) : 0),
      0,
    );
    return stat.MetricName.startsWith('HTTPCode_ELB_5') ? nonZero(refused) : undefined;
  }

  private inAlarm(props: Record<string, any>, points: Array<number | undefined>): boolean {
    const window = points.slice(-(props.EvaluationPeriods as number));
    const breaching = window.filter((v) =>
      v === undefined
        ? props.TreatMissingData === 'breaching'
        : compare(v, props.ComparisonOperator as string, props.Threshold as number),
    ).length;
    return (
      window.length === props.EvaluationPeriods &&
      breaching >= ((props.DatapointsToAlarm as number | undefined) ?? props.EvaluationPeriods)
    );
  }

  /** The step whose bounds (relative to the threshold) hold the value; missing data matches none. */
  private applyStep(policy: Res, threshold: number, value: number | undefined, current: number): number | undefined {
    if (value === undefined) return undefined;
    const cfg = policy.Properties!.StepScalingPolicyConfiguration as {
      AdjustmentType: string;
      StepAdjustments: Array<{
        MetricIntervalLowerBound?: number;
        MetricIntervalUpperBound?: number;
        ScalingAdjustment: number;
      }>;
    };
    const d = value - threshold;
    const step = cfg.StepAdjustments.find(
      (s) =>
        (s.MetricIntervalLowerBound === undefined || d >= s.MetricIntervalLowerBound) &&
        (s.MetricIntervalUpperBound === undefined || d <= s.MetricIntervalUpperBound),
    );
    if (!step) return undefined;
    const target = this.targetOfService.get(
      [...this.targetOfService].find(([, t]) => t.id === policy.Properties?.ScalingTargetId?.Ref)![0],
    )!;
    const raw = cfg.AdjustmentType === 'ExactCapacity' ? step.ScalingAdjustment : current + step.ScalingAdjustment;
    return Math.min(target.max, Math.max(target.min, raw));
  }
}

interface World {
  traffic: Minute;
  routable(s: ServiceName): number;
  running(s: ServiceName): number;
}

function compare(v: number, op: string, threshold: number): boolean {
  switch (op) {
    case 'GreaterThanOrEqualToThreshold':
      return v >= threshold;
    case 'GreaterThanThreshold':
      return v > threshold;
    case 'LessThanThreshold':
      return v < threshold;
    case 'LessThanOrEqualToThreshold':
      return v <= threshold;
    default:
      throw new Error(`simulator: comparison ${op}`);
  }
}

/** The metric-math subset the stack uses: IF, FILL, AND, comparisons, + and *. Missing → NaN. */
function evaluate(expression: string, values: Record<string, number | undefined>): number | undefined {
  const js = expression
    .replace(/\bIF\(/g, '$if(')
    .replace(/\bFILL\(/g, '$fill(')
    .replace(/\bAND\b/g, '&&')
    .replace(/\bOR\b/g, '||');
  if (/[^\w\s$().,+*\-<>=&|!]/.test(js)) throw new Error(`simulator: unsupported expression ${expression}`);
  const ids = Object.keys(values);
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  const fn = new Function('$if', '$fill', ...ids, `return (${js});`) as (...a: unknown[]) => number | boolean;
  const result = fn(
    (c: boolean, a: number, b: number) => (c ? a : b),
    (v: number, d: number) => (Number.isNaN(v) ? d : v),
    ...ids.map((id) => values[id] ?? NaN),
  );
  const n = Number(result);
  return Number.isNaN(n) ? undefined : n;
}

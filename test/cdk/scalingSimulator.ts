/**
 * Plays minutes of traffic against the synthesized inference template's alarms and step-scaling
 * policies (read from the template: change it and the scenarios see the change), with AWS behaving
 * as its documentation says. Each rule is written down once, with its AWS page, in
 * lib/aws-rules.ts; this file only applies them:
 * - ALB (ALB_METRICS): a listener whose target group has no healthy target answers 503 itself,
 *   counted only in the load balancer's HTTPCode_ELB_503_Count; a target group's RequestCount
 *   counts requests routed to a target; ALB metrics exist only for minutes with a non-zero value.
 *   A new target takes requests only once it has passed its health checks (state `initial` until
 *   then: "Health checks for Application Load Balancer target groups",
 *   https://docs.aws.amazon.com/elasticloadbalancing/latest/application/target-group-health-checks.html).
 * - ECS (ECS_METRICS): a woken task is PROVISIONING/PENDING for `boot` minutes (instance launch,
 *   image pull), then RUNNING, then healthy after `healthCheck` minutes (model load, health checks).
 *   `AWS/ECS` metrics exist only while a task is RUNNING; Container Insights' service task counts
 *   while the service has a desired or running task (at zero only with `containerInsightsAtZero`).
 * - CloudWatch (SCALE_TO_ZERO): metric math as synthesized (FILL; a term without data and without
 *   FILL makes the minute's result missing); an alarm is in ALARM when DatapointsToAlarm of its last
 *   EvaluationPeriods points breach, missing points counted per TreatMissingData.
 * - Application Auto Scaling (SCALE_TO_ZERO): an alarm in ALARM invokes its step policy every
 *   minute; a policy does not repeat a scale-out within its cooldown unless larger; scale-in is
 *   blocked during the cooldown after a scale-in, which a scale-out ends.
 * - History: before minute 0 the stack has sat, for the longest evaluation window, in the starting
 *   state with the `before` traffic, so every alarm starts with a full history and in the state AWS
 *   would have it in (a service that sat at zero: its idle alarm in ALARM).
 * Simplifications: alarms are evaluated on the minute that just ended and their actions take effect
 * at its end; where a scale-out and a scale-in fire in the same minute the scale-in goes last (AWS
 * does not order them; this is the unkind order); a stopped task goes at once; CloudWatch's wider
 * evaluation range for missing points is not modelled (the stack's expressions FILL every term);
 * target tracking is left out (it does nothing on missing data: ALB_METRICS' page).
 */
import type { Template } from 'aws-cdk-lib/assertions';
import { ALB_METRICS, ECS_METRICS } from '../../lib/aws-rules';
import { resourcesOfType } from './helpers';

export type ServiceName = 'gateway' | 'decoder';
const SERVICES = ['gateway', 'decoder'] as const;
type Res = { Properties?: Record<string, any> };
type MetricStat = { Namespace: string; MetricName: string; Dimensions?: Array<{ Name: string; Value: unknown }> };
type PerService = Record<ServiceName, number>;

/** Requests arriving at each listener in one minute. */
export type Minute = Partial<Record<ServiceName, number>>;
/** A minute's traffic, or traffic that depends on which services take requests (the gateway calls the decoder only when it is up). */
export type MinuteOf = Minute | ((up: Record<ServiceName, boolean>) => Minute);

export interface SimulationOptions {
  /** Desired count at the start (default 0); these tasks are healthy. */
  readonly desired?: Partial<PerService>;
  /** Traffic in every minute of the history before minute 0 (default: none, a stack that sat idle). */
  readonly before?: Minute;
  /** Minutes from a raised desired count until the task is RUNNING (default: gateway 8, decoder 15). */
  readonly boot?: Partial<PerService>;
  /** Minutes from RUNNING until the target passes its health checks (default 2). */
  readonly healthCheck?: number;
  /** Whether Container Insights publishes task counts for a service at desired 0 (default false). */
  readonly containerInsightsAtZero?: boolean;
}

/** What one minute looked like, after its alarm actions. */
export interface MinuteResult {
  /** Desired count after the minute's scaling actions. */
  readonly desired: PerService;
  /** Healthy tasks (taking requests) during the minute. */
  readonly healthy: PerService;
  /** Requests the ALB answered 503 itself during the minute. */
  readonly refused: number;
  /** Descriptions of the alarms in ALARM after the minute. */
  readonly alarms: string[];
}

interface World {
  traffic: Minute;
  desired: PerService;
  running: PerService;
  healthy: PerService;
  containerInsightsAtZero: boolean;
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
      this.targetOfService.set(this.serviceNamed(p.ResourceId), { id, min: p.MinCapacity, max: p.MaxCapacity });
    }
    this.alarms = Object.entries(resourcesOfType(template, 'AWS::CloudWatch::Alarm')).map(([id, a]) => ({
      id,
      props: a.Properties as Record<string, any>,
    }));
    this.policies = resourcesOfType(template, 'AWS::ApplicationAutoScaling::ScalingPolicy');
  }

  /** Runs the minutes after the history; returns what each minute looked like. */
  run(minutes: MinuteOf[], opts: SimulationOptions = {}): MinuteResult[] {
    const boot: PerService = { gateway: opts.boot?.gateway ?? 8, decoder: opts.boot?.decoder ?? 15 };
    const healthCheck = opts.healthCheck ?? 2;
    const desired: PerService = { gateway: opts.desired?.gateway ?? 0, decoder: opts.desired?.decoder ?? 0 };
    // the minute each task was requested: those present from the start are long healthy
    const tasks: Record<ServiceName, number[]> = {
      gateway: Array.from({ length: desired.gateway }, () => Number.NEGATIVE_INFINITY),
      decoder: Array.from({ length: desired.decoder }, () => Number.NEGATIVE_INFINITY),
    };
    const count = (now: number, since: number): PerService => {
      const n = (s: ServiceName) => tasks[s].filter((t) => now - t >= boot[s] + since).length;
      return { gateway: n('gateway'), decoder: n('decoder') };
    };
    const cooldowns = new Cooldowns();
    const history = new Map<string, Array<number | undefined>>(this.alarms.map((a) => [a.id, []]));
    const historyMinutes = Math.max(...this.alarms.map((a) => a.props.EvaluationPeriods as number));
    const out: MinuteResult[] = [];
    for (let now = -historyMinutes; now < minutes.length; now++) {
      const running = count(now, 0);
      const healthy = count(now, healthCheck);
      const minute = now < 0 ? (opts.before ?? {}) : minutes[now]!;
      const traffic =
        typeof minute === 'function' ? minute({ gateway: healthy.gateway > 0, decoder: healthy.decoder > 0 }) : minute;
      const world: World = {
        traffic,
        desired: { ...desired },
        running,
        healthy,
        containerInsightsAtZero: opts.containerInsightsAtZero ?? false,
      };
      const fired: Array<{ service: ServiceName; policyId: string; next: number; cooldownMinutes: number }> = [];
      const inAlarm: string[] = [];
      for (const alarm of this.alarms) {
        const points = history.get(alarm.id)!;
        points.push(this.datapoint(alarm.props, world));
        if (!this.inAlarm(alarm.props, points)) continue;
        inAlarm.push(alarm.props.AlarmDescription as string);
        for (const action of (alarm.props.AlarmActions ?? []) as Array<{ Ref?: string }>) {
          const policy = action.Ref ? this.policies[action.Ref] : undefined;
          if (policy?.Properties?.PolicyType !== 'StepScaling') continue;
          const service = this.serviceOfPolicy(policy);
          const next = this.applyStep(policy, alarm.props.Threshold as number, points.at(-1), desired[service]);
          const cfg = policy.Properties.StepScalingPolicyConfiguration as { Cooldown?: number };
          if (next !== undefined)
            fired.push({ service, policyId: action.Ref!, next, cooldownMinutes: (cfg.Cooldown ?? 300) / 60 });
        }
      }
      // scale-outs first, the scale-in last (the unkind order)
      for (const f of fired.sort((a, b) => b.next - a.next))
        desired[f.service] = cooldowns.apply(now, f, desired[f.service]);
      for (const s of SERVICES) {
        while (tasks[s].length < desired[s]) tasks[s].push(now + 1);
        tasks[s].length = desired[s];
      }
      if (now >= 0) out.push({ desired: { ...desired }, healthy, refused: refusedByAlb(world), alarms: inAlarm });
    }
    return out;
  }

  private serviceNamed(ref: unknown): ServiceName {
    const svcId = (JSON.stringify(ref).match(/"Fn::GetAtt":\["([^"]+)","Name"\]/) ?? [])[1]!;
    return this.serviceOfEcsService.get(svcId)!;
  }

  private serviceOfPolicy(policy: Res): ServiceName {
    return [...this.targetOfService].find(([, t]) => t.id === policy.Properties?.ScalingTargetId?.Ref)![0];
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
    // a minute in which none of its metrics has data gives the expression no data point
    if (Object.values(values).every((v) => v === undefined)) return undefined;
    return evaluate(returned.Expression, values);
  }

  /** What CloudWatch would hold for a metric this minute, following ALB_METRICS and ECS_METRICS. */
  private metric(stat: MetricStat, world: World): number | undefined {
    const dims = Object.fromEntries((stat.Dimensions ?? []).map((d) => [d.Name, d.Value]));
    if (stat.Namespace === 'AWS/ECS' || stat.Namespace === 'ECS/ContainerInsights') {
      const rule = ECS_METRICS[stat.MetricName];
      if (rule?.namespace !== stat.Namespace)
        throw new Error(`simulator: ${stat.Namespace} ${stat.MetricName} is not in lib/aws-rules.ts ECS_METRICS`);
      const s = this.serviceNamed(dims.ServiceName);
      const published =
        rule.publishedWhile === 'running'
          ? world.running[s] > 0
          : world.desired[s] > 0 || world.running[s] > 0 || world.containerInsightsAtZero;
      if (!published) return undefined;
      if (stat.MetricName === 'DesiredTaskCount') return world.desired[s];
      if (stat.MetricName === 'RunningTaskCount') return world.running[s];
      if (stat.MetricName === 'PendingTaskCount') return Math.max(0, world.desired[s] - world.running[s]);
      return 1; // a utilisation: any value; its presence is what the stack may read
    }
    if (stat.Namespace !== 'AWS/ApplicationELB') throw new Error(`simulator: no rule for namespace ${stat.Namespace}`);
    const rule = ALB_METRICS[stat.MetricName];
    if (!rule) throw new Error(`simulator: ${stat.MetricName} is not in lib/aws-rules.ts ALB_METRICS`);
    const nonZero = (n: number) => (n > 0 ? n : undefined); // ALB publishes non-zero minutes only
    if (rule.dimension === 'TargetGroup') {
      const tg = (dims.TargetGroup as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
      const service = this.serviceOfTargetGroup.get(tg)!;
      if (world.healthy[service] === 0 && !rule.emittedWithoutTargets) return undefined;
      return nonZero(world.traffic[service] ?? 0);
    }
    return stat.MetricName.startsWith('HTTPCode_ELB_5') ? nonZero(refusedByAlb(world)) : undefined;
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
    const target = this.targetOfService.get(this.serviceOfPolicy(policy))!;
    const raw = cfg.AdjustmentType === 'ExactCapacity' ? step.ScalingAdjustment : current + step.ScalingAdjustment;
    return Math.min(target.max, Math.max(target.min, raw));
  }
}

/** Requests the ALB answered 503 itself: those to a listener whose service has no healthy target. */
function refusedByAlb(world: World): number {
  return SERVICES.reduce((n, s) => n + (world.healthy[s] === 0 ? (world.traffic[s] ?? 0) : 0), 0);
}

/** Step-scaling cooldowns (lib/aws-rules.ts, SCALE_TO_ZERO). */
class Cooldowns {
  private readonly scaleOut = new Map<string, { until: number; to: number }>();
  private readonly scaleInUntil = new Map<ServiceName, number>();

  /** The desired count after `f` is applied at minute `now` to `current`. */
  apply(
    now: number,
    f: { service: ServiceName; policyId: string; next: number; cooldownMinutes: number },
    current: number,
  ) {
    if (f.next > current) {
      const last = this.scaleOut.get(f.policyId);
      if (last && now < last.until && f.next <= last.to) return current;
      this.scaleOut.set(f.policyId, { until: now + f.cooldownMinutes, to: f.next });
      this.scaleInUntil.delete(f.service); // a scale-out ends the scale-in cooldown
      return f.next;
    }
    if (f.next < current) {
      if (now < (this.scaleInUntil.get(f.service) ?? Number.NEGATIVE_INFINITY)) return current;
      this.scaleInUntil.set(f.service, now + f.cooldownMinutes);
      return f.next;
    }
    return current;
  }
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

/** The metric-math subset the stack uses: IF, FILL, AND, OR, comparisons, +, - and *. Missing → NaN → no data point. */
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

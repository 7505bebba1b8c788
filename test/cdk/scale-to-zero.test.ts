/**
 * Scale from zero and back, played against the synthesized alarms and step policies with
 * CloudWatch, ECS, the ALB and Application Auto Scaling behaving as lib/aws-rules.ts documents
 * (test/cdk/scalingSimulator.ts). Every run starts from a stack that has sat in its starting state
 * for a full alarm window: a service at zero has its idle alarm in ALARM.
 */
import { Template } from 'aws-cdk-lib/assertions';
import { ALB_METRICS, ECS_METRICS, SCALE_TO_ZERO } from '../../lib/aws-rules';
import { buildApp, resourcesOfType } from './helpers';
import { type Minute, type MinuteOf, type MinuteResult, ScalingSimulator } from './scalingSimulator';

const dev = buildApp();
const devTemplate = dev.template(dev.stacks.inference);
const sim = new ScalingSimulator(devTemplate);
const minutes = (n: number, traffic: Minute): Minute[] => Array.from({ length: n }, () => ({ ...traffic }));
const IDLE = SCALE_TO_ZERO.idleMinutes;
const gateways = (run: MinuteResult[]) => run.map((m) => m.desired.gateway);
const decoders = (run: MinuteResult[]) => run.map((m) => m.desired.decoder);
/** The first minute after `from` whose desired count is 0. */
const sleepsAt = (counts: number[], from = 0) => counts.findIndex((n, i) => i >= from && n === 0);
/** A task woken at the end of minute `woken` is RUNNING from this minute (its boot, then RUNNING). */
const runningFrom = (boot: number, woken = 0) => woken + 1 + boot;

/**
 * "One request, then silence" for the gateway: the request at minute 0 gets the ALB's 503 and
 * wakes the gateway, which must stay up through its boot, serve, and sleep IDLE minutes after it
 * is RUNNING with nothing to do. AWS does not say whether Container Insights publishes task counts
 * for a service at zero (lib/aws-rules.ts, ECS_METRICS): the stack must work either way, so both
 * are played. Returns what went wrong, or undefined.
 */
function oneRequestThenSilence(s: ScalingSimulator, boot: number): string | undefined {
  const healthCheck = 2;
  for (const containerInsightsAtZero of [false, true]) {
    const run = s.run([{ gateway: 1 }, ...minutes(boot + IDLE + 10, {})], {
      boot: { gateway: boot },
      healthCheck,
      containerInsightsAtZero,
    });
    const up = runningFrom(boot) + healthCheck; // the first minute the target is healthy
    const down = sleepsAt(gateways(run));
    const when = `(Container Insights at zero: ${containerInsightsAtZero})`;
    if (run[0]!.refused !== 1) return `the request did not get the ALB 503 ${when}`;
    if (down !== -1 && down < up)
      return `set back to 0 at minute ${down}, before the task was healthy (minute ${up}) ${when}`;
    if (run[up]!.healthy.gateway !== 1) return `no healthy gateway task at minute ${up} ${when}`;
    if (down !== runningFrom(boot) + IDLE - 1)
      return `went to 0 at minute ${down}, not ${IDLE} idle minutes after RUNNING ${when}`;
    if (run.some((m) => m.desired.decoder !== 0)) return `woke the decoder ${when}`;
  }
  return undefined;
}

describe('the rules the scaling depends on', () => {
  it('a target group reports no requests while it has no targets; the load balancer reports its 503s', () => {
    expect(ALB_METRICS.RequestCount!.emittedWithoutTargets).toBe(false);
    expect(ALB_METRICS.HTTPCode_ELB_503_Count).toEqual({ dimension: 'LoadBalancer', emittedWithoutTargets: true });
  });

  it('AWS/ECS metrics exist only while a task runs; Container Insights task counts while one is desired', () => {
    expect(ECS_METRICS.CPUUtilization).toEqual({ namespace: 'AWS/ECS', publishedWhile: 'running' });
    expect(ECS_METRICS.DesiredTaskCount).toEqual({ namespace: 'ECS/ContainerInsights', publishedWhile: 'desired' });
  });

  it('every alarm with a scaling action reads the 503 count; idle alarms read no AWS/ECS metric; Container Insights is on', () => {
    const stepPolicies = new Set(
      Object.entries(resourcesOfType(devTemplate, 'AWS::ApplicationAutoScaling::ScalingPolicy'))
        .filter(([, p]) => p.Properties?.PolicyType === 'StepScaling')
        .map(([id]) => id),
    );
    const alarms = Object.values(resourcesOfType(devTemplate, 'AWS::CloudWatch::Alarm')).filter((a) =>
      ((a.Properties?.AlarmActions ?? []) as Array<{ Ref?: string }>).some((x) => stepPolicies.has(x.Ref ?? '')),
    );
    expect(alarms).toHaveLength(4); // wake + idle, per service
    for (const a of alarms) {
      const metrics = JSON.stringify(a.Properties?.Metrics);
      expect(metrics).toContain('"MetricName":"HTTPCode_ELB_503_Count"');
      expect(metrics).not.toContain('"Namespace":"AWS/ECS"');
    }
    const clusters = Object.values(resourcesOfType(devTemplate, 'AWS::ECS::Cluster'));
    expect(clusters.map((c) => c.Properties?.ClusterSettings)).toEqual([
      [{ Name: 'containerInsights', Value: 'enabled' }],
    ]);
  });
});

describe('a service that sat at zero', () => {
  it('starts with its idle alarms in ALARM, and stays at zero without traffic', () => {
    const run = sim.run(minutes(5, {}));
    expect(run[0]!.alarms.sort()).toEqual([
      expect.stringMatching(/decoder idle/),
      expect.stringMatching(/gateway idle/),
    ]);
    expect(run.map((m) => m.desired)).toEqual(run.map(() => ({ gateway: 0, decoder: 0 })));
  });

  it.each([6, 8, 12])(
    'one request, then silence: the gateway wakes, stays up through a %i-minute boot, serves, then sleeps',
    (boot) => {
      expect(oneRequestThenSilence(sim, boot)).toBeUndefined();
    },
  );

  it('a request served after the boot keeps the gateway up for another idle window', () => {
    const boot = 8;
    const later = boot + 5;
    const traffic: Minute[] = [{ gateway: 1 }, ...minutes(later - 1, {}), { gateway: 1 }, ...minutes(IDLE + 5, {})];
    const run = sim.run(traffic, { boot: { gateway: boot } });
    expect(run[later]).toMatchObject({ refused: 0, healthy: { gateway: 1 } });
    expect(sleepsAt(gateways(run))).toBe(later + IDLE);
  });

  it('a burst during the boot keeps exactly one task coming (each 503 re-wakes to 1, never more)', () => {
    const boot = 10;
    const run = sim.run([...minutes(boot, { gateway: 40 }), ...minutes(IDLE + 5, {})], { boot: { gateway: boot } });
    expect(run.slice(0, boot).every((m) => m.refused === 40)).toBe(true);
    const down = runningFrom(boot) + IDLE - 1;
    expect(gateways(run).slice(0, down)).toEqual(Array.from({ length: down }, () => 1));
    expect(sleepsAt(gateways(run))).toBe(down);
  });

  it('a chat request while the gateway is up: the decoder wakes and stays up through its longer boot with no further request', () => {
    const boot = 20;
    const run = sim.run([{ gateway: 1, decoder: 1 }, ...minutes(boot + IDLE + 5, {})], {
      desired: { gateway: 1 },
      before: { gateway: 1 },
      boot: { decoder: boot },
    });
    expect(run[0]!.refused).toBe(1);
    const d = decoders(run);
    const up = runningFrom(boot) + 2;
    expect(d.slice(0, up)).toEqual(Array.from({ length: up }, () => 1));
    expect(run[up]!.healthy.decoder).toBe(1);
    expect(sleepsAt(d)).toBe(runningFrom(boot) + IDLE - 1);
  });

  it('a cold chat client retrying each minute wakes the gateway, then the decoder; both sleep after it stops', () => {
    let answered = -1; // the minute the client got its answer; it sends nothing after
    const chat =
      (minute: number): MinuteOf =>
      (up) => {
        if (answered >= 0) return {};
        if (up.decoder) answered = minute;
        return up.gateway ? { gateway: 1, decoder: 1 } : { gateway: 1 };
      };
    const run = sim.run(
      Array.from({ length: 60 }, (_, minute) => chat(minute)),
      { boot: { gateway: 6, decoder: 12 } },
    );
    expect(run[0]!.desired).toEqual({ gateway: 1, decoder: 0 });
    const gwUp = run.findIndex((m) => m.healthy.gateway > 0);
    expect(gwUp).toBe(runningFrom(6) + 2);
    expect(run[gwUp]!.desired.decoder).toBe(1);
    expect(decoders(run).slice(gwUp, gwUp + 14)).toEqual(Array.from({ length: 14 }, () => 1));
    expect(answered).toBe(runningFrom(12, gwUp) + 2);
    expect(run[answered]!.refused).toBe(0);
    // the gateway sleeps IDLE minutes after the last request; the decoder IDLE minutes after its last request
    expect(sleepsAt(gateways(run))).toBe(answered + IDLE);
    expect(sleepsAt(decoders(run), gwUp)).toBe(answered + IDLE);
  });
});

describe('from zero and back', () => {
  it('a request to the gateway at zero tasks starts one gateway task, and not the decoder', () => {
    const run = sim.run([{ gateway: 3 }, ...minutes(3, {})]);
    expect(run[0]!.desired).toEqual({ gateway: 1, decoder: 0 });
    expect(run.at(-1)!.desired).toEqual({ gateway: 1, decoder: 0 });
  });

  it('busy services are not lowered by the wake-up', () => {
    const busy = { gateway: 50, decoder: 20 };
    const run = sim.run(minutes(20, busy), { desired: { gateway: 2, decoder: 2 }, before: busy });
    expect(run.at(-1)!.desired).toEqual({ gateway: 2, decoder: 2 });
  });

  it(`both services go to zero after ${IDLE} idle minutes, and not before`, () => {
    const run = sim.run(minutes(IDLE + 2, {}), {
      desired: { gateway: 2, decoder: 1 },
      before: { gateway: 5, decoder: 5 },
    });
    expect(run[IDLE - 2]!.desired).toEqual({ gateway: 2, decoder: 1 });
    expect(run[IDLE - 1]!.desired).toEqual({ gateway: 0, decoder: 0 });
  });

  it('a request the minute after a sleep wakes the service at once (a scale-out ends the scale-in cooldown)', () => {
    const run = sim.run([...minutes(IDLE, {}), { gateway: 1 }, ...minutes(3, {})], {
      desired: { gateway: 1 },
      before: { gateway: 5 },
    });
    expect(gateways(run).slice(IDLE - 2, IDLE + 2)).toEqual([1, 0, 1, 1]);
  });

  it('prod keeps its minimum of one task when idle', () => {
    const prod = buildApp({ stage: 'prod' });
    const run = new ScalingSimulator(prod.template(prod.stacks.inference)).run(minutes(IDLE + 2, {}), {
      desired: { gateway: 3, decoder: 2 },
      before: { gateway: 5, decoder: 5 },
    });
    expect(run.at(-1)!.desired).toEqual({ gateway: 1, decoder: 1 });
  });
});

/** The dev template with its idle alarms changed by `mutate`. */
function mutant(mutate: (alarm: Record<string, any>) => void): ScalingSimulator {
  const json = JSON.parse(JSON.stringify(devTemplate.toJSON())) as {
    Resources: Record<string, { Type: string; Properties: any }>;
  };
  for (const r of Object.values(json.Resources))
    if (r.Type === 'AWS::CloudWatch::Alarm' && /idle/.test(r.Properties.AlarmDescription)) mutate(r.Properties);
  return new ScalingSimulator(Template.fromJSON(json));
}
const returned = (alarm: Record<string, any>) =>
  (alarm.Metrics as Array<{ Expression?: string; ReturnData?: boolean }>).find((m) => m.ReturnData !== false)!;

describe('the scenario fails where the stack would fail on AWS', () => {
  it('without the 503 term in the idle expression (the idle alarm undoes the wake-up)', () => {
    const s = mutant((a) => {
      returned(a).Expression = returned(a).Expression!.replace('FILL(e503, 0) + ', '');
      a.Metrics = (a.Metrics as Array<{ Id: string }>).filter((m) => m.Id !== 'e503');
    });
    expect(oneRequestThenSilence(s, 8)).toMatch(/set back to 0 at minute 0/);
  });

  it('with DatapointsToAlarm 5 of 15 (the full idle history keeps the alarm in ALARM)', () => {
    const s = mutant((a) => {
      a.DatapointsToAlarm = 5;
    });
    expect(oneRequestThenSilence(s, 8)).toMatch(/set back to 0/);
  });

  it('with the previous idle expression (its CPU term has no data while the task boots)', () => {
    const s = mutant((a) => {
      const metrics = a.Metrics as Array<{ Id: string; Expression?: string; MetricStat?: { Metric: any } }>;
      const desired = metrics.find((m) => m.Id === 'desired')!;
      desired.Id = 'cpu';
      desired.MetricStat!.Metric = {
        ...desired.MetricStat!.Metric,
        Namespace: 'AWS/ECS',
        MetricName: 'CPUUtilization',
      };
      a.Metrics = metrics.filter((m) => m.Id !== 'running');
      returned(a).Expression = returned(a).Expression!.replace(
        'IF(FILL(desired, 0) > FILL(running, 0), 1, 0)',
        '0 * cpu',
      );
    });
    expect(oneRequestThenSilence(s, 8)).toMatch(/set back to 0/);
  });
});

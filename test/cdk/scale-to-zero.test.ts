/**
 * Scale from zero and back, played against the synthesized alarms and step policies with
 * CloudWatch/ALB behaving as lib/aws-rules.ts documents (test/cdk/scalingSimulator.ts).
 */
import { ALB_METRICS, SCALE_TO_ZERO } from '../../lib/aws-rules';
import { buildApp, resourcesOfType } from './helpers';
import { ScalingSimulator, type Minute } from './scalingSimulator';

const dev = buildApp();
const sim = new ScalingSimulator(dev.template(dev.stacks.inference));
const minutes = (n: number, traffic: Minute): Minute[] => Array.from({ length: n }, () => ({ ...traffic }));

describe('the rule the wake-up depends on', () => {
  it('a target group reports no requests while it has no targets; the load balancer reports its 503s', () => {
    expect(ALB_METRICS.RequestCount!.emittedWithoutTargets).toBe(false);
    expect(ALB_METRICS.HTTPCode_ELB_503_Count).toEqual({ dimension: 'LoadBalancer', emittedWithoutTargets: true });
  });

  it('every alarm with a scaling action on a scale-to-zero service reads the load balancer 503 count', () => {
    const t = dev.template(dev.stacks.inference);
    const stepPolicies = new Set(
      Object.entries(resourcesOfType(t, 'AWS::ApplicationAutoScaling::ScalingPolicy'))
        .filter(([, p]) => p.Properties?.PolicyType === 'StepScaling')
        .map(([id]) => id),
    );
    const alarms = Object.values(resourcesOfType(t, 'AWS::CloudWatch::Alarm')).filter((a) =>
      ((a.Properties?.AlarmActions ?? []) as Array<{ Ref?: string }>).some((x) => stepPolicies.has(x.Ref ?? '')),
    );
    expect(alarms).toHaveLength(4); // wake + idle, per service
    for (const a of alarms)
      expect(JSON.stringify(a.Properties?.Metrics)).toContain('"MetricName":"HTTPCode_ELB_503_Count"');
  });
});

describe('from zero', () => {
  it('a request to the gateway at zero tasks starts one gateway task, and not the decoder', () => {
    const run = sim.run([{ gateway: 3 }, ...minutes(3, {})]);
    expect(run[0]).toEqual({ gateway: 1, decoder: 0 });
    expect(run.at(-1)).toEqual({ gateway: 1, decoder: 0 });
  });

  it('a client retrying through the boot keeps its gateway task (the idle alarm does not undo the wake-up)', () => {
    const run = sim.run(minutes(SCALE_TO_ZERO.idleMinutes + 10, { gateway: 2 }), { bootMinutes: 8 });
    expect(run.map((m) => m.gateway)).toEqual(run.map(() => 1));
  });

  it('the gateway calling a decoder at zero starts one decoder task and leaves the gateway as it is', () => {
    const run = sim.run([{ gateway: 5, decoder: 5 }, ...minutes(3, { gateway: 5 })], { desired: { gateway: 2 } });
    expect(run[0]).toEqual({ gateway: 2, decoder: 1 });
    expect(run.at(-1)).toEqual({ gateway: 2, decoder: 1 });
  });

  it('a cold chat request wakes the gateway, then (on the retry) the decoder', () => {
    // the client retries each minute; the gateway forwards to the decoder once it takes traffic
    const chat = (up: { gateway: boolean }): Minute => (up.gateway ? { gateway: 1, decoder: 1 } : { gateway: 1 });
    const run = sim.run(
      Array.from({ length: 12 }, () => chat),
      { bootMinutes: 3 },
    );
    expect(run[0]).toEqual({ gateway: 1, decoder: 0 });
    expect(run[2]).toEqual({ gateway: 1, decoder: 0 });
    expect(run[3]).toEqual({ gateway: 1, decoder: 1 });
    expect(run.at(-1)).toEqual({ gateway: 1, decoder: 1 });
  });

  it('busy services are not lowered by the wake-up', () => {
    const run = sim.run(minutes(20, { gateway: 50, decoder: 20 }), { desired: { gateway: 2, decoder: 2 } });
    expect(run.at(-1)).toEqual({ gateway: 2, decoder: 2 });
  });
});

describe('back to zero', () => {
  it(`both services go to zero after ${SCALE_TO_ZERO.idleMinutes} idle minutes, and not before`, () => {
    const run = sim.run(minutes(SCALE_TO_ZERO.idleMinutes + 2, {}), { desired: { gateway: 2, decoder: 1 } });
    expect(run[SCALE_TO_ZERO.idleMinutes - 2]).toEqual({ gateway: 2, decoder: 1 });
    expect(run.at(-1)).toEqual({ gateway: 0, decoder: 0 });
  });

  it('prod keeps its minimum of one task when idle', () => {
    const prod = buildApp({ stage: 'prod' });
    const run = new ScalingSimulator(prod.template(prod.stacks.inference)).run(
      minutes(SCALE_TO_ZERO.idleMinutes + 2, {}),
      { desired: { gateway: 3, decoder: 2 } },
    );
    expect(run.at(-1)).toEqual({ gateway: 1, decoder: 1 });
  });
});

/** Inference stack: GPU capacity, services, health checks, autoscaling, private networking. */
import { Match } from 'aws-cdk-lib/assertions';
import { gp3Refusal } from '../../lib/aws-rules';
import { GPU_INSTANCE_TYPES, gpuFallbackTypes } from '../../lib/config';
import { DECODER_MODEL, DECODER_PORT, GATEWAY_PORT } from '../../lib/inference-stack';
import { CATALOG } from '../../src/core/catalog';
import { baseModelPrefix } from '../../src/core/modelLayout';
import { buildApp, resourcesOfType } from './helpers';

const built = buildApp();
const t = built.template(built.stacks.inference);

describe('GPU capacity', () => {
  it('takes the GPU instance types as CloudFormation parameters (g5/g6 families)', () => {
    const params = t.findParameters('*');
    for (const name of ['EncoderInstanceType', 'DecoderInstanceType']) {
      expect(params[name]).toMatchObject({ Type: 'String', AllowedValues: [...GPU_INSTANCE_TYPES] });
      for (const v of (params[name] as { AllowedValues: string[] }).AllowedValues) expect(v).toMatch(/^g(5|6|6e)\./);
    }
  });

  it('boots the ECS GPU-optimized Amazon Linux 2023 AMI, resolved at deploy time', () => {
    const params = t.findParameters('*');
    const ami = Object.values(params).find((p) =>
      String((p as { Default?: string }).Default).includes('amazon-linux-2023/gpu'),
    );
    expect(ami).toMatchObject({ Type: 'AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>' });
  });

  it('uses launch templates with IMDSv2 and encrypted gp3 root volumes', () => {
    const lts = Object.values(resourcesOfType(t, 'AWS::EC2::LaunchTemplate'));
    expect(lts).toHaveLength(2);
    for (const lt of lts) {
      expect(lt.Properties?.LaunchTemplateData).toMatchObject({
        MetadataOptions: { HttpTokens: 'required' },
        BlockDeviceMappings: [{ DeviceName: '/dev/xvda', Ebs: { Encrypted: true, VolumeType: 'gp3' } }],
        Monitoring: { Enabled: true },
      });
    }
  });

  it('provisions gp3 throughput above the 125 MiB/s default (image pulls on every wake), within what EBS accepts', () => {
    for (const lt of Object.values(resourcesOfType(t, 'AWS::EC2::LaunchTemplate'))) {
      const ebs = (lt.Properties!.LaunchTemplateData as { BlockDeviceMappings: Array<{ Ebs: Record<string, number> }> })
        .BlockDeviceMappings[0]!.Ebs;
      expect(ebs.Throughput).toBeGreaterThanOrEqual(500);
      expect(gp3Refusal(ebs.Iops ?? 3000, ebs.Throughput!)).toBeUndefined();
    }
    // the rule refuses what EBS refuses: more than 0.25 MiB/s per IOPS, or above the ceiling
    expect(gp3Refusal(3000, 1000)).toMatch(/needs at least 4000 IOPS/);
    expect(gp3Refusal(8000, 1500)).toMatch(/outside/);
  });

  it('falls back to other GPU families of the same size and GPU memory when the chosen type has no capacity', () => {
    const asgs = Object.values(resourcesOfType(t, 'AWS::AutoScaling::AutoScalingGroup'));
    expect(asgs).toHaveLength(2);
    const params = t.findParameters('*') as Record<string, { Default: string }>;
    const conditions = t.toJSON().Conditions as Record<string, unknown>;
    for (const asg of asgs) {
      const policy = asg.Properties!.MixedInstancesPolicy as {
        LaunchTemplate: { Overrides: unknown[] };
        InstancesDistribution: Record<string, unknown>;
      };
      expect(asg.Properties!.LaunchTemplate).toBeUndefined();
      expect(policy.InstancesDistribution).toMatchObject({
        OnDemandAllocationStrategy: 'prioritized',
        OnDemandPercentageAboveBaseCapacity: 100,
      });
      const [primary, ...rest] = policy.LaunchTemplate.Overrides as Array<Record<string, unknown>>;
      const param = (primary!.InstanceType as { Ref: string }).Ref;
      expect(['EncoderInstanceType', 'DecoderInstanceType']).toContain(param);
      const chosen = params[param]!.Default as (typeof GPU_INSTANCE_TYPES)[number];
      // the fallbacks hold while the parameter keeps the type chosen at synth
      const fallbacks = rest.map((o) => {
        const [condition, value, none] = (o as { 'Fn::If': [string, { InstanceType: string }, unknown] })['Fn::If'];
        expect(conditions[condition]).toEqual({ 'Fn::Equals': [{ Ref: param }, chosen] });
        expect(none).toEqual({ Ref: 'AWS::NoValue' });
        return value.InstanceType;
      });
      expect(fallbacks).toEqual(gpuFallbackTypes(chosen));
      expect(fallbacks.length).toBeGreaterThan(0);
    }
    expect(gpuFallbackTypes('g6.xlarge')).toEqual(['g5.xlarge', 'g6e.xlarge']);
    expect(gpuFallbackTypes('g5.2xlarge')).toEqual(['g6.2xlarge', 'g6e.2xlarge']);
    // a 48 GB L40S never falls back to a 24 GB GPU
    expect(gpuFallbackTypes('g6e.xlarge')).toEqual([]);
  });

  it('registers managed-scaling capacity providers that can scale to zero', () => {
    t.resourceCountIs('AWS::ECS::CapacityProvider', 2);
    t.hasResourceProperties('AWS::ECS::CapacityProvider', {
      AutoScalingGroupProvider: Match.objectLike({
        ManagedScaling: Match.objectLike({ Status: 'ENABLED', TargetCapacity: 100 }),
        ManagedTerminationProtection: 'ENABLED',
      }),
    });
    t.hasResourceProperties('AWS::AutoScaling::AutoScalingGroup', { MinSize: '0' });
  });

  it('enables Container Insights on the cluster', () => {
    t.hasResourceProperties('AWS::ECS::Cluster', {
      ClusterSettings: [{ Name: 'containerInsights', Value: 'enabled' }],
    });
  });
});

describe('services', () => {
  const taskDefs = Object.values(resourcesOfType(t, 'AWS::ECS::TaskDefinition'));
  const containers = taskDefs.map((td) => (td.Properties!.ContainerDefinitions as Array<Record<string, unknown>>)[0]!);

  it('runs one GPU per task with health checks, shared memory and awslogs', () => {
    expect(containers.map((c) => c.Name).sort()).toEqual(['gateway', 'vllm']);
    for (const c of containers) {
      expect(c).toMatchObject({
        ResourceRequirements: [{ Type: 'GPU', Value: '1' }],
        HealthCheck: { Command: ['CMD-SHELL', expect.stringContaining('/health')] },
        LinuxParameters: expect.objectContaining({ InitProcessEnabled: true, SharedMemorySize: expect.any(Number) }),
        LogConfiguration: expect.objectContaining({ LogDriver: 'awslogs' }),
      });
    }
  });

  it('gives the decoder the longest model-load grace period', () => {
    const vllm = containers.find((c) => c.Name === 'vllm')!;
    expect((vllm.HealthCheck as { StartPeriod: number }).StartPeriod).toBeGreaterThanOrEqual(300);
  });

  it('uses awsvpc tasks on the capacity providers with circuit-breaker rollback', () => {
    for (const td of taskDefs) expect(td.Properties?.NetworkMode).toBe('awsvpc');
    const services = Object.values(resourcesOfType(t, 'AWS::ECS::Service'));
    expect(services).toHaveLength(2);
    for (const s of services) {
      expect(s.Properties).toMatchObject({
        CapacityProviderStrategy: [expect.objectContaining({ Weight: 1 })],
        DeploymentConfiguration: expect.objectContaining({
          DeploymentCircuitBreaker: { Enable: true, Rollback: true },
        }),
        NetworkConfiguration: { AwsvpcConfiguration: expect.objectContaining({ AssignPublicIp: 'DISABLED' }) },
      });
    }
  });

  it('scales tasks on ALB request count, and from zero on the first request', () => {
    t.hasResourceProperties('AWS::ApplicationAutoScaling::ScalingPolicy', {
      PolicyType: 'TargetTrackingScaling',
      TargetTrackingScalingPolicyConfiguration: Match.objectLike({
        PredefinedMetricSpecification: Match.objectLike({ PredefinedMetricType: 'ALBRequestCountPerTarget' }),
      }),
    });
    t.hasResourceProperties('AWS::ApplicationAutoScaling::ScalingPolicy', { PolicyType: 'StepScaling' });
  });

  it('takes container images from the containers/ directories as image assets', () => {
    const images = containers.map((c) => JSON.stringify(c.Image));
    for (const i of images) expect(i).toContain('container-assets');
  });
});

describe('network', () => {
  it('keeps the load balancer internal with long idle timeout and access logs', () => {
    t.hasResourceProperties('AWS::ElasticLoadBalancingV2::LoadBalancer', {
      Scheme: 'internal',
      LoadBalancerAttributes: Match.arrayWith([
        { Key: 'idle_timeout.timeout_seconds', Value: '900' },
        { Key: 'routing.http.drop_invalid_header_fields.enabled', Value: 'true' },
        { Key: 'access_logs.s3.enabled', Value: 'true' },
      ]),
    });
  });

  it("lets ELB deliver access logs through the log bucket's one policy (auto-delete writes to the same one)", () => {
    const [albLogs] = Object.keys(resourcesOfType(t, 'AWS::S3::Bucket')).filter((id) => id.startsWith('AlbLogs'));
    const policies = Object.values(resourcesOfType(t, 'AWS::S3::BucketPolicy')).filter(
      (p) => JSON.stringify(p.Properties?.Bucket) === JSON.stringify({ Ref: albLogs }),
    );
    expect(policies).toHaveLength(1);
    const sids = (policies[0]!.Properties!.PolicyDocument as { Statement: Array<{ Sid?: string }> }).Statement.map(
      (st) => st.Sid,
    );
    expect(sids).toEqual(expect.arrayContaining(['ElbLogDeliveryService', 'ElbLogDeliveryRegionalAccount']));
  });

  it('health-checks the gateway on /ready (models loaded) and vLLM on /health', () => {
    const tgs = Object.values(resourcesOfType(t, 'AWS::ElasticLoadBalancingV2::TargetGroup'));
    expect(tgs.map((g) => g.Properties?.Port).sort()).toEqual([DECODER_PORT, GATEWAY_PORT]);
    const byPort = Object.fromEntries(tgs.map((g) => [g.Properties?.Port as number, g.Properties]));
    expect(byPort[GATEWAY_PORT]).toMatchObject({ HealthCheckPath: '/ready', TargetType: 'ip' });
    expect(byPort[DECODER_PORT]).toMatchObject({ HealthCheckPath: '/health', TargetType: 'ip' });
  });

  it('gives the gateway the internal token from Secrets Manager, never as plain environment', () => {
    const tasks = Object.values(resourcesOfType(t, 'AWS::ECS::TaskDefinition'));
    const gateway = tasks
      .flatMap((d) => d.Properties?.ContainerDefinitions as Array<Record<string, any>>)
      .find((c) => c.Name === 'gateway')!;
    expect(gateway.Secrets.map((x: any) => x.Name)).toEqual(['SIFT_INTERNAL_TOKEN']);
    expect(JSON.stringify(gateway.Environment)).not.toContain('SIFT_INTERNAL_TOKEN');
    expect(Object.keys(resourcesOfType(t, 'AWS::SecretsManager::Secret'))).toHaveLength(1);
  });

  it('runs the encoder on the GPU the gateway task reserves, with a value the engine accepts', async () => {
    const { executionProviderFromEnv, EXECUTION_PROVIDER_ENV } = await import('../../src/encoder/executionProvider');
    const tasks = Object.values(resourcesOfType(t, 'AWS::ECS::TaskDefinition'));
    const gateway = tasks
      .flatMap((d) => d.Properties?.ContainerDefinitions as Array<Record<string, any>>)
      .find((c) => c.Name === 'gateway')!;
    expect(gateway.ResourceRequirements).toEqual([{ Type: 'GPU', Value: '1' }]);
    const env = Object.fromEntries(
      (gateway.Environment as Array<{ Name: string; Value: string }>).map((e) => [e.Name, e.Value]),
    );
    expect(env[EXECUTION_PROVIDER_ENV]).toBeDefined();
    expect(executionProviderFromEnv(env)).toBe('cuda');
    // and a CPU fallback fails /ready there (test/http/readiness.test.ts) instead of serving on the CPU
    const { configFromEnv } = await import('../../src/adapters/config');
    expect(configFromEnv(env).requireExecutionProvider).toBe('cuda');
  });

  it("has the decoder serve the catalog decoder's published copy, readable by its task role and by nothing else of models/", () => {
    expect(CATALOG.find((m) => m.id === DECODER_MODEL)?.type).toBe('decoder');
    const defs = Object.values(resourcesOfType(t, 'AWS::ECS::TaskDefinition'));
    const decoderDef = defs.find((d) =>
      (d.Properties!.ContainerDefinitions as Array<Record<string, any>>).some((c) => c.Name === 'vllm'),
    )!;
    const vllm = (decoderDef.Properties!.ContainerDefinitions as Array<Record<string, any>>)[0]!;
    const env = Object.fromEntries(
      (vllm.Environment as Array<{ Name: string; Value: unknown }>).map((e) => [e.Name, e.Value]),
    );
    // containers/decoder/entrypoint.sh syncs this prefix; training's `model` channel is the same one (lifecycle.ts)
    expect(env).toMatchObject({
      SIFT_DECODER_MODEL: DECODER_MODEL,
      SIFT_DECODER_MODEL_PREFIX: baseModelPrefix(DECODER_MODEL),
    });
    const role = (decoderDef.Properties!.TaskRoleArn as { 'Fn::GetAtt': [string, string] })['Fn::GetAtt'][0];
    const statements = Object.values(resourcesOfType(t, 'AWS::IAM::Policy'))
      .filter((p) => JSON.stringify(p.Properties?.Roles) === JSON.stringify([{ Ref: role }]))
      .flatMap((p) => (p.Properties!.PolicyDocument as { Statement: Array<Record<string, any>> }).Statement);
    const objectResources = statements
      .filter((st) => [st.Action].flat().some((a: string) => a.startsWith('s3:GetObject')))
      .flatMap((st) => [st.Resource].flat())
      .map((r) => JSON.stringify(r))
      .filter((r) => r.includes('/'));
    expect(objectResources.some((r) => r.includes(`/${baseModelPrefix(DECODER_MODEL)}*`))).toBe(true);
    expect(objectResources.filter((r) => r.includes('/models/'))).toEqual([
      expect.stringContaining(`/${baseModelPrefix(DECODER_MODEL)}*`),
    ]);
  });

  it("gives the gateway the stage's console origins, which its runtime reads as its CORS allowlist", async () => {
    // its responses pass through API Gateway's VPC-link proxy unchanged, so they carry CORS themselves
    const { configFromEnv } = await import('../../src/adapters/config');
    const gateway = Object.values(resourcesOfType(t, 'AWS::ECS::TaskDefinition'))
      .flatMap((d) => d.Properties?.ContainerDefinitions as Array<Record<string, any>>)
      .find((c) => c.Name === 'gateway')!;
    const env = Object.fromEntries(
      (gateway.Environment as Array<{ Name: string; Value: string }>).map((e) => [e.Name, e.Value]),
    );
    expect(built.config.consoleOrigins.length).toBeGreaterThan(0);
    expect(configFromEnv(env).consoleOrigins).toEqual(built.config.consoleOrigins);
  });

  it('opens no security group to the internet', () => {
    for (const sg of Object.values(resourcesOfType(t, 'AWS::EC2::SecurityGroup'))) {
      for (const rule of (sg.Properties?.SecurityGroupIngress as Array<Record<string, unknown>> | undefined) ?? []) {
        expect(rule.CidrIp).not.toBe('0.0.0.0/0');
        expect(rule.CidrIpv6).not.toBe('::/0');
      }
    }
    for (const rule of Object.values(resourcesOfType(t, 'AWS::EC2::SecurityGroupIngress'))) {
      expect(rule.Properties?.CidrIp).toBeUndefined();
    }
  });

  it('creates the VPC link (V2) the REST API integrates through', () => {
    t.resourceCountIs('AWS::ApiGatewayV2::VpcLink', 1);
  });

  it('logs rejected VPC traffic and keeps S3/DynamoDB on gateway endpoints', () => {
    t.hasResourceProperties('AWS::EC2::FlowLog', { TrafficType: 'REJECT' });
    t.resourceCountIs('AWS::EC2::VPCEndpoint', 2);
  });
});

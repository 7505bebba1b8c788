/**
 * GpuCapacity: an Auto Scaling group of ECS GPU-optimized (AL2023) instances
 * registered as an ECS capacity provider with managed scaling, so services
 * can scale tasks (and instances) down to zero.
 *
 * The instance type is a CloudFormation parameter (g5/g6/g6e sizes), so a cloud
 * team can pick the GPU at deploy time without re-synthesizing.
 */
import { CfnCondition, CfnParameter, Duration, Fn, Stack } from 'aws-cdk-lib';
import * as autoscaling from 'aws-cdk-lib/aws-autoscaling';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { GPU_INSTANCE_TYPES, type GpuInstanceType, type GpuServiceConfig, gpuFallbackTypes } from '../config';
import { GP3, gp3Refusal } from '../aws-rules';
import { acknowledge } from '../nag';

/**
 * Every wake from zero pulls the images (vLLM's is ~10 GB compressed) onto a new root volume, at
 * gp3's 125 MiB/s unless more is provisioned; 500 MiB/s fits the included 3,000 IOPS.
 */
export const GPU_ROOT_VOLUME = { iops: GP3.baselineIops, throughputMiBs: 500 } as const;

export interface GpuCapacityProps {
  /** `Encoder` or `Decoder`: names the CloudFormation parameter `<name>InstanceType`. */
  readonly name: string;
  readonly cluster: ecs.Cluster;
  readonly vpc: ec2.IVpc;
  readonly config: GpuServiceConfig;
  /** Root volume size: GPU images (CUDA, vLLM) are 10+ GB. */
  readonly rootVolumeGiB?: number;
}

export class GpuCapacity extends Construct {
  readonly instanceType: CfnParameter;
  readonly autoScalingGroup: autoscaling.AutoScalingGroup;
  readonly capacityProvider: ecs.AsgCapacityProvider;
  readonly instanceSecurityGroup: ec2.SecurityGroup;

  constructor(scope: Construct, id: string, props: GpuCapacityProps) {
    super(scope, id);
    this.instanceType = new CfnParameter(Stack.of(this), `${props.name}InstanceType`, {
      type: 'String',
      default: props.config.instanceType,
      allowedValues: [...GPU_INSTANCE_TYPES],
      description: `GPU instance type for the ${props.name.toLowerCase()} service (g5 = A10G, g6 = L4, g6e = L40S)`,
    });

    this.instanceSecurityGroup = new ec2.SecurityGroup(this, 'InstanceSg', {
      vpc: props.vpc,
      description: `Sift ${props.name} GPU container instances (tasks use awsvpc ENIs with their own groups)`,
      allowAllOutbound: true,
    });

    const role = new iam.Role(this, 'InstanceRole', {
      assumedBy: new iam.ServicePrincipal('ec2.amazonaws.com'),
      description: `Sift ${props.name} ECS container instance`,
    });
    // SSM Session Manager instead of SSH (no key pair, no inbound port).
    role.addManagedPolicy(iam.ManagedPolicy.fromAwsManagedPolicyName('AmazonSSMManagedInstanceCore'));

    const userData = ec2.UserData.forLinux();
    userData.addCommands(
      'echo ECS_ENABLE_GPU_SUPPORT=true >> /etc/ecs/ecs.config',
      // Model images are large: reuse cached layers when tasks restart on the host.
      'echo ECS_IMAGE_PULL_BEHAVIOR=prefer-cached >> /etc/ecs/ecs.config',
      'echo ECS_CONTAINER_STOP_TIMEOUT=120s >> /etc/ecs/ecs.config',
    );

    const refusal = gp3Refusal(GPU_ROOT_VOLUME.iops, GPU_ROOT_VOLUME.throughputMiBs);
    if (refusal) throw new Error(refusal);
    const launchTemplate = new ec2.LaunchTemplate(this, 'LaunchTemplate', {
      // SSM parameter resolved at deploy time; no context lookup at synth.
      machineImage: ecs.EcsOptimizedImage.amazonLinux2023(ecs.AmiHardwareType.GPU),
      instanceType: new ec2.InstanceType(this.instanceType.valueAsString),
      role,
      securityGroup: this.instanceSecurityGroup,
      userData,
      requireImdsv2: true,
      httpPutResponseHopLimit: 1,
      detailedMonitoring: true,
      blockDevices: [
        {
          deviceName: '/dev/xvda',
          volume: ec2.BlockDeviceVolume.ebs(props.rootVolumeGiB ?? 200, {
            encrypted: true,
            volumeType: ec2.EbsDeviceVolumeType.GP3,
            iops: GPU_ROOT_VOLUME.iops,
            throughput: GPU_ROOT_VOLUME.throughputMiBs,
            deleteOnTermination: true,
          }),
        },
      ],
    });

    this.autoScalingGroup = new autoscaling.AutoScalingGroup(this, 'Asg', {
      vpc: props.vpc,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      // One type in a new account's region is often out of capacity (InsufficientInstanceCapacity):
      // the group tries the parameter's type first, then its fallbacks (overrides set below).
      mixedInstancesPolicy: {
        launchTemplate,
        launchTemplateOverrides: [{ instanceType: new ec2.InstanceType(this.instanceType.valueAsString) }],
        instancesDistribution: {
          onDemandAllocationStrategy: autoscaling.OnDemandAllocationStrategy.PRIORITIZED,
          onDemandBaseCapacity: 0,
          onDemandPercentageAboveBaseCapacity: 100,
        },
      },
      minCapacity: 0,
      // One GPU task per instance: instances never exceed tasks.
      maxCapacity: Math.max(1, props.config.maxTasks),
      cooldown: Duration.minutes(5),
      defaultInstanceWarmup: Duration.minutes(5),
      healthChecks: autoscaling.HealthChecks.ec2({ gracePeriod: Duration.minutes(10) }),
      capacityRebalance: false,
      updatePolicy: autoscaling.UpdatePolicy.rollingUpdate({ maxBatchSize: 1, minInstancesInService: 0 }),
    });

    this.addFallbackTypes(props.name, props.config.instanceType);

    this.capacityProvider = new ecs.AsgCapacityProvider(this, 'CapacityProvider', {
      autoScalingGroup: this.autoScalingGroup,
      enableManagedScaling: true,
      enableManagedTerminationProtection: true,
      enableManagedDraining: true,
      targetCapacityPercent: 100,
      // AL2023 ECS AMIs read /etc/ecs/ecs.config like AL2; this selects that user data.
      machineImageType: ecs.MachineImageType.AMAZON_LINUX_2,
    });
    props.cluster.addAsgCapacityProvider(this.capacityProvider);

    acknowledge(this.autoScalingGroup, {
      id: 'AwsSolutions-EC26',
      reason:
        'The root volume is encrypted in the launch template; cdk-nag does not read launch templates inside a MixedInstancesPolicy (test/cdk/inference.test.ts checks Encrypted)',
    });
    acknowledge(this.autoScalingGroup, {
      id: 'AwsSolutions-AS3',
      reason:
        'Scaling is driven by the ECS capacity provider; failed launches are caught by the EventBridge rule and alarms in the observability stack.',
    });
    acknowledge(
      role,
      {
        id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]',
        reason: 'AWS managed policy for SSM Session Manager access to GPU hosts (replaces SSH; no inbound ports).',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'ECS agent actions added by the cluster (ecs:DiscoverPollEndpoint, ecr:GetAuthorizationToken, logs) do not support resource scoping.',
      },
      {
        id: 'AwsSolutions-IAM5[Action::ecs:Submit*]',
        reason:
          'ECS agent state reporting (SubmitContainerStateChange/TaskStateChange/AttachmentStateChanges), added by CDK and scoped to this cluster.',
      },
    );
  }

  /**
   * Fallbacks (lib/config.ts `gpuFallbackTypes`) for the type chosen at synth (context
   * `<name>InstanceType`, the parameter's default). A type given at deploy with `--parameters`
   * runs alone: a per-parameter mapping of fallbacks exhausts CloudFormation validation's budget.
   */
  private addFallbackTypes(name: string, chosen: GpuInstanceType): void {
    const stack = Stack.of(this);
    const param = this.instanceType.valueAsString;
    const isChosen = new CfnCondition(stack, `${name}InstanceTypeIsDefault`, {
      expression: Fn.conditionEquals(param, chosen),
    });
    const cfn = this.autoScalingGroup.node.defaultChild as autoscaling.CfnAutoScalingGroup;
    cfn.addPropertyOverride('MixedInstancesPolicy.LaunchTemplate.Overrides', [
      { InstanceType: param },
      ...gpuFallbackTypes(chosen).map((type) =>
        Fn.conditionIf(isChosen.logicalId, { InstanceType: type }, Fn.ref('AWS::NoValue')),
      ),
    ]);
  }
}

/**
 * Inference data plane: VPC, ECS cluster on GPU EC2 capacity, the encoder
 * service (Sift gateway + GLiNER2 on ONNX Runtime CUDA) and the decoder
 * service (vLLM with LoRA) behind one internal ALB, and the VPC link V2 the
 * REST API uses to reach it (streaming, 15-minute timeout).
 *
 *   API Gateway ──VPC link──► ALB :80   ──► encoder/gateway tasks :8080
 *                             ALB :8000 ──► decoder (vLLM) tasks :8000  (gateway only)
 */
import { Duration, RemovalPolicy, Size, Stack, type StackProps } from 'aws-cdk-lib';
import * as appscaling from 'aws-cdk-lib/aws-applicationautoscaling';
import * as apigwv2 from 'aws-cdk-lib/aws-apigatewayv2';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as cloudwatchActions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecs from 'aws-cdk-lib/aws-ecs';
import * as elbv2 from 'aws-cdk-lib/aws-elasticloadbalancingv2';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as s3 from 'aws-cdk-lib/aws-s3';
import * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import type { Construct } from 'constructs';
import type { InferenceEndpoint } from './api-stack';
import type { GpuServiceConfig, StageConfig } from './config';
import { KEEP_ALIVE, SCALE_TO_ZERO } from './aws-rules';
import { AlbAccessLogs } from './constructs/alb-access-logs';
import { GpuCapacity } from './constructs/gpu-capacity';
import { retentionDays } from './constructs/sift-function';
import { acknowledgeDataGrants, importDataRefs } from './data-refs';
import { BUCKET_PREFIXES } from './data-stack';
import { defaultConfig } from '../src/core/context';
import { baseModelPrefix } from '../src/core/modelLayout';
import { IMAGES } from './images';
import { acknowledge } from './nag';

/** The catalog decoder the vLLM service serves (the one the generation workflow writes with). */
export const DECODER_MODEL = defaultConfig.generationModel;

export interface InferenceStackProps extends StackProps {
  readonly config: StageConfig;
}

export const GATEWAY_PORT = 8080;
export const DECODER_PORT = 8000;

export class InferenceStack extends Stack {
  readonly vpc: ec2.Vpc;
  readonly cluster: ecs.Cluster;
  readonly alb: elbv2.ApplicationLoadBalancer;
  readonly albSecurityGroup: ec2.SecurityGroup;
  readonly vpcLink: apigwv2.VpcLink;
  readonly encoder: InferenceService;
  readonly decoder: InferenceService;
  readonly endpoint: InferenceEndpoint;
  /** Security group for in-VPC clients (workflow Lambdas) allowed to call the gateway. */
  readonly clientSecurityGroup: ec2.SecurityGroup;
  /** Shared secret of the gateway's internal routes (workflow Lambda → encoder service). */
  readonly internalToken: secretsmanager.Secret;

  constructor(scope: Construct, id: string, props: InferenceStackProps) {
    super(scope, id, props);
    const { config } = props;
    const data = importDataRefs(this, config.stage);
    const removalPolicy = config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;

    // ---- Network ---------------------------------------------------------------
    const flowLogs = new logs.LogGroup(this, 'VpcFlowLogs', {
      retention: retentionDays(config.logRetentionDays),
      removalPolicy,
    });
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 2,
      natGateways: config.natGateways,
      restrictDefaultSecurityGroup: true,
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: 'private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 20 },
      ],
      // S3 (models, adapters) and DynamoDB (inference records) stay off the NAT.
      gatewayEndpoints: {
        S3: { service: ec2.GatewayVpcEndpointAwsService.S3 },
        DynamoDB: { service: ec2.GatewayVpcEndpointAwsService.DYNAMODB },
      },
      flowLogs: {
        all: {
          destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs),
          trafficType: ec2.FlowLogTrafficType.REJECT,
        },
      },
    });

    this.cluster = new ecs.Cluster(this, 'Cluster', {
      vpc: this.vpc,
      containerInsightsV2: ecs.ContainerInsights.ENABLED,
    });

    // ---- Load balancer ---------------------------------------------------------
    const albLogs = new s3.Bucket(this, 'AlbLogs', {
      encryption: s3.BucketEncryption.S3_MANAGED, // ALB access logs support SSE-S3 only
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      removalPolicy,
      // CloudFormation deletes only empty buckets ("DeletionPolicy attribute"): see data-stack.ts
      autoDeleteObjects: !config.retainData,
      lifecycleRules: [
        { id: 'expire-logs', expiration: Duration.days(config.retainData ? 365 : 90) },
        { id: 'abort-incomplete-uploads', abortIncompleteMultipartUploadAfter: Duration.days(1) },
      ],
    });
    acknowledge(albLogs, {
      id: 'AwsSolutions-S1',
      reason:
        'This bucket only receives ALB access logs; logging access to the log bucket itself would add a second log bucket with no reader.',
    });

    const vpcLinkSg = new ec2.SecurityGroup(this, 'VpcLinkSg', {
      vpc: this.vpc,
      description: 'Sift API Gateway VPC link ENIs',
      allowAllOutbound: false,
    });
    this.clientSecurityGroup = new ec2.SecurityGroup(this, 'GatewayClientSg', {
      vpc: this.vpc,
      description: 'In-VPC clients of the Sift inference gateway (workflow Lambdas)',
      allowAllOutbound: true,
    });
    this.albSecurityGroup = new ec2.SecurityGroup(this, 'AlbSg', {
      vpc: this.vpc,
      description: 'Sift internal inference ALB',
      allowAllOutbound: false,
    });
    this.albSecurityGroup.addIngressRule(vpcLinkSg, ec2.Port.tcp(80), 'API Gateway VPC link to the gateway listener');
    this.albSecurityGroup.addIngressRule(
      this.clientSecurityGroup,
      ec2.Port.tcp(80),
      'Workflow Lambdas to the gateway listener',
    );
    vpcLinkSg.addEgressRule(this.albSecurityGroup, ec2.Port.tcp(80), 'VPC link to the ALB gateway listener');

    this.alb = new elbv2.ApplicationLoadBalancer(this, 'Alb', {
      vpc: this.vpc,
      internetFacing: false,
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      securityGroup: this.albSecurityGroup,
      // Streaming responses (SSE) may run up to the API Gateway 15-minute cap; every target's
      // keep-alive is longer (src/http/keepAlive.ts).
      idleTimeout: Duration.seconds(KEEP_ALIVE.albIdleTimeoutSeconds),
      dropInvalidHeaderFields: true,
      deletionProtection: config.stage === 'prod',
      http2Enabled: true,
    });
    new AlbAccessLogs(this, 'AlbAccessLogs', { loadBalancer: this.alb, bucket: albLogs, prefix: 'alb' });

    this.vpcLink = new apigwv2.VpcLink(this, 'VpcLink', {
      vpc: this.vpc,
      subnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      securityGroups: [vpcLinkSg],
      vpcLinkName: `sift-${config.stage}-inference`,
    });

    // ---- Services ----------------------------------------------------------------
    this.internalToken = new secretsmanager.Secret(this, 'InternalToken', {
      description: `Sift ${config.stage}: token of the gateway's internal routes (workflow tasks that need the engine)`,
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
      removalPolicy,
    });
    acknowledge(this.internalToken, {
      id: 'AwsSolutions-SMG4',
      reason:
        'A service-to-service token inside the VPC (behind security groups); it is rotated by replacing the secret and redeploying, as both readers load it at start.',
    });
    const decoderUrl = `http://${this.alb.loadBalancerDnsName}:${DECODER_PORT}`;
    this.encoder = new InferenceService(this, 'Encoder', {
      stage: config.stage,
      cluster: this.cluster,
      vpc: this.vpc,
      config: config.encoder,
      logRetentionDays: config.logRetentionDays,
      removalPolicy,
      image: ecs.ContainerImage.fromAsset(IMAGES.encoder.directory, IMAGES.encoder),
      containerName: 'gateway',
      port: GATEWAY_PORT,
      sharedMemoryMiB: 1024,
      healthStartPeriod: Duration.minutes(2),
      healthCheckGracePeriod: Duration.minutes(5),
      environment: {
        SIFT_STAGE: config.stage,
        SIFT_TABLE: data.tableName,
        SIFT_BUCKET: data.bucket.bucketName,
        SIFT_QUEUE_URL: data.queue.queueUrl,
        SIFT_DECODER_URL: decoderUrl,
        SIFT_MODEL_DIR: '/models',
        // the GPU each gateway task reserves runs the encoder; sessions that fall back to CPU fail /ready
        // (and are alarmed: observability-stack.ts EncoderProviderFallback) instead of serving slowly
        SIFT_ENCODER_EXECUTION_PROVIDER: 'cuda',
        SIFT_REQUIRE_EXECUTION_PROVIDER: 'cuda',
        SIFT_PRELOAD_MODELS: config.encoderPreloadModels.join(','),
        // the data plane's responses reach the console through API Gateway unchanged: they carry CORS themselves
        SIFT_CONSOLE_ORIGINS: config.consoleOrigins.join(','),
        PORT: String(GATEWAY_PORT),
        POWERTOOLS_SERVICE_NAME: 'inference',
        POWERTOOLS_METRICS_NAMESPACE: 'Sift',
      },
      secrets: { SIFT_INTERNAL_TOKEN: ecs.Secret.fromSecretsManager(this.internalToken) },
    });
    data.table.grantReadWriteData(this.encoder.taskDefinition.taskRole);
    data.bucket.grantReadWrite(this.encoder.taskDefinition.taskRole);
    data.queue.grantSendMessages(this.encoder.taskDefinition.taskRole);
    acknowledgeDataGrants(this.encoder.taskDefinition.taskRole, config.stage, {
      table: true,
      bucket: 'readwrite',
      kms: true,
    });

    this.decoder = new InferenceService(this, 'Decoder', {
      stage: config.stage,
      cluster: this.cluster,
      vpc: this.vpc,
      config: config.decoder,
      logRetentionDays: config.logRetentionDays,
      removalPolicy,
      image: ecs.ContainerImage.fromAsset(IMAGES.decoder.directory, IMAGES.decoder),
      containerName: 'vllm',
      port: DECODER_PORT,
      // vLLM workers share tensors through /dev/shm.
      sharedMemoryMiB: 8192,
      healthStartPeriod: Duration.minutes(10),
      healthCheckGracePeriod: Duration.minutes(15),
      environment: {
        SIFT_STAGE: config.stage,
        SIFT_BUCKET: data.bucket.bucketName,
        // entrypoint.sh syncs the published base weights (`sift models publish`) from here and serves
        // them under this name; training reads the same prefix as its `model` channel (lifecycle.ts)
        SIFT_DECODER_MODEL: DECODER_MODEL,
        SIFT_DECODER_MODEL_PREFIX: baseModelPrefix(DECODER_MODEL),
        SIFT_LORA_CACHE_DIR: '/tmp/sift-lora',
        // entrypoint.sh → VLLM_HTTP_TIMEOUT_KEEP_ALIVE (uvicorn's default is 5 s)
        SIFT_KEEP_ALIVE_SECONDS: String(KEEP_ALIVE.backendKeepAliveSeconds),
      },
    });
    // The decoder only reads its own base weights and the LoRA adapters written by training jobs.
    data.bucket.grantRead(this.decoder.taskDefinition.taskRole, `${baseModelPrefix(DECODER_MODEL)}*`);
    data.bucket.grantRead(this.decoder.taskDefinition.taskRole, `${BUCKET_PREFIXES.jobs}*`);
    acknowledgeDataGrants(this.decoder.taskDefinition.taskRole, config.stage, {
      bucket: 'read',
      bucketPrefixes: [baseModelPrefix(DECODER_MODEL), BUCKET_PREFIXES.jobs],
    });

    // Gateway listener (API Gateway and workflow Lambdas) and decoder listener (gateway only).
    const gatewayListener = this.alb.addListener('Gateway', {
      port: 80,
      protocol: elbv2.ApplicationProtocol.HTTP,
      open: false,
    });
    // /ready: traffic only once the stores answer and the preloaded encoder is in memory
    this.encoder.attach(gatewayListener, {
      interval: Duration.seconds(15),
      deregistrationDelay: Duration.seconds(60),
      healthPath: '/ready',
    });
    const decoderListener = this.alb.addListener('DecoderListener', {
      port: DECODER_PORT,
      protocol: elbv2.ApplicationProtocol.HTTP,
      open: false,
    });
    this.decoder.attach(decoderListener, {
      interval: Duration.seconds(30),
      deregistrationDelay: Duration.seconds(120),
    });

    this.albSecurityGroup.addIngressRule(
      this.encoder.serviceSecurityGroup,
      ec2.Port.tcp(DECODER_PORT),
      'Gateway to the decoder listener',
    );
    this.albSecurityGroup.addEgressRule(
      this.encoder.serviceSecurityGroup,
      ec2.Port.tcp(GATEWAY_PORT),
      'ALB to gateway tasks',
    );
    this.albSecurityGroup.addEgressRule(
      this.decoder.serviceSecurityGroup,
      ec2.Port.tcp(DECODER_PORT),
      'ALB to decoder tasks',
    );
    this.encoder.serviceSecurityGroup.addIngressRule(
      this.albSecurityGroup,
      ec2.Port.tcp(GATEWAY_PORT),
      'ALB to gateway tasks',
    );
    this.decoder.serviceSecurityGroup.addIngressRule(
      this.albSecurityGroup,
      ec2.Port.tcp(DECODER_PORT),
      'ALB to decoder tasks',
    );

    this.addScaleToZero();

    this.endpoint = {
      vpcLinkId: this.vpcLink.vpcLinkId,
      loadBalancerArn: this.alb.loadBalancerArn,
      loadBalancerDnsName: this.alb.loadBalancerDnsName,
    };
  }

  /**
   * Leaving zero and going back to it. At zero tasks a target group reports no RequestCount (the
   * ALB answers 503 itself), so the wake-up reads the load balancer's HTTPCode_ELB_503_Count, which
   * is published at zero targets (lib/aws-rules.ts, ALB_METRICS). The two services share the ALB,
   * so the target groups' own request counts tell whose listener answered the 503s:
   * - the gateway wakes on 503s in a minute no request reached a gateway task;
   * - the decoder wakes on 503s in a minute the gateway served requests (its only client) and none
   *   reached the decoder. A cold chat request therefore wakes the gateway first, then, on the
   *   client's retry, the decoder.
   * Each goes back to its minimum after SCALE_TO_ZERO.idleMinutes without requests, 503s or a task
   * still booting.
   */
  private addScaleToZero(): void {
    const period = Duration.minutes(1);
    const elb503 = this.alb.metrics.httpCodeElb(elbv2.HttpCodeElb.ELB_503_COUNT, { period, statistic: 'Sum' });
    const gateway = this.encoder.targetGroup!.metrics.requestCount({ period, statistic: 'Sum' });
    const decoder = this.decoder.targetGroup!.metrics.requestCount({ period, statistic: 'Sum' });
    // each alarm names only the metrics its expression reads
    const expr = (expression: string, label: string, more: Record<string, cloudwatch.IMetric> = {}) => {
      const all: Record<string, cloudwatch.IMetric> = { e503: elb503, gw: gateway, llm: decoder, ...more };
      const usingMetrics = Object.fromEntries(
        Object.entries(all).filter(([id]) => new RegExp(`\\b${id}\\b`).test(expression)),
      );
      return new cloudwatch.MathExpression({ expression, label, period, usingMetrics });
    };
    this.encoder.wakeOn(
      expr('IF(FILL(e503, 0) > 0 AND FILL(gw, 0) == 0, 1, 0)', 'ALB 503s while no gateway task served'),
      'Sift gateway wake-up: the ALB answered 503 and no gateway task served a request (the gateway service is at zero)',
    );
    this.decoder.wakeOn(
      expr(
        'IF(FILL(e503, 0) > 0 AND FILL(gw, 0) > 0 AND FILL(llm, 0) == 0, 1, 0)',
        'ALB 503s while the gateway served and the decoder did not',
      ),
      'Sift decoder wake-up: the gateway served requests, the ALB answered 503 and no decoder task served (the decoder service is at zero)',
    );
    // Boot is activity (lib/aws-rules.ts, SCALE_TO_ZERO): until the woken task is RUNNING nothing
    // else shows it, and the idle alarm (in ALARM since the last sleep) would set it back to 0.
    // desired: the minute's highest, running: its lowest, so a minute a task came up still counts.
    const tasks = (s: InferenceService) => {
      const dims = { ClusterName: this.cluster.clusterName, ServiceName: s.service.serviceName };
      const count = (metricName: string, statistic: string) =>
        new cloudwatch.Metric({
          namespace: 'ECS/ContainerInsights',
          metricName,
          dimensionsMap: dims,
          period,
          statistic,
        });
      return { desired: count('DesiredTaskCount', 'Maximum'), running: count('RunningTaskCount', 'Minimum') };
    };
    // a flag, not the difference: during a deployment running exceeds desired, which must not cancel requests
    const booting = 'IF(FILL(desired, 0) > FILL(running, 0), 1, 0)';
    this.encoder.sleepWhenIdle(
      expr(
        `FILL(gw, 0) + FILL(e503, 0) + ${booting}`,
        'gateway requests + ALB 503s + tasks booting',
        tasks(this.encoder),
      ),
      'Sift gateway idle: no request, no 503 and no task booting for the idle window',
    );
    this.decoder.sleepWhenIdle(
      expr(
        `FILL(llm, 0) + FILL(e503, 0) + ${booting}`,
        'decoder requests + ALB 503s + tasks booting',
        tasks(this.decoder),
      ),
      'Sift decoder idle: no request, no 503 and no task booting for the idle window',
    );
  }
}

interface InferenceServiceProps {
  readonly stage: string;
  readonly cluster: ecs.Cluster;
  readonly vpc: ec2.IVpc;
  readonly config: GpuServiceConfig;
  readonly image: ecs.ContainerImage;
  readonly containerName: string;
  readonly port: number;
  readonly sharedMemoryMiB: number;
  readonly healthStartPeriod: Duration;
  readonly healthCheckGracePeriod: Duration;
  readonly environment: Record<string, string>;
  readonly secrets?: Record<string, ecs.Secret>;
  readonly logRetentionDays: number;
  readonly removalPolicy: RemovalPolicy;
}

/** One GPU service: its capacity provider, task definition, service and scaling. */
class InferenceService extends GpuCapacity {
  readonly taskDefinition: ecs.Ec2TaskDefinition;
  readonly service: ecs.Ec2Service;
  readonly logGroup: logs.LogGroup;
  readonly serviceSecurityGroup: ec2.SecurityGroup;
  private readonly serviceProps: InferenceServiceProps;
  targetGroup?: elbv2.ApplicationTargetGroup;
  scaling?: ecs.ScalableTaskCount;

  constructor(scope: Construct, id: string, props: InferenceServiceProps) {
    super(scope, id, { name: id, cluster: props.cluster, vpc: props.vpc, config: props.config });
    this.serviceProps = props;

    this.logGroup = new logs.LogGroup(this, 'Logs', {
      retention: retentionDays(props.logRetentionDays),
      removalPolicy: props.removalPolicy,
    });
    this.taskDefinition = new ecs.Ec2TaskDefinition(this, 'Task', {
      networkMode: ecs.NetworkMode.AWS_VPC,
    });
    this.taskDefinition.addContainer(props.containerName, {
      image: props.image,
      gpuCount: 1,
      // Sized from host RAM (not VRAM); the hard limit is left to the host.
      memoryReservationMiB: props.config.memoryReservationMiB,
      portMappings: [{ containerPort: props.port, protocol: ecs.Protocol.TCP }],
      environment: props.environment,
      ...(props.secrets ? { secrets: props.secrets } : {}),
      linuxParameters: new ecs.LinuxParameters(this, 'Linux', {
        initProcessEnabled: true,
        sharedMemorySize: props.sharedMemoryMiB,
      }),
      healthCheck: {
        command: ['CMD-SHELL', `curl -fsS http://localhost:${props.port}/health || exit 1`],
        interval: Duration.seconds(30),
        timeout: Duration.seconds(5),
        retries: 3,
        startPeriod: props.healthStartPeriod,
      },
      logging: ecs.LogDrivers.awsLogs({
        logGroup: this.logGroup,
        streamPrefix: props.containerName,
        mode: ecs.AwsLogDriverMode.NON_BLOCKING,
        maxBufferSize: Size.mebibytes(25),
      }),
      stopTimeout: Duration.seconds(120),
      essential: true,
    });

    this.serviceSecurityGroup = new ec2.SecurityGroup(this, 'TaskSg', {
      vpc: props.vpc,
      description: `Sift ${id} tasks`,
      allowAllOutbound: true,
    });

    this.service = new ecs.Ec2Service(this, 'Service', {
      cluster: props.cluster,
      taskDefinition: this.taskDefinition,
      desiredCount: props.config.minTasks,
      minHealthyPercent: 100,
      maxHealthyPercent: 200,
      capacityProviderStrategies: [{ capacityProvider: this.capacityProvider.capacityProviderName, weight: 1 }],
      circuitBreaker: { enable: true, rollback: true },
      healthCheckGracePeriod: props.healthCheckGracePeriod,
      securityGroups: [this.serviceSecurityGroup],
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      placementStrategies: [ecs.PlacementStrategy.spreadAcross(ecs.BuiltInAttributes.AVAILABILITY_ZONE)],
      propagateTags: ecs.PropagatedTagSource.SERVICE,
      enableECSManagedTags: true,
    });

    acknowledge(
      this.taskDefinition,
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'Task execution role: ecr:GetAuthorizationToken has no resource-level permissions (image pulls themselves are scoped to the asset repository).',
      },
      {
        id: 'AwsSolutions-ECS2',
        reason:
          'Environment variables carry only resource names, URLs and the stage; the one secret (the internal token) is injected from Secrets Manager.',
      },
    );
  }

  /** Registers the service behind a listener and enables request-count autoscaling. */
  attach(
    listener: elbv2.ApplicationListener,
    opts: { interval: Duration; deregistrationDelay: Duration; healthPath?: string },
  ): void {
    const p = this.serviceProps;
    this.targetGroup = listener.addTargets(`${p.containerName}Targets`, {
      port: p.port,
      protocol: elbv2.ApplicationProtocol.HTTP,
      targets: [this.service.loadBalancerTarget({ containerName: p.containerName, containerPort: p.port })],
      deregistrationDelay: opts.deregistrationDelay,
      healthCheck: {
        path: opts.healthPath ?? '/health',
        interval: opts.interval,
        timeout: Duration.seconds(5),
        healthyThresholdCount: 2,
        unhealthyThresholdCount: 3,
        healthyHttpCodes: '200',
      },
    });
    this.scaling = this.service.autoScaleTaskCount({ minCapacity: p.config.minTasks, maxCapacity: p.config.maxTasks });
    // Above one task: follow the request rate. (Target tracking does nothing while the metric is
    // missing, so it never leaves zero and never scales an idle service in: see wakeOn/sleepWhenIdle.)
    this.scaling.scaleOnRequestCount('RequestsPerTask', {
      requestsPerTarget: p.config.requestsPerTarget,
      targetGroup: this.targetGroup,
      scaleInCooldown: Duration.minutes(10),
      scaleOutCooldown: Duration.minutes(1),
    });
  }

  /**
   * Sets the service to one task whenever `signal` (a 1-minute metric or expression) is ≥ 1. The
   * adjustment is an exact capacity of 1, not +1: the alarm re-invokes its action every minute it
   * stays in ALARM (lib/aws-rules.ts, SCALE_TO_ZERO), and a 503 from the ALB means this service
   * has no routable task, so "1" never lowers a running service.
   */
  wakeOn(signal: cloudwatch.IMetric, description: string): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, 'WakeAlarm', {
      metric: signal,
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: 1,
      datapointsToAlarm: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      alarmDescription: description,
    });
    return this.setsCapacity(alarm, 'Wake', { lowerBound: 0, adjustment: 1 }, Duration.minutes(1));
  }

  /**
   * Takes the service to its minimum (0 in dev/staging) after SCALE_TO_ZERO.idleMinutes whose
   * `activity` is below 1. No data is idle (treated as breaching); `activity` must include the
   * wake-up signal so that a wake-up ends the idle alarm instead of being undone by it.
   */
  sleepWhenIdle(activity: cloudwatch.IMetric, description: string): cloudwatch.Alarm {
    const alarm = new cloudwatch.Alarm(this, 'IdleAlarm', {
      metric: activity,
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
      evaluationPeriods: SCALE_TO_ZERO.idleMinutes,
      datapointsToAlarm: SCALE_TO_ZERO.idleMinutes,
      treatMissingData: cloudwatch.TreatMissingData.BREACHING,
      alarmDescription: description,
    });
    // the scalable target's minimum bounds it: prod (min 1) keeps one task
    return this.setsCapacity(alarm, 'Sleep', { upperBound: 0, adjustment: 0 }, Duration.minutes(5));
  }

  /** `alarm` sets the service to an exact task count (a step-scaling action named `id`). */
  private setsCapacity(
    alarm: cloudwatch.Alarm,
    id: string,
    step: appscaling.AdjustmentTier,
    cooldown: Duration,
  ): cloudwatch.Alarm {
    const action = new appscaling.StepScalingAction(this, id, {
      scalingTarget: this.scaling!,
      adjustmentType: appscaling.AdjustmentType.EXACT_CAPACITY,
      metricAggregationType: appscaling.MetricAggregationType.MAXIMUM,
      cooldown,
    });
    action.addAdjustment(step);
    alarm.addAlarmAction(new cloudwatchActions.ApplicationScalingAction(action));
    return alarm;
  }
}

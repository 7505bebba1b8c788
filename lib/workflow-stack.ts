/**
 * Training and workflows: the SageMaker training role and image, the Step
 * Functions state machines (ASL from `lib/workflows/definitions.ts`, the same
 * objects local mode runs), the workflow-task Lambda they call, and the
 * EventBridge rule that keeps job records in step with SageMaker.
 */
import { ArnFormat, type CfnElement, Duration, RemovalPolicy, Stack, type StackProps } from 'aws-cdk-lib';
import type * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as logs from 'aws-cdk-lib/aws-logs';
import type * as secretsmanager from 'aws-cdk-lib/aws-secretsmanager';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct, IConstruct } from 'constructs';
import type { WorkflowHandles } from './api-stack';
import type { StageConfig } from './config';
import { SiftFunction, retentionDays } from './constructs/sift-function';
import { acknowledgeDataGrants, importDataRefs } from './data-refs';
import { BUCKET_PREFIXES } from './data-stack';
import { IMAGES } from './images';
import { acknowledge } from './nag';
import { acceptsVolumeKmsKey } from './aws-rules';
import {
  PLACEHOLDERS,
  WORKFLOWS,
  type Placeholder,
  type TrainingOptions,
  type WorkflowName,
} from './workflows/definitions';

export interface WorkflowStackProps extends StackProps {
  readonly config: StageConfig;
  /** In-VPC access to the inference gateway (generation and evaluation shards). */
  readonly inference: {
    readonly vpc: ec2.IVpc;
    readonly clientSecurityGroup: ec2.ISecurityGroup;
    readonly gatewayUrl: string;
    /** Token of the gateway's internal routes (evaluation shards run there, next to the engine). */
    readonly internalToken: secretsmanager.ISecret;
  };
}

/**
 * The training instance type is fixed per stage (SIFT_TRAINING_INSTANCE_TYPE of the task function,
 * which PrepareTraining passes on), so whether its volume takes a KMS key is decided here, at synth.
 */
export function trainingOptions(config: StageConfig): TrainingOptions {
  return { volumeKmsKey: acceptsVolumeKmsKey(config.trainingInstanceType) };
}

export function trainingJobPrefix(stage: string): string {
  return `sift-${stage}-`;
}

export class WorkflowStack extends Stack {
  readonly taskFunction: SiftFunction;
  readonly trainingEventsFunction: SiftFunction;
  readonly trainingRole: iam.Role;
  readonly trainingImage: ecrAssets.DockerImageAsset;
  readonly stateMachines: Record<WorkflowName, sfn.StateMachine>;
  readonly handles: WorkflowHandles;
  readonly trainingStateRule: events.Rule;
  readonly trainingEventsDlq: sqs.Queue;

  constructor(scope: Construct, id: string, props: WorkflowStackProps) {
    super(scope, id, props);
    const { config } = props;
    const data = importDataRefs(this, config.stage);
    const prefix = trainingJobPrefix(config.stage);
    const removalPolicy = config.retainData ? RemovalPolicy.RETAIN : RemovalPolicy.DESTROY;
    const common = { stage: config.stage, logRetentionDays: config.logRetentionDays, retainLogs: config.retainData };

    // ---- SageMaker training role and image --------------------------------------
    this.trainingImage = new ecrAssets.DockerImageAsset(this, 'TrainingImage', IMAGES.training);
    this.trainingRole = new iam.Role(this, 'TrainingRole', {
      assumedBy: new iam.ServicePrincipal('sagemaker.amazonaws.com'),
      description: `Sift ${config.stage} SageMaker training jobs`,
    });
    // training.prepare copies the rows into jobs/<team>/<job>/input/; the job writes its output and
    // checkpoints under the same prefix, and continues from checkpoints of earlier jobs there
    data.bucket.grantRead(this.trainingRole, `${BUCKET_PREFIXES.models}*`);
    data.bucket.grantReadWrite(this.trainingRole, `${BUCKET_PREFIXES.jobs}*`);
    this.trainingImage.repository.grantPull(this.trainingRole);
    this.trainingRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'VolumeAndOutputEncryption',
        actions: ['kms:CreateGrant'],
        resources: [data.key.keyArn],
        conditions: { Bool: { 'kms:GrantIsForAWSResource': 'true' } },
      }),
    );
    this.trainingRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'TrainingLogs',
        actions: ['logs:CreateLogGroup', 'logs:CreateLogStream', 'logs:PutLogEvents', 'logs:DescribeLogStreams'],
        resources: [
          this.formatArn({
            service: 'logs',
            resource: 'log-group',
            resourceName: '/aws/sagemaker/TrainingJobs',
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
          this.formatArn({
            service: 'logs',
            resource: 'log-group',
            resourceName: '/aws/sagemaker/TrainingJobs:log-stream:*',
            arnFormat: ArnFormat.COLON_RESOURCE_NAME,
          }),
        ],
      }),
    );
    this.trainingRole.addToPolicy(
      new iam.PolicyStatement({
        sid: 'TrainingMetrics',
        actions: ['cloudwatch:PutMetricData'],
        resources: ['*'],
        conditions: { StringLike: { 'cloudwatch:namespace': '/aws/sagemaker/*' } },
      }),
    );
    this.trainingRole.addToPolicy(
      new iam.PolicyStatement({ sid: 'EcrLogin', actions: ['ecr:GetAuthorizationToken'], resources: ['*'] }),
    );
    acknowledgeDataGrants(this.trainingRole, config.stage, {
      bucket: 'readwrite',
      bucketPrefixes: [BUCKET_PREFIXES.models, BUCKET_PREFIXES.jobs],
      kms: true,
    });
    acknowledge(
      this.trainingRole,
      {
        id: 'AwsSolutions-IAM5[Resource::*]',
        reason:
          'ecr:GetAuthorizationToken has no resource scope; cloudwatch:PutMetricData is limited by a namespace condition to /aws/sagemaker/*.',
      },
      {
        id: 'AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/TrainingJobs:log-stream:*]',
        reason:
          'SageMaker writes one log stream per training host, named at runtime, in its fixed /aws/sagemaker/TrainingJobs group.',
      },
    );

    // ---- Lambda functions ---------------------------------------------------------
    this.taskFunction = new SiftFunction(this, 'Tasks', {
      ...common,
      entry: 'workflow.ts',
      service: 'workflow',
      description: 'Sift Step Functions tasks (training, generation, evaluation, adaptive loop)',
      memorySize: 1024,
      timeout: Duration.minutes(15),
      vpc: props.inference.vpc,
      vpcSubnets: { subnetGroupName: 'private' },
      securityGroups: [props.inference.clientSecurityGroup],
      environment: {
        SIFT_TABLE: data.tableName,
        SIFT_BUCKET: data.bucket.bucketName,
        SIFT_QUEUE_URL: data.queue.queueUrl,
        SIFT_INFERENCE_URL: props.inference.gatewayUrl,
        SIFT_INTERNAL_TOKEN_SECRET_ARN: props.inference.internalToken.secretArn,
        SIFT_TRAINING_JOB_PREFIX: prefix,
        SIFT_TRAINING_INSTANCE_TYPE: config.trainingInstanceType,
        SIFT_TRAINING_MAX_RUNTIME_SECONDS: String(config.trainingMaxRuntimeSeconds),
      },
    });
    props.inference.internalToken.grantRead(this.taskFunction.fn);
    data.table.grantReadWriteData(this.taskFunction.fn);
    data.bucket.grantReadWrite(this.taskFunction.fn);
    data.queue.grantSendMessages(this.taskFunction.fn);
    acknowledgeDataGrants(this.taskFunction.role, config.stage, { table: true, bucket: 'readwrite', kms: true });

    this.trainingEventsFunction = new SiftFunction(this, 'TrainingEvents', {
      ...common,
      entry: 'training-events.ts',
      service: 'training-events',
      description: 'Sift: updates job records on SageMaker training job state changes',
      memorySize: 256,
      timeout: Duration.seconds(30),
      environment: { SIFT_TABLE: data.tableName, SIFT_TRAINING_JOB_PREFIX: prefix },
    });
    // a Failed/Stopped event ends the job through the core, which bills it: the usage batch puts its
    // per-request row (BatchWriteItem) and, for a replay refused as stale, a PutItem (core/billing/)
    data.table.grant(
      this.trainingEventsFunction.fn,
      'dynamodb:GetItem',
      'dynamodb:UpdateItem',
      'dynamodb:Query',
      'dynamodb:PutItem',
      'dynamodb:BatchWriteItem',
    );
    data.key.grantEncryptDecrypt(this.trainingEventsFunction.fn);
    acknowledgeDataGrants(this.trainingEventsFunction.role, config.stage, { table: true, kms: true });

    this.trainingEventsDlq = new sqs.Queue(this, 'TrainingEventsDlq', {
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
      retentionPeriod: Duration.days(14),
      removalPolicy,
    });
    const eventsDlq = this.trainingEventsDlq;
    acknowledge(eventsDlq, {
      id: 'AwsSolutions-SQS3',
      reason:
        'This queue is the dead-letter target of the training-state EventBridge rule; it has no consumer and is alarmed on depth.',
    });
    this.trainingStateRule = new events.Rule(this, 'TrainingStateChange', {
      description: `Sift ${config.stage}: SageMaker training job state changes -> job records`,
      eventPattern: {
        source: ['aws.sagemaker'],
        detailType: ['SageMaker Training Job State Change'],
        detail: { TrainingJobName: events.Match.prefix(prefix) },
      },
      targets: [
        new targets.LambdaFunction(this.trainingEventsFunction.fn, {
          deadLetterQueue: eventsDlq,
          retryAttempts: 8,
          maxEventAge: Duration.hours(6),
        }),
      ],
    });

    // ---- State machines -----------------------------------------------------------
    const substitutions: Partial<Record<Placeholder, string>> = {
      [PLACEHOLDERS.taskFunction]: this.taskFunction.fn.functionArn,
      [PLACEHOLDERS.trainingImage]: this.trainingImage.imageUri,
      [PLACEHOLDERS.trainingRole]: this.trainingRole.roleArn,
      [PLACEHOLDERS.dataKey]: data.key.keyArn,
      [PLACEHOLDERS.stage]: config.stage,
    };
    const make = (name: WorkflowName, extra: Partial<Record<Placeholder, string>> = {}): sfn.StateMachine => {
      const id = name.charAt(0).toUpperCase() + name.slice(1);
      const logGroup = new logs.LogGroup(this, `${id}Logs`, {
        // Vended-logs group names must start with /aws/vendedlogs/ to avoid resource-policy size limits.
        logGroupName: `/aws/vendedlogs/states/sift-${config.stage}-${name}`,
        retention: retentionDays(config.logRetentionDays),
        removalPolicy,
      });
      const sm = new sfn.StateMachine(this, id, {
        stateMachineName: `sift-${config.stage}-${name}`,
        definitionBody: sfn.DefinitionBody.fromString(JSON.stringify(WORKFLOWS[name](trainingOptions(config)))),
        definitionSubstitutions: { ...substitutions, ...extra } as Record<string, string>,
        stateMachineType: sfn.StateMachineType.STANDARD,
        tracingEnabled: true,
        logs: { destination: logGroup, level: sfn.LogLevel.ALL, includeExecutionData: false },
      });
      this.taskFunction.fn.grantInvoke(sm);
      return sm;
    };
    const training = make('training');
    const evaluation = make('evaluation');
    const generation = make('generation');
    // the adaptive loop starts its candidate and evaluations through the task function and polls them
    const adaptive = make('adaptive');
    this.stateMachines = { training, evaluation, generation, adaptive };

    // The adaptive loop's tasks start the candidate's training and its evaluations (as the API does).
    // ARNs from the names: referencing the machines would be a cycle (each machine invokes this function).
    const machineArn = (name: WorkflowName) =>
      this.formatArn({
        service: 'states',
        resource: 'stateMachine',
        resourceName: `sift-${config.stage}-${name}`,
        arnFormat: ArnFormat.COLON_RESOURCE_NAME,
      });
    this.taskFunction.fn.addEnvironment('SIFT_TRAINING_STATE_MACHINE_ARN', machineArn('training'));
    this.taskFunction.fn.addEnvironment('SIFT_EVALUATION_STATE_MACHINE_ARN', machineArn('evaluation'));
    this.taskFunction.fn.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'StartAdaptiveChildren',
        actions: ['states:StartExecution'],
        resources: [machineArn('training'), machineArn('evaluation')],
      }),
    );

    // Training: the IAM that tasks.SageMakerCreateTrainingJob would add (CustomState-style ASL grants nothing).
    const trainingJobs = this.formatArn({ service: 'sagemaker', resource: 'training-job', resourceName: `${prefix}*` });
    training.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'RunTrainingJobs',
        actions: [
          'sagemaker:CreateTrainingJob',
          'sagemaker:DescribeTrainingJob',
          'sagemaker:StopTrainingJob',
          'sagemaker:AddTags',
          'sagemaker:ListTags',
        ],
        resources: [trainingJobs],
      }),
    );
    training.addToRolePolicy(
      new iam.PolicyStatement({
        sid: 'PassTrainingRole',
        actions: ['iam:PassRole'],
        resources: [this.trainingRole.roleArn],
        conditions: { StringEquals: { 'iam:PassedToService': 'sagemaker.amazonaws.com' } },
      }),
    );
    training.addToRolePolicy(syncRuleStatement(this, 'StepFunctionsGetEventsForSageMakerTrainingJobsRule'));

    acknowledge(training, {
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/${prefix}*]`,
      reason: `Training job names are generated per job at runtime; the role is limited to jobs named ${prefix}*.`,
    });
    for (const sm of Object.values(this.stateMachines)) {
      acknowledge(
        sm,
        {
          id: 'AwsSolutions-IAM5[Resource::*]',
          reason:
            'X-Ray tracing and CloudWatch Logs delivery (logs:*LogDelivery, DescribeResourcePolicies) for state machines do not support resource-level permissions.',
        },
        {
          id: `AwsSolutions-IAM5[Resource::<${logicalId(this.taskFunction.fn)}.Arn>:*]`,
          reason:
            'CDK grantInvoke adds the function ARN and its versions/aliases (:*) of the one workflow-task function.',
        },
      );
    }

    if (config.adaptiveSchedule !== 'off') {
      new events.Rule(this, 'AdaptiveSchedule', {
        description: `Sift ${config.stage}: adaptive loop`,
        schedule: events.Schedule.expression(config.adaptiveSchedule),
        targets: [
          new targets.SfnStateMachine(adaptive, { input: events.RuleTargetInput.fromObject({ trigger: 'schedule' }) }),
        ],
      });
    }

    this.handles = { training, generation, evaluation, adaptive, trainingJobPrefix: prefix };
  }
}

/** Logical id of a construct's CloudFormation resource (as cdk-nag prints it). */
function logicalId(construct: IConstruct): string {
  const stack = Stack.of(construct);
  return stack.resolve(stack.getLogicalId(construct.node.defaultChild as CfnElement)) as string;
}

function syncRuleStatement(stack: Stack, ruleName: string): iam.PolicyStatement {
  return new iam.PolicyStatement({
    sid: 'SyncIntegrationRule',
    actions: ['events:PutTargets', 'events:PutRule', 'events:DescribeRule'],
    resources: [stack.formatArn({ service: 'events', resource: 'rule', resourceName: ruleName })],
  });
}

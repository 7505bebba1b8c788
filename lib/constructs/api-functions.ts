/**
 * The API stack's Lambda functions and their grants: the control plane (`lambdas/api.ts`, one
 * router behind `{proxy+}`), the API-key authorizer and the SQS worker.
 */
import { ArnFormat, Duration, Stack } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambdaEvents from 'aws-cdk-lib/aws-lambda-event-sources';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import type { Construct } from 'constructs';
import { acknowledgeDataGrants, type DataRefs } from '../data-refs';
import { acknowledge } from '../nag';
import { ResourceGroup } from './resource-group';
import { SiftFunction } from './sift-function';

/** Workflows the control plane starts (from the workflow stack). */
export interface WorkflowHandles {
  readonly training: sfn.IStateMachine;
  readonly generation: sfn.IStateMachine;
  readonly evaluation: sfn.IStateMachine;
  readonly adaptive: sfn.IStateMachine;
  /** Name prefix of SageMaker training jobs started by the training workflow. */
  readonly trainingJobPrefix: string;
}

export interface ApiFunctionsProps {
  readonly stage: string;
  readonly data: DataRefs;
  readonly workflows?: WorkflowHandles;
  /** Origins of the web console allowed by CORS (the control plane echoes them). */
  readonly consoleOrigins: readonly string[];
  readonly logRetentionDays: number;
  readonly retainLogs: boolean;
}

export class ApiFunctions extends ResourceGroup {
  readonly apiFunction: SiftFunction;
  readonly authorizerFunction: SiftFunction;
  readonly workerFunction: SiftFunction;

  constructor(scope: Construct, id: string, props: ApiFunctionsProps) {
    super(scope, id);
    const { data, workflows, stage } = props;
    const common = { stage, logRetentionDays: props.logRetentionDays, retainLogs: props.retainLogs };
    const workflowEnv: Record<string, string> = workflows
      ? {
          SIFT_TRAINING_STATE_MACHINE_ARN: workflows.training.stateMachineArn,
          SIFT_GENERATION_STATE_MACHINE_ARN: workflows.generation.stateMachineArn,
          SIFT_EVALUATION_STATE_MACHINE_ARN: workflows.evaluation.stateMachineArn,
          SIFT_ADAPTIVE_STATE_MACHINE_ARN: workflows.adaptive.stateMachineArn,
        }
      : {};
    this.apiFunction = new SiftFunction(this, 'Api', {
      ...common,
      entry: 'api.ts',
      service: 'api',
      description: 'Sift control plane (keys, datasets, jobs, evaluations, projects, history, billing)',
      memorySize: 1024,
      timeout: Duration.seconds(29),
      environment: {
        SIFT_TABLE: data.tableName,
        SIFT_BUCKET: data.bucket.bucketName,
        SIFT_QUEUE_URL: data.queue.queueUrl,
        SIFT_CONSOLE_ORIGINS: props.consoleOrigins.join(','),
        ...workflowEnv,
      },
    });
    data.table.grantReadWriteData(this.apiFunction.fn);
    data.bucket.grantReadWrite(this.apiFunction.fn);
    data.queue.grantSendMessages(this.apiFunction.fn);
    if (workflows) {
      const w = workflows;
      for (const sm of [w.training, w.generation, w.evaluation, w.adaptive])
        sm.grantStartExecution(this.apiFunction.fn);
      this.apiFunction.role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'StopAndReadTrainingJobs',
          actions: ['sagemaker:StopTrainingJob', 'sagemaker:DescribeTrainingJob'],
          resources: [
            Stack.of(this).formatArn({
              service: 'sagemaker',
              resource: 'training-job',
              resourceName: `${w.trainingJobPrefix}*`,
            }),
          ],
        }),
      );
      this.apiFunction.role.addToPolicy(
        new iam.PolicyStatement({
          sid: 'ReadTrainingLogs',
          actions: ['logs:FilterLogEvents', 'logs:GetLogEvents', 'logs:StartLiveTail'],
          resources: [
            Stack.of(this).formatArn({
              service: 'logs',
              resource: 'log-group',
              resourceName: '/aws/sagemaker/TrainingJobs',
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
            Stack.of(this).formatArn({
              service: 'logs',
              resource: 'log-group',
              resourceName: `/aws/sagemaker/TrainingJobs:log-stream:${w.trainingJobPrefix}*`,
              arnFormat: ArnFormat.COLON_RESOURCE_NAME,
            }),
          ],
        }),
      );
    }

    if (workflows) {
      const prefix = workflows.trainingJobPrefix;
      acknowledge(
        this.apiFunction.role,
        {
          id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:sagemaker:<AWS::Region>:<AWS::AccountId>:training-job/${prefix}*]`,
          reason: `Stop/describe for training jobs started by the Sift training workflow; names are per job and always start with ${prefix}.`,
        },
        {
          id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:logs:<AWS::Region>:<AWS::AccountId>:log-group:/aws/sagemaker/TrainingJobs:log-stream:${prefix}*]`,
          reason:
            'Training log streams are named <job>/algo-<n>-<ts> by SageMaker; reads are limited to Sift job streams.',
        },
      );
    }

    this.authorizerFunction = new SiftFunction(this, 'Authorizer', {
      ...common,
      entry: 'authorizer.ts',
      service: 'authorizer',
      description: "Sift API-key authorizer (sha256 of the key looked up in DynamoDB; names the team's usage plan key)",
      memorySize: 256,
      // a team's first request also creates its usage plan key (three API Gateway calls)
      timeout: Duration.seconds(10),
      environment: { SIFT_TABLE: data.tableName },
    });
    // The authorizer reads the key and team items, stamps last_used_at, and records a team's usage
    // plan key on first use: item actions on the table itself (no index access), plus its KMS key.
    this.authorizerFunction.role.addToPolicy(
      new iam.PolicyStatement({
        sid: 'ReadApiKeyItems',
        actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:PutItem'],
        resources: [data.table.tableArn],
      }),
    );
    data.key.grantEncryptDecrypt(this.authorizerFunction.fn);

    this.workerFunction = new SiftFunction(this, 'Worker', {
      ...common,
      entry: 'worker.ts',
      service: 'worker',
      description: 'Sift background worker (dataset processing) consuming the work queue',
      memorySize: 2048,
      timeout: Duration.minutes(15),
      environment: {
        SIFT_TABLE: data.tableName,
        SIFT_BUCKET: data.bucket.bucketName,
        SIFT_QUEUE_URL: data.queue.queueUrl,
      },
    });
    data.table.grantReadWriteData(this.workerFunction.fn);
    data.bucket.grantReadWrite(this.workerFunction.fn);
    data.queue.grantSendMessages(this.workerFunction.fn);
    this.workerFunction.fn.addEventSource(
      new lambdaEvents.SqsEventSource(data.queue, {
        batchSize: 5,
        maxBatchingWindow: Duration.seconds(2),
        reportBatchItemFailures: true,
        maxConcurrency: 10,
      }),
    );
    for (const f of [this.apiFunction, this.workerFunction]) {
      acknowledgeDataGrants(f.role, stage, { table: true, bucket: 'readwrite', kms: true });
    }
    acknowledgeDataGrants(this.authorizerFunction.role, stage, { kms: true });
  }
}

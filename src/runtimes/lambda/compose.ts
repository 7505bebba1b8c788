/**
 * The Lambda runtime's composition: its environment is read here, once per container, and each
 * function's Services graph is built whole and returned read-only. The handlers in this folder
 * take what they need from here and read no environment themselves.
 */
import { type AwsServices, servicesFromEnv } from '../../adapters/aws';
import { ApiGatewayKeys } from '../../aws/gatewayKeys';
import type { TrainingEnv } from '../../aws/trainingWorkflow';
import { type LauncherSettings, stepFunctionsLaunchers } from '../../aws/workflowLauncher';
import type { Services } from '../../core/context';

/** What the stack tells a Lambda function beyond the stores (those: servicesFromEnv). */
export interface LambdaSettings {
  stage: string;
  launchers: LauncherSettings;
  training: TrainingEnv;
  /** Team usage plans on API Gateway: on unless the stack turned them off. */
  usagePlans: boolean;
}

export function lambdaSettings(env: NodeJS.ProcessEnv = process.env): LambdaSettings {
  const stage = env.SIFT_STAGE ?? 'prod';
  const jobNamePrefix = env.SIFT_TRAINING_JOB_PREFIX ?? `sift-${stage}-`;
  return {
    stage,
    launchers: {
      ...(env.SIFT_TRAINING_STATE_MACHINE_ARN ? { trainingStateMachineArn: env.SIFT_TRAINING_STATE_MACHINE_ARN } : {}),
      stateMachines: {
        ...(env.SIFT_EVALUATION_STATE_MACHINE_ARN ? { evaluation: env.SIFT_EVALUATION_STATE_MACHINE_ARN } : {}),
        ...(env.SIFT_GENERATION_STATE_MACHINE_ARN ? { generation: env.SIFT_GENERATION_STATE_MACHINE_ARN } : {}),
        ...(env.SIFT_ADAPTIVE_STATE_MACHINE_ARN ? { adaptive: env.SIFT_ADAPTIVE_STATE_MACHINE_ARN } : {}),
      },
      jobNamePrefix,
    },
    training: {
      jobNamePrefix,
      instanceType: env.SIFT_TRAINING_INSTANCE_TYPE ?? 'ml.g5.xlarge',
      maxRuntimeSeconds: Number(env.SIFT_TRAINING_MAX_RUNTIME_SECONDS ?? 86_400),
    },
    usagePlans: env.SIFT_USAGE_PLANS !== 'off',
  };
}

/**
 * One Lambda function's finished, read-only Services (limits shared through DynamoDB). `launchers`:
 * it starts training jobs and workflows (the API, and the workflow function for the adaptive loop);
 * `gatewayKeys`: it names each team's key in its plan's usage plan (the authorizer).
 */
export function composeLambda(
  settings: LambdaSettings,
  wants: { launchers?: boolean; gatewayKeys?: boolean } = {},
): Readonly<AwsServices> {
  let svc: Readonly<AwsServices> | undefined;
  const ports: Partial<Services> = {
    ...(wants.launchers ? stepFunctionsLaunchers(() => svc as Services, settings.launchers) : {}),
    ...(wants.gatewayKeys && settings.usagePlans ? { gatewayKeys: new ApiGatewayKeys(settings.stage) } : {}),
  };
  svc = servicesFromEnv('dynamodb', ports);
  return svc;
}

/**
 * Builds every Sift stack into an app (or a Stage). `bin/app.ts` and the CDK
 * tests both call this, so what the tests check is what `cdk deploy` deploys.
 */
import { Annotations, Tags, Validations, type Stage } from 'aws-cdk-lib';
import type { App } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { ApiStack } from './api-stack';
import type { StageConfig } from './config';
import { CONSOLE_BUILD_COMMAND, ConsoleStack, consoleBuilt } from './constructs/console-hosting';
import { DataStack } from './data-stack';
import { InferenceStack } from './inference-stack';
import { ObservabilityStack } from './observability-stack';
import { WorkflowStack } from './workflow-stack';

export interface SiftStacks {
  readonly data: DataStack;
  readonly inference: InferenceStack;
  readonly workflows: WorkflowStack;
  readonly api: ApiStack;
  readonly observability: ObservabilityStack;
  /** Absent when web/dist is not built (a fresh clone after `npm ci`): see `consoleSkipped`. */
  readonly console?: ConsoleStack;
}

export interface BuildOptions {
  /** Register cdk-nag AwsSolutions checks (default true). */
  readonly nag?: boolean;
}

export function stackName(config: StageConfig, part: string): string {
  const stage = config.stage.charAt(0).toUpperCase() + config.stage.slice(1);
  return `Sift${stage}${part}`;
}

export function buildSift(app: App | Stage, config: StageConfig, options: BuildOptions = {}): SiftStacks {
  if (options.nag ?? true) {
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  }
  const terminationProtection = config.stage === 'prod';
  const data = new DataStack(app, stackName(config, 'Data'), {
    config,
    terminationProtection,
    description: `Sift ${config.stage}: records table, datasets/artifacts bucket, work queue`,
  });
  const inference = new InferenceStack(app, stackName(config, 'Inference'), {
    config,
    description: `Sift ${config.stage}: VPC, ECS GPU cluster, encoder and decoder services, internal ALB, VPC link`,
  });
  inference.addStackDependency(data);
  const workflows = new WorkflowStack(app, stackName(config, 'Workflows'), {
    config,
    description: `Sift ${config.stage}: SageMaker training role, Step Functions workflows, training events`,
    inference: {
      vpc: inference.vpc,
      clientSecurityGroup: inference.clientSecurityGroup,
      gatewayUrl: `http://${inference.alb.loadBalancerDnsName}`,
      internalToken: inference.internalToken,
    },
  });
  workflows.addStackDependency(data);
  const api = new ApiStack(app, stackName(config, 'Api'), {
    config,
    inference: inference.endpoint,
    workflows: workflows.handles,
    description: `Sift ${config.stage}: REST API, authorizers, control-plane Lambdas, WAF`,
  });
  api.addStackDependency(data);
  // A fresh clone has no web/dist (`npm ci` does not build web/): the other stacks still deploy, and
  // the console follows once built, rather than the whole deploy failing at synth.
  const consoleStack = consoleBuilt()
    ? new ConsoleStack(app, stackName(config, 'Console'), {
        config,
        apiUrl: api.api.url,
        description: `Sift ${config.stage}: the web console (S3 + CloudFront)`,
      })
    : skipConsole(api, stackName(config, 'Console'));
  const observability = new ObservabilityStack(app, stackName(config, 'Observability'), {
    config,
    api,
    inference,
    workflows,
    description: `Sift ${config.stage}: finance and operations dashboards, alarms, budget`,
  });
  observability.addStackDependency(data);
  Tags.of(app).add('project', 'sift');
  Tags.of(app).add('sift:stage', config.stage);
  return { data, inference, workflows, api, observability, console: consoleStack };
}

/** The message a synth without a built console prints, as a CDK warning and on stderr. */
export function consoleSkipped(consoleStack: string): string {
  return `${consoleStack} is left out: the web console is not built (web/dist/index.html is missing). Run \`${CONSOLE_BUILD_COMMAND}\`, then deploy again to add it.`;
}

function skipConsole(api: ApiStack, consoleStack: string): undefined {
  const message = consoleSkipped(consoleStack);
  Annotations.of(api).addWarningV2('sift:console-not-built', message);
  console.warn(`[sift] ${message}`);
  return undefined;
}

/**
 * Each Lambda function of the synthesized app as CloudFormation would create it: its environment and
 * its role's policy statements, read from the templates (not copied by hand), with the intrinsic
 * functions CDK writes resolved to the rehearsal's resources (the emulators' table and bucket, the
 * stand-ins' queue and state machines). Resolved here: Ref, Fn::GetAtt, Fn::Join, Fn::ImportValue,
 * Fn::GetStackOutput and the pseudo parameters; any other intrinsic fails loudly, so a template
 * that starts using one is noticed. ("Intrinsic function reference", AWS CloudFormation User Guide,
 * https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/intrinsic-function-reference.html)
 * Not modelled: managed policies (none of Sift's functions has one), permission boundaries, SCPs,
 * resource policies (bucket, key).
 */
import type { Stack } from 'aws-cdk-lib';
import type { Built } from '../cdk/helpers';
import type { Statement } from './iamPolicy';

export const REGION = 'us-east-1';
export const ACCOUNT = '123456789012';

type Json = unknown;
interface Resource {
  Type: string;
  Properties?: Record<string, Json>;
}
interface Template {
  Resources: Record<string, Resource>;
  Outputs?: Record<string, { Value: Json; Export?: { Name: string } }>;
}

/** Where the rehearsal's resources are: physical names by logical id (CDK's hash suffix left off). */
export interface Bindings {
  /** e.g. { Records: 'sift-records', Blobs: 'sift-data', WorkQueue: 'sift-test-work' } */
  names: Record<string, string>;
  /** Attribute values by `<name>.<attribute>`, e.g. { 'Alb.DNSName': '127.0.0.1:9' }. */
  attributes?: Record<string, string>;
  /** The SQS endpoint a queue URL names. */
  queueEndpoint: string;
  /** A usage plan's id by its name. */
  usagePlanId: (name: string) => string;
}

export interface DeployedFunction {
  service: string;
  stack: string;
  /** The function's environment variables, resolved with `bindings`. */
  env(bindings: Bindings): Record<string, string>;
  /** The role's statements (inline and attached policies), resolved with `bindings`. */
  statements(bindings: Bindings): Statement[];
}

const shortName = (logicalId: string) => logicalId.replace(/[0-9A-F]{8}$/, '');

export class DeployedApp {
  private readonly templates = new Map<string, Template>();

  constructor(built: Built) {
    for (const child of built.app.node.children) {
      const stack = child as Stack;
      if (typeof stack.stackName !== 'string' || !('templateOptions' in stack)) continue;
      this.templates.set(stack.stackName, built.template(stack).toJSON() as Template);
    }
  }

  /** Every function that has a POWERTOOLS_SERVICE_NAME (Sift's own; CDK's custom-resource handlers have none). */
  functions(): Record<string, DeployedFunction> {
    const out: Record<string, DeployedFunction> = {};
    for (const [stackName, template] of this.templates)
      for (const fn of Object.values(template.Resources)) {
        if (fn.Type !== 'AWS::Lambda::Function') continue;
        const variables = ((fn.Properties?.Environment as { Variables?: Record<string, Json> })?.Variables ??
          {}) as Record<string, Json>;
        const service = variables.POWERTOOLS_SERVICE_NAME;
        if (typeof service !== 'string') continue;
        const roleId = (fn.Properties?.Role as { 'Fn::GetAtt'?: [string, string] } | undefined)?.['Fn::GetAtt']?.[0];
        if (!roleId) throw new Error(`${service}: its role is not one of the stack's`);
        out[service] = {
          service,
          stack: stackName,
          env: (b) =>
            Object.fromEntries(Object.entries(variables).map(([k, v]) => [k, this.resolve(stackName, v, b) as string])),
          statements: (b) =>
            this.roleStatements(template, roleId).map((s) => this.resolve(stackName, s, b) as Statement),
        };
      }
    return out;
  }

  /** Every resource of a type, with its stack (for the stand-ins: state machines, usage plans). */
  resources(type: string): { stack: string; logicalId: string; properties: Record<string, Json> }[] {
    return [...this.templates].flatMap(([stack, t]) =>
      Object.entries(t.Resources)
        .filter(([, r]) => r.Type === type)
        .map(([logicalId, r]) => ({ stack, logicalId, properties: r.Properties ?? {} })),
    );
  }

  /** A resource's Ref or attribute as the rehearsal names it. */
  value(stack: string, logicalId: string, b: Bindings, attribute?: string): string {
    const resource = this.templates.get(stack)?.Resources[logicalId];
    if (!resource) throw new Error(`${stack} has no resource ${logicalId}`);
    const props = resource.Properties ?? {};
    const short = shortName(logicalId);
    const name =
      b.names[short] ??
      ((props.StateMachineName ?? props.UsagePlanName ?? props.TableName ?? props.QueueName) as string | undefined) ??
      short;
    const given = attribute && b.attributes?.[`${short}.${attribute}`];
    if (given) return given;
    const arn = (service: string, rest: string) => `arn:aws:${service}:${REGION}:${ACCOUNT}:${rest}`;
    switch (resource.Type) {
      case 'AWS::DynamoDB::Table':
      case 'AWS::DynamoDB::GlobalTable':
        return attribute === 'Arn' ? arn('dynamodb', `table/${name}`) : name;
      case 'AWS::S3::Bucket':
        return attribute === 'Arn' ? `arn:aws:s3:::${name}` : name;
      case 'AWS::SQS::Queue':
        return attribute === 'Arn'
          ? arn('sqs', name)
          : attribute === 'QueueName'
            ? name
            : `${b.queueEndpoint}/${ACCOUNT}/${name}`;
      case 'AWS::StepFunctions::StateMachine':
        return attribute === 'Name' ? name : arn('states', `stateMachine:${name}`);
      case 'AWS::ApiGateway::UsagePlan':
        return b.usagePlanId(name);
      case 'AWS::SecretsManager::Secret':
        return arn('secretsmanager', `secret:${name}`);
      case 'AWS::KMS::Key':
        return attribute === 'Arn' ? arn('kms', `key/${name}`) : name;
      case 'AWS::Logs::LogGroup':
        return attribute === 'Arn' ? arn('logs', `log-group:${name}:*`) : name;
      case 'AWS::Lambda::Function':
        return attribute === 'Arn' ? arn('lambda', `function:${name}`) : name;
      default:
        if (attribute && attribute !== 'Arn')
          throw new Error(`no binding for ${short}.${attribute} (${resource.Type})`);
        return attribute ? arn(resource.Type.split('::')[1]!.toLowerCase(), name) : name;
    }
  }

  private resolve(stack: string, v: Json, b: Bindings): Json {
    if (Array.isArray(v)) return v.map((x) => this.resolve(stack, x, b));
    if (!v || typeof v !== 'object') return v;
    const o = v as Record<string, Json>;
    const [key] = Object.keys(o);
    if (Object.keys(o).length !== 1 || (!key?.startsWith('Fn::') && key !== 'Ref'))
      return Object.fromEntries(Object.entries(o).map(([k, x]) => [k, this.resolve(stack, x, b)]));
    const arg = o[key];
    switch (key) {
      case 'Ref': {
        const pseudo: Record<string, string> = {
          'AWS::Region': REGION,
          'AWS::AccountId': ACCOUNT,
          'AWS::Partition': 'aws',
          'AWS::URLSuffix': 'amazonaws.com',
        };
        return pseudo[arg as string] ?? this.value(stack, arg as string, b);
      }
      case 'Fn::GetAtt': {
        const [id, attribute] = arg as [string, string];
        return this.value(stack, id, b, attribute);
      }
      case 'Fn::Join': {
        const [sep, parts] = arg as [string, Json[]];
        return parts.map((p) => this.resolve(stack, p, b)).join(sep);
      }
      case 'Fn::ImportValue': {
        for (const [name, t] of this.templates)
          for (const output of Object.values(t.Outputs ?? {}))
            if (output.Export?.Name === arg) return this.resolve(name, output.Value, b);
        throw new Error(`no stack exports ${String(arg)}`);
      }
      case 'Fn::GetStackOutput': {
        const { StackName, OutputName } = arg as { StackName: string; OutputName: string };
        const output = this.templates.get(StackName)?.Outputs?.[OutputName];
        if (!output) throw new Error(`${StackName} has no output ${OutputName}`);
        return this.resolve(StackName, output.Value, b);
      }
      default:
        throw new Error(`the rehearsal does not resolve ${key}`);
    }
  }

  private roleStatements(template: Template, roleId: string): Json[] {
    const role = template.Resources[roleId];
    if (role?.Type !== 'AWS::IAM::Role') throw new Error(`${roleId} is not a role`);
    if (role.Properties?.ManagedPolicyArns) throw new Error(`${roleId}: managed policies are not modelled`);
    const inline = ((role.Properties?.Policies ?? []) as { PolicyDocument: { Statement: Json[] } }[]).flatMap(
      (p) => p.PolicyDocument.Statement,
    );
    const attached = Object.values(template.Resources)
      .filter(
        (r) =>
          r.Type === 'AWS::IAM::Policy' &&
          ((r.Properties?.Roles ?? []) as Json[]).some((x) => (x as { Ref?: string }).Ref === roleId),
      )
      .flatMap((r) => (r.Properties?.PolicyDocument as { Statement: Json[] } | undefined)?.Statement ?? []);
    return [...inline, ...attached];
  }
}

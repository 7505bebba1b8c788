/**
 * Step Functions' StartExecution, SageMaker's StopTrainingJob, SQS's SendMessage and Secrets
 * Manager's GetSecretValue, served over HTTP in their AWS JSON wire protocol, so the real SDK clients
 * (pointed here by AWS_ENDPOINT_URL_SFN / _SAGEMAKER / _SQS / _SECRETS_MANAGER) and their serializers run. No emulator covers either service; every
 * request is checked against test/helpers/awsRequestRules.ts and refused as the service would.
 * Modelled, each beside its API reference below: StartExecution's StateMachineDoesNotExist,
 * idempotent same-name-same-input starts and ExecutionAlreadyExists; StopTrainingJob's
 * ResourceNotFound and its refusal of a job no longer InProgress; GetSecretValue's
 * ResourceNotFoundException ("GetSecretValue", https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_GetSecretValue.html);
 * SendMessage's MD5OfMessageBody, which the SDK checks ("SendMessage",
 * https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
 * Not modelled: running an execution (a test does that with aws-local-stepfunctions, `onExecution`),
 * the 90-day name reuse window, EXPRESS workflows, SQS delivery (visibility, redrive, ordering),
 * throttling beyond `failNext`, IAM (test/helpers/iamGate.ts stands in front of this).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { violations } from './awsRequestRules';

export interface ControlCall {
  operation: string;
  request: Record<string, unknown>;
}

export class FakeControlPlane {
  readonly calls: ControlCall[] = [];
  /** Executions by ARN (a name is unique per state machine); `closed` once it has ended. */
  readonly executions = new Map<string, { input: string; arn: string; closed?: boolean }>();
  /** The state machines that exist (StartExecution on any other is refused). */
  readonly stateMachines = new Set<string>();
  /** SageMaker training jobs by name, with their status; set by the training stand-in. */
  readonly trainingJobs = new Map<string, { status: string; onStop?: () => void }>();
  /** Secret values by id (name or ARN). */
  readonly secrets = new Map<string, string>();
  /** Messages sent to SQS, as the worker Lambda would receive them. */
  readonly messages: { messageId: string; body: string; queueUrl: string }[] = [];
  /** Refuse the next call of this operation once, with this error type (throttling, an outage). */
  failNext: { operation: string; type: string } | undefined;
  /** Called for each new execution (the test runs the state machine). */
  onExecution: ((name: string, input: Record<string, unknown>) => void) | undefined;
  private server!: Server;

  static async start(): Promise<FakeControlPlane> {
    const fake = new FakeControlPlane();
    fake.server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const operation = String(req.headers['x-amz-target'] ?? '');
        const request = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
        fake.calls.push({ operation, request });
        const send = (status: number, body: unknown) => {
          res.writeHead(status, {
            'content-type': operation.startsWith('SageMaker')
              ? 'application/x-amz-json-1.1'
              : 'application/x-amz-json-1.0',
          });
          res.end(JSON.stringify(body));
        };
        const fail = (type: string, message: string) => send(400, { __type: type, message });
        if (fake.failNext?.operation === operation) {
          const { type } = fake.failNext;
          fake.failNext = undefined;
          return fail(type, 'injected failure');
        }
        const problems = violations(operation, request);
        if (problems.length) return fail('ValidationException', problems.join('; '));
        if (operation === 'AWSStepFunctions.StartExecution') return fake.startExecution(request, send, fail);
        if (operation === 'SageMaker.StopTrainingJob') return fake.stopTrainingJob(request, send, fail);
        if (operation === 'secretsmanager.GetSecretValue') {
          const value = fake.secrets.get(String(request.SecretId));
          if (value === undefined)
            return fail('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
          return send(200, {
            ARN: request.SecretId,
            Name: 'secret',
            SecretString: value,
            VersionId: 'v1',
            VersionStages: ['AWSCURRENT'],
          });
        }
        if (operation === 'AmazonSQS.SendMessage') {
          const messageId = randomUUID();
          const body = String(request.MessageBody);
          fake.messages.push({ messageId, body, queueUrl: String(request.QueueUrl) });
          // the SDK checks this digest against the body it sent
          return send(200, { MessageId: messageId, MD5OfMessageBody: createHash('md5').update(body).digest('hex') });
        }
        return fail('UnknownOperationException', `not implemented here: ${operation}`);
      });
    });
    await new Promise<void>((ok) => fake.server.listen(0, '127.0.0.1', () => ok()));
    return fake;
  }

  // "StartExecution", AWS Step Functions API Reference
  // (https://docs.aws.amazon.com/step-functions/latest/apireference/API_StartExecution.html): a state
  // machine that does not exist is StateMachineDoesNotExist; for a STANDARD workflow the same name and
  // input as a running execution is idempotent (its ARN again); another input, or an execution that
  // has closed, is ExecutionAlreadyExists. Names are unique per state machine (90 days after closing).
  private startExecution(
    request: Record<string, unknown>,
    send: (s: number, b: unknown) => void,
    fail: (t: string, m: string) => void,
  ) {
    const machine = String(request.stateMachineArn);
    if (!this.stateMachines.has(machine))
      return fail('StateMachineDoesNotExist', `State Machine Does Not Exist: '${machine}'`);
    const name = String(request.name);
    const input = String(request.input ?? '{}');
    const arn = `${machine.replace(':stateMachine:', ':execution:')}:${name}`;
    const existing = this.executions.get(arn);
    if (existing && (existing.input !== input || existing.closed))
      return fail('ExecutionAlreadyExists', `Execution Already Exists: '${existing.arn}'`);
    if (!existing) {
      this.executions.set(arn, { input, arn });
      this.onExecution?.(name, JSON.parse(input) as Record<string, unknown>);
    }
    return send(200, { executionArn: arn, startDate: Date.now() / 1000 });
  }

  // https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StopTrainingJob.html: an unknown
  // job is ResourceNotFound; a job that is no longer InProgress cannot be stopped (ValidationException)
  private stopTrainingJob(
    request: Record<string, unknown>,
    send: (s: number, b: unknown) => void,
    fail: (t: string, m: string) => void,
  ) {
    const job = this.trainingJobs.get(String(request.TrainingJobName));
    if (!job)
      return fail('ResourceNotFound', `Requested resource not found: training job ${String(request.TrainingJobName)}`);
    if (job.status !== 'InProgress')
      return fail('ValidationException', `The job is in status ${job.status} and cannot be stopped`);
    job.status = 'Stopping';
    job.onStop?.();
    return send(200, {});
  }

  callsOf(operation: string): Record<string, unknown>[] {
    return this.calls.filter((c) => c.operation === operation).map((c) => c.request);
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }
}

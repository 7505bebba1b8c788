/**
 * One function's role, enforced in front of the emulators and stand-ins: every request its SDK
 * clients send (or a presigned URL it signed) is turned into the IAM action(s) and resource ARN(s)
 * AWS authorizes it by, checked against the role's statements from the synthesized template
 * (iamPolicy.ts), and refused as the service refuses it (AccessDenied) when not allowed; the rest
 * is passed through untouched (same path and headers, so SigV4 still verifies).
 * The actions and resources per request follow the Service Authorization Reference
 * ("Actions, resources, and condition keys for AWS services",
 * https://docs.aws.amazon.com/service-authorization/latest/reference/reference_policies_actions-resources-contextkeys.html):
 * DynamoDB authorizes each API call by the action of the same name on the table (or `table/…/index/…`),
 * batches and transactions by the action of each item ("Using IAM with DynamoDB transactions",
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html);
 * S3 GET/HEAD object → s3:GetObject, PUT (and multipart parts) → s3:PutObject (a copy also needs
 * s3:GetObject on its source), DELETE → s3:DeleteObject, listing → s3:ListBucket on the bucket;
 * Step Functions, SageMaker, SQS and Secrets Manager by their operation on the ARN the request names;
 * API Gateway by `apigateway:<METHOD>` on `arn:aws:apigateway:<region>::<path>`.
 * Not modelled: KMS grants behind SSE-KMS (S3 and DynamoDB decrypt server-side), CloudWatch Logs
 * and X-Ray (the runtime's), condition keys.
 */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ACCOUNT, REGION } from './deployedFunctions';
import type { IamPolicy, ResourceTags } from './iamPolicy';

export type GatedService = 'dynamodb' | 's3' | 'control' | 'apigateway';
type Authorization = { action: string; resource: string };

const TRANSACT_ITEM_ACTIONS: Record<string, string> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  ConditionCheck: 'ConditionCheckItem',
  Get: 'GetItem',
};

const tableArn = (table: string, index?: string) =>
  `arn:aws:dynamodb:${REGION}:${ACCOUNT}:table/${table}${index ? `/index/${index}` : ''}`;

function dynamodb(req: IncomingMessage, body: string): Authorization[] {
  const operation =
    String(req.headers['x-amz-target'] ?? '')
      .split('.')
      .pop() ?? '';
  const input = JSON.parse(body || '{}') as Record<string, unknown>;
  if (operation === 'TransactWriteItems' || operation === 'TransactGetItems')
    return (input.TransactItems as Record<string, { TableName: string }>[]).map((item) => {
      const [kind, spec] = Object.entries(item)[0]!;
      return { action: `dynamodb:${TRANSACT_ITEM_ACTIONS[kind] ?? operation}`, resource: tableArn(spec.TableName) };
    });
  if (operation === 'BatchWriteItem' || operation === 'BatchGetItem')
    return Object.keys(input.RequestItems as object).map((t) => ({
      action: `dynamodb:${operation}`,
      resource: tableArn(t),
    }));
  return [
    {
      action: `dynamodb:${operation}`,
      resource: tableArn(String(input.TableName), input.IndexName as string | undefined),
    },
  ];
}

function s3(req: IncomingMessage, body: string): Authorization[] {
  const url = new URL(req.url ?? '/', 'http://x');
  const [, bucket = '', ...rest] = url.pathname.split('/');
  const key = decodeURIComponent(rest.join('/'));
  const q = url.searchParams;
  const object = `arn:aws:s3:::${bucket}/${key}`;
  const method = req.method ?? 'GET';
  if (!key) {
    if (method === 'POST' && q.has('delete'))
      return [...body.matchAll(/<Key>([^<]*)<\/Key>/g)].map((m) => ({
        action: 's3:DeleteObject',
        resource: `arn:aws:s3:::${bucket}/${m[1]}`,
      }));
    if (method === 'PUT') return [{ action: 's3:CreateBucket', resource: `arn:aws:s3:::${bucket}` }];
    return [{ action: 's3:ListBucket', resource: `arn:aws:s3:::${bucket}` }];
  }
  if (method === 'GET' || method === 'HEAD') return [{ action: 's3:GetObject', resource: object }];
  if (method === 'DELETE')
    return [{ action: q.has('uploadId') ? 's3:AbortMultipartUpload' : 's3:DeleteObject', resource: object }];
  const source = req.headers['x-amz-copy-source'];
  return [
    { action: 's3:PutObject', resource: object },
    ...(source
      ? [{ action: 's3:GetObject', resource: `arn:aws:s3:::${decodeURIComponent(String(source).replace(/^\//, ''))}` }]
      : []),
  ];
}

const CONTROL_SERVICES: Record<string, string> = {
  AWSStepFunctions: 'states',
  SageMaker: 'sagemaker',
  AmazonSQS: 'sqs',
  secretsmanager: 'secretsmanager',
};

function control(req: IncomingMessage, body: string): Authorization[] {
  const [prefix = '', operation = ''] = String(req.headers['x-amz-target'] ?? '').split('.');
  const service = CONTROL_SERVICES[prefix];
  if (!service) throw new Error(`the gate does not know ${prefix}`);
  const input = JSON.parse(body || '{}') as Record<string, string>;
  const resource =
    service === 'states'
      ? input.stateMachineArn
      : service === 'sagemaker'
        ? `arn:aws:sagemaker:${REGION}:${ACCOUNT}:training-job/${String(input.TrainingJobName).toLowerCase()}`
        : service === 'sqs'
          ? `arn:aws:sqs:${REGION}:${ACCOUNT}:${String(input.QueueUrl).split('/').pop()}`
          : input.SecretId;
  return [{ action: `${service}:${operation}`, resource: String(resource) }];
}

function apigateway(req: IncomingMessage): Authorization[] {
  const path = new URL(req.url ?? '/', 'http://x').pathname;
  return [{ action: `apigateway:${req.method}`, resource: `arn:aws:apigateway:${REGION}::${path}` }];
}

const AUTHORIZE: Record<GatedService, (req: IncomingMessage, body: string) => Authorization[]> = {
  dynamodb,
  s3,
  control,
  apigateway,
};

/** The refusal each service answers with when IAM denies the request. */
function deny(service: GatedService, a: Authorization): { status: number; type: string; body: string } {
  const message = `User: arn:aws:sts::${ACCOUNT}:assumed-role/rehearsal is not authorized to perform: ${a.action} on resource: ${a.resource} because no identity-based policy allows the ${a.action} action`;
  if (service === 's3')
    return {
      status: 403,
      type: 'application/xml',
      body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>${message}</Message></Error>`,
    };
  const type = service === 'dynamodb' ? 'com.amazon.coral.service#AccessDeniedException' : 'AccessDeniedException';
  return { status: service === 'apigateway' ? 403 : 400, type, body: JSON.stringify({ __type: type, message }) };
}

export class IamGate {
  /** Every `action resource` the function was allowed, and refused. */
  readonly used = new Set<string>();
  readonly denied: string[] = [];
  private readonly servers: Server[] = [];
  readonly endpoints = {} as Record<GatedService, string>;

  private constructor(
    private readonly policy: IamPolicy,
    private readonly resourceTags: ResourceTags,
  ) {}

  /** `resourceTags`: the tags of a resource the policy's tag conditions ask about (from its stand-in). */
  static async start(
    policy: IamPolicy,
    upstreams: Record<GatedService, string>,
    resourceTags: ResourceTags = () => undefined,
  ): Promise<IamGate> {
    const gate = new IamGate(policy, resourceTags);
    for (const [service, target] of Object.entries(upstreams) as [GatedService, string][])
      gate.endpoints[service] = await gate.listen(service, new URL(target));
    return gate;
  }

  /** The actions (without resources) the function was allowed, sorted. */
  actions(): string[] {
    return [...new Set([...this.used].map((u) => u.split(' ')[0]!))].sort();
  }

  private async listen(service: GatedService, to: URL): Promise<string> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const asked = AUTHORIZE[service](req, service === 's3' && req.method !== 'POST' ? '' : body.toString());
        const refused = asked.find((a) => !this.policy.allows(a.action, a.resource, this.resourceTags));
        if (refused) {
          this.denied.push(`${refused.action} ${refused.resource}`);
          const d = deny(service, refused);
          res.writeHead(d.status, {
            'content-type': service === 's3' ? d.type : 'application/x-amz-json-1.0',
            ...(service === 'apigateway' ? { 'x-amzn-errortype': 'AccessDeniedException' } : {}),
          });
          res.end(d.body);
          return;
        }
        for (const a of asked) this.used.add(`${a.action} ${a.resource}`);
        const forward = httpRequest(
          { host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers },
          (upstream) => {
            res.writeHead(upstream.statusCode ?? 500, upstream.headers);
            upstream.pipe(res);
          },
        );
        forward.on('error', (err) => {
          res.writeHead(500);
          res.end(String(err));
        });
        forward.end(body);
      });
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
    this.servers.push(server);
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const s of this.servers) await new Promise<void>((ok) => s.close(() => ok()));
  }
}

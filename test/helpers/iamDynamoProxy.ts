/**
 * A function's DynamoDB permissions, enforced in front of the emulator: requests whose action the
 * function's role is not granted are refused the way DynamoDB refuses them (AccessDeniedException),
 * the rest are passed through. A function that needs an action its stack does not grant fails here,
 * not on its first deployed request. (IAM authorizes each DynamoDB API call by the action of the same
 * name, and transactions by the action of each item they touch:
 * https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html)
 */
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const TRANSACT_ITEM_ACTIONS: Record<string, string> = {
  Put: 'PutItem',
  Update: 'UpdateItem',
  Delete: 'DeleteItem',
  ConditionCheck: 'ConditionCheckItem',
  Get: 'GetItem',
};

export class IamDynamoProxy {
  readonly used = new Set<string>();
  readonly denied: string[] = [];
  private server!: Server;

  static async start(target: string, allowed: string[]): Promise<IamDynamoProxy> {
    const proxy = new IamDynamoProxy();
    const to = new URL(target);
    proxy.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks);
        const operation =
          String(req.headers['x-amz-target'] ?? '')
            .split('.')
            .pop() ?? '';
        let actions = [operation];
        if (operation === 'TransactWriteItems' || operation === 'TransactGetItems') {
          const items = (JSON.parse(body.toString()) as { TransactItems: Record<string, unknown>[] }).TransactItems;
          actions = items.map((item) => TRANSACT_ITEM_ACTIONS[Object.keys(item)[0]!] ?? operation);
        }
        for (const a of actions) proxy.used.add(`dynamodb:${a}`);
        const refused = actions.filter((a) => !allowed.includes(`dynamodb:${a}`));
        if (refused.length) {
          proxy.denied.push(...refused.map((a) => `dynamodb:${a}`));
          res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
          res.end(
            JSON.stringify({
              __type: 'com.amazon.coral.service#AccessDeniedException',
              Message: `User is not authorized to perform: dynamodb:${refused[0]} because no identity-based policy allows it`,
            }),
          );
          return;
        }
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
    await new Promise<void>((ok) => proxy.server.listen(0, '127.0.0.1', () => ok()));
    return proxy;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }
}

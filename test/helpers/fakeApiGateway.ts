/**
 * The API Gateway management calls Sift makes (usage plans and keys), served over HTTP in the
 * service's REST-JSON wire format, so the real SDK client and its serializers run. No emulator
 * covers API Gateway (none of the offline AWS emulators on npm does); this is the boundary stand-in.
 * Modelled: GetUsagePlans, CreateApiKey (value and tags kept), CreateUsagePlanKey with an unknown
 * plan → NotFoundException, DeleteApiKey of an unknown key → NotFoundException, the key leaving its
 * plans ("Amazon API Gateway REST API Reference": https://docs.aws.amazon.com/apigateway/latest/api/API_GetUsagePlans.html,
 * API_CreateApiKey.html, API_CreateUsagePlanKey.html, API_DeleteApiKey.html).
 * Not modelled: paging (`position`), a key already in another plan of the same stage (ConflictException),
 * quotas and throttles, eventual consistency, the management API's 10 requests/s limit.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeKey {
  id: string;
  name: string;
  value: string;
  tags: Record<string, string>;
}

export class FakeApiGateway {
  readonly usagePlans = new Map<string, { id: string; name: string; keys: Set<string> }>();
  readonly keys = new Map<string, FakeKey>();
  readonly calls: string[] = [];
  /** Fail the next call whose `METHOD path` starts with this, once. */
  failNext: string | undefined;
  private server!: Server;
  private seq = 0;

  static async start(planNames: string[]): Promise<FakeApiGateway> {
    const fake = new FakeApiGateway();
    for (const name of planNames)
      fake.usagePlans.set(`up${++fake.seq}`, { id: `up${fake.seq}`, name, keys: new Set() });
    fake.server = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const url = new URL(req.url ?? '/', 'http://x');
        const call = `${req.method} ${url.pathname}`;
        fake.calls.push(call);
        const send = (status: number, body: unknown, errorType?: string) => {
          res.writeHead(status, {
            'content-type': 'application/json',
            ...(errorType ? { 'x-amzn-errortype': errorType } : {}),
          });
          res.end(JSON.stringify(body));
        };
        if (fake.failNext && call.startsWith(fake.failNext)) {
          fake.failNext = undefined;
          return send(400, { message: 'injected failure' }, 'BadRequestException');
        }
        const body = raw ? (JSON.parse(raw) as Record<string, unknown>) : {};
        let m: RegExpMatchArray | null;
        if (call === 'GET /usageplans')
          return send(200, { item: [...fake.usagePlans.values()].map((p) => ({ id: p.id, name: p.name })) });
        if (call === 'POST /apikeys') {
          const key: FakeKey = {
            id: `k${++fake.seq}`,
            name: String(body.name),
            value: String(body.value),
            tags: (body.tags ?? {}) as Record<string, string>,
          };
          fake.keys.set(key.id, key);
          return send(201, { id: key.id, name: key.name, enabled: true });
        }
        m = call.match(/^POST \/usageplans\/([^/]+)\/keys$/);
        if (m) {
          const plan = fake.usagePlans.get(m[1]!);
          if (!plan) return send(404, { message: 'Invalid Usage Plan ID specified' }, 'NotFoundException');
          plan.keys.add(String(body.keyId));
          return send(201, { id: body.keyId, type: 'API_KEY' });
        }
        m = call.match(/^DELETE \/apikeys\/([^/]+)$/);
        if (m) {
          if (!fake.keys.delete(m[1]!))
            return send(404, { message: 'Invalid API Key identifier specified' }, 'NotFoundException');
          for (const p of fake.usagePlans.values()) p.keys.delete(m[1]!);
          return send(202, {});
        }
        return send(404, { message: `not implemented: ${call}` }, 'NotFoundException');
      });
    });
    await new Promise<void>((ok) => fake.server.listen(0, '127.0.0.1', () => ok()));
    return fake;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  planOfKey(keyId: string): string | undefined {
    return [...this.usagePlans.values()].find((p) => p.keys.has(keyId))?.name;
  }

  async stop(): Promise<void> {
    await new Promise<void>((ok) => this.server.close(() => ok()));
  }
}

/**
 * The request pipeline under hostile input (#25 items 1 and 7, security review F5): malformed
 * request lines, targets and percent-encodings on every route prefix, parser refusals, absolute-
 * and asterisk-form targets, unknown methods, CONNECT; huge, deep and odd JSON bodies. Raw bytes
 * go over node:net to the real local server (TestStack), so nothing a client library would fix
 * up is fixed up. Each answer must be a clear 4xx with `detail` (422s name the field) — never a
 * dropped connection, a 500 or a dead process — and `/health` must answer after each (untimed;
 * the latencies are bench/serving/hostile.ts's job).
 *
 * Then two fast-check properties (fixed seed and run count): the target parser on arbitrary
 * strings, and SiftApp.handle on arbitrary methods, paths, queries, headers and bodies, whose
 * every answer is a well-formed response with a documented status.
 */
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMemoryServices } from '../../src/adapters/memory/services';
import { createApiKey } from '../../src/core/apiKeys';
import { BadRequestError } from '../../src/core/errors';
import { inferencePartition } from '../../src/core/recordKeys';
import { createTeam } from '../../src/core/teams';
import { SiftApp } from '../../src/http/app';
import { MAX_JSON_DEPTH } from '../../src/http/jsonBody';
import { silentLogger } from '../../src/http/logger';
import { buildOpenApi, openApiPath } from '../../src/http/openapi';
import { API_VERSION, allRoutes } from '../../src/http/routes';
import type { ApiResponse } from '../../src/http/types';
import { serveConsole } from '../../src/local/consoleAssets';
import { createApiServer, decodePath, parseRequestTarget } from '../../src/runtimes/node/httpAdapter';
import { OPERATOR_KEY, TestStack } from '../helpers/localStack';

interface RawAnswer {
  /** Undefined when the connection closed without a response. */
  status?: number;
  headers: Record<string, string>;
  body: any;
  text: string;
}

/**
 * Sends raw bytes and reads the answer until the server closes the connection (every request here
 * asks it to). The client does not half-close: node:http ends a connection whose client sent FIN
 * before its answer was written, as it would for any client that went away.
 */
function rawRequest(port: number, bytes: string | Buffer): Promise<RawAnswer> {
  return new Promise((ok) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (b: Buffer) => chunks.push(b));
    // a server that reset the connection instead of answering: what was read so far is the answer
    socket.on('error', () => {});
    socket.on('close', () => ok(parseAnswer(Buffer.concat(chunks))));
    socket.write(bytes);
  });
}

function parseAnswer(raw: Buffer): RawAnswer {
  const text = raw.toString('latin1');
  const end = text.indexOf('\r\n\r\n');
  if (!text.startsWith('HTTP/1.1 ') || end < 0) return { headers: {}, body: undefined, text };
  const [statusLine, ...lines] = text.slice(0, end).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines)
    headers[line.slice(0, line.indexOf(':')).toLowerCase()] = line.slice(line.indexOf(':') + 1).trim();
  let body = raw.subarray(Buffer.byteLength(text.slice(0, end + 4), 'latin1'));
  if (headers['transfer-encoding'] === 'chunked') {
    const parts: Buffer[] = [];
    for (let at = 0; ; ) {
      const lineEnd = body.indexOf('\r\n', at);
      const size = parseInt(body.subarray(at, lineEnd).toString(), 16);
      if (!size) break;
      parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
      at = lineEnd + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    parsed = undefined; // not JSON: the assertions say so
  }
  return { status: Number(statusLine!.split(' ')[1]), headers, body: parsed, text: body.toString('utf8') };
}

/** A request line and headers (+ body), closing the connection after the answer. */
const request = (line: string, headers: Record<string, string> = {}, body?: string | Buffer) => {
  const all = {
    host: 'localhost',
    connection: 'close',
    ...(body !== undefined ? { 'content-length': String(Buffer.byteLength(body)) } : {}),
    ...headers,
  };
  const head = `${line}\r\n${Object.entries(all)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  return body === undefined
    ? head
    : Buffer.concat([Buffer.from(head, 'latin1'), Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8')]);
};
const json = { 'content-type': 'application/json', 'x-api-key': OPERATOR_KEY };

let stack: TestStack;
let port: number;

beforeAll(async () => {
  stack = await TestStack.start({ config: { maxBodyBytes: 10 * 1024 * 1024 } });
  port = Number(new URL(stack.url).port);
}, 120_000);
afterAll(async () => stack?.stop());

/** The server still answers: a plain GET /health over a fresh connection (not timed). */
async function expectAlive(): Promise<void> {
  const health = await rawRequest(port, request('GET /health HTTP/1.1'));
  expect(health.status).toBe(200);
}

/** A clear 4xx with a `detail` that matches, and a server that still answers afterwards. */
async function expectRefused(bytes: string | Buffer, status: number, detail: RegExp): Promise<RawAnswer> {
  const answer = await rawRequest(port, bytes);
  expect({ status: answer.status, detail: answer.body?.detail }).toEqual({
    status,
    detail: expect.stringMatching(detail),
  });
  expect(answer.headers['content-type']).toMatch(/^application\/json/);
  await expectAlive();
  return answer;
}

describe('malformed request targets and percent-encodings (F5: one request killed the server)', () => {
  it.each([
    ['an absolute-form target that is not a URL', 'GET http://[ HTTP/1.1', /not a valid URL/],
    ['the same on a route prefix', 'POST http://[/core/datasets HTTP/1.1', /not a valid URL/],
    ['%ff under /console', 'GET /console/%ff HTTP/1.1', /malformed percent-encoding/],
    ['%ff at the root', 'GET /%ff HTTP/1.1', /malformed percent-encoding/],
    ['%ff in a dataset name', 'GET /core/datasets/%ff HTTP/1.1', /malformed percent-encoding/],
    ['overlong UTF-8 dots on /v1', 'GET /v1/%c0%ae%c0%ae/ HTTP/1.1', /malformed percent-encoding/],
    ['an overlong slash in a model id', 'GET /v1/models/%e0%80%af HTTP/1.1', /malformed percent-encoding/],
    ['a truncated sequence', 'DELETE /projects/abc%e2%82 HTTP/1.1', /malformed percent-encoding/],
    ['a lone surrogate, encoded', 'GET /inferences/%ed%a0%80 HTTP/1.1', /malformed percent-encoding/],
    ['a % that is not a sequence', 'GET /core/training-jobs/100% HTTP/1.1', /malformed percent-encoding/],
    ['a malformed query parameter', 'GET /projects?limit=%zz HTTP/1.1', /query parameter "limit"/],
    [
      '%ff in an absolute-form target',
      'GET http://localhost/core/evaluations/%ff HTTP/1.1',
      /malformed percent-encoding/,
    ],
    ['asterisk-form on GET', 'GET * HTTP/1.1', /is not served/],
    ['asterisk-form OPTIONS', 'OPTIONS * HTTP/1.1', /is not served/],
    ['another scheme', 'GET ftp://localhost/health HTTP/1.1', /is not served/],
  ])('%s: 400 with detail', async (_what, line, detail) => {
    await expectRefused(request(line, { 'x-api-key': OPERATOR_KEY }), 400, detail);
  });

  it('an absolute-form target is served as its path (RFC 9112 §3.2.2), whatever host it names', async () => {
    const answer = await rawRequest(port, request('GET http://elsewhere.example/health HTTP/1.1'));
    expect(answer.status).toBe(200);
  });

  it('`//health` is the path //health (404), not host "health" with path /', async () => {
    await expectRefused(request('GET //health HTTP/1.1'), 404, /No route for GET \/\/health/);
    await expectRefused(
      request('GET //x/projects HTTP/1.1', { 'x-api-key': OPERATOR_KEY }),
      404,
      /No route for GET \/\/x\/projects/,
    );
  });

  it('a NUL byte, encoded, is an ordinary (invalid) name: 422 naming the path parameter', async () => {
    const answer = await expectRefused(
      request('GET /core/datasets/a%00b HTTP/1.1', { 'x-api-key': OPERATOR_KEY }),
      422,
      /path\.name/,
    );
    expect(answer.body.errors[0].loc).toEqual(['path', 'name']);
  });

  it('an invalid Host header does not matter (the API never reads it)', async () => {
    expect((await rawRequest(port, request('GET /health HTTP/1.1', { host: '[[[::' }))).status).toBe(200);
  });
});

describe("what node's parser refuses is answered as JSON too (clientError)", () => {
  it.each([
    ['a raw NUL byte in the target', 'GET /a\u0000b HTTP/1.1'],
    ['a raw control character', 'GET /health\u007f HTTP/1.1'],
    ['raw non-ASCII in the target', 'GET /café HTTP/1.1'],
    ['an unknown method token', 'FOO /health HTTP/1.1'],
    ['a relative target', 'GET health HTTP/1.1'],
  ])('%s: 400 with detail', async (_what, line) => {
    await expectRefused(request(line), 400, /Malformed HTTP request/);
  });

  it('a 64 KiB URL: 431', async () => {
    await expectRefused(
      request(`GET /core/datasets/${'a'.repeat(64 * 1024)} HTTP/1.1`),
      431,
      /larger than the server accepts/,
    );
  });

  it('a header flood: one huge header is 431; a thousand small ones are served', async () => {
    await expectRefused(
      request('GET /health HTTP/1.1', { 'x-junk': 'j'.repeat(20_000) }),
      431,
      /larger than the server accepts/,
    );
    const many: Record<string, string> = {};
    for (let i = 0; i < 1000; i++) many[`x-h${i}`] = 'v';
    expect((await rawRequest(port, request('GET /health HTTP/1.1', many))).status).toBe(200);
  });

  it('an invalid header line, and request smuggling (Content-Length with Transfer-Encoding): 400', async () => {
    await expectRefused(
      'GET /health HTTP/1.1\r\nhost: x\r\nbad header\r\nconnection: close\r\n\r\n',
      400,
      /Malformed HTTP request/,
    );
    await expectRefused(
      request(
        'POST /projects HTTP/1.1',
        { 'content-length': '5', 'transfer-encoding': 'chunked', ...json },
        '0\r\n\r\n',
      ),
      400,
      /Malformed HTTP request/,
    );
  });

  it('HTTP/1.1 without Host: 400 (node answers it before any listener runs, with no body: RFC 9112 §3.2 requires the 400)', async () => {
    const answer = await rawRequest(port, 'GET /health HTTP/1.1\r\nconnection: close\r\n\r\n');
    expect(answer.status).toBe(400);
    await expectAlive();
  });
});

describe('methods', () => {
  it('CONNECT is answered (405 with Allow), not dropped', async () => {
    const answer = await expectRefused(
      'CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n',
      405,
      /CONNECT is not served/,
    );
    expect(answer.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE');
  });

  it.each(['PROPFIND', 'OPTIONS', 'TRACE', 'HEAD', 'PURGE'])(
    '%s on a route: 405 naming the allowed methods',
    async (method) => {
      const answer = await rawRequest(port, request(`${method} /projects HTTP/1.1`, { 'x-api-key': OPERATOR_KEY }));
      expect(answer.status).toBe(405);
      expect(answer.headers.allow).toBe('GET, POST');
      // HEAD answers carry no body; the others say why
      if (method !== 'HEAD') expect(answer.body.detail).toMatch(new RegExp(`${method} is not allowed`));
      await expectAlive();
    },
  );
});

describe('hostile JSON bodies', () => {
  const post = (path: string, body: string | Buffer, headers: Record<string, string> = json) =>
    request(`POST ${path} HTTP/1.1`, headers, body);

  it(`100k-deep arrays and objects (within the 10 MiB limit): 422 at the body, not a stack overflow`, async () => {
    const arrays = '['.repeat(100_000) + ']'.repeat(100_000);
    const answer = await expectRefused(
      post('/projects', arrays),
      422,
      new RegExp(`nested deeper than ${MAX_JSON_DEPTH} levels`),
    );
    expect(answer.body.errors[0]).toMatchObject({ loc: ['body', 0, 0, 0, 0, 0], type: 'json_too_deep' });
    const objects = `${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`;
    await expectRefused(post('/projects', objects), 422, /nested deeper/);
  });

  it('deep nesting inside a field that takes any JSON names that field', async () => {
    const rlConfig = `{"beta":${'['.repeat(MAX_JSON_DEPTH)}${']'.repeat(MAX_JSON_DEPTH)}}`;
    const body = `{"model_name":"m","base_model":"HuggingFaceTB/SmolLM2-135M-Instruct","datasets":[{"name":"d"}],"algorithm":"dpo","rl_config":${rlConfig}}`;
    const answer = await expectRefused(post('/core/training-jobs', body), 422, /body\.rl_config\.beta/);
    expect(answer.body.errors[0].type).toBe('json_too_deep');
  });

  it('a number too large to represent (1e309 → Infinity): 422 naming the field', async () => {
    const answer = await expectRefused(
      post(
        '/core/training-jobs',
        '{"model_name":"m","base_model":"sift/gliner2-mini-v1","datasets":[{"name":"d"}],"nr_epochs":1e309}',
      ),
      422,
      /body\.nr_epochs/,
    );
    expect(answer.body.errors[0]).toMatchObject({ loc: ['body', 'nr_epochs'], type: 'number_out_of_range' });
  });

  it('a __proto__ key, at the top or inside a map-like field: 422 naming it, not silently dropped', async () => {
    const top = await expectRefused(post('/projects', '{"name":"p","__proto__":{"admin":true}}'), 422, /__proto__/);
    expect(top.body.errors[0].loc).toEqual(['body', '__proto__']);
    const nested = await expectRefused(
      post(
        '/v1/chat/completions',
        '{"model":"m","messages":[{"role":"user","content":"hi"}],"schema":{"__proto__":{"x":1}}}',
      ),
      400,
      /__proto__/,
    );
    expect(nested.body.errors[0].loc).toEqual(['body', 'schema', '__proto__']);
    // feedback on a stored inference: before, the key vanished in zod's record copy and the answer was 200 with `corrected_output: {}`
    const teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
    const id = 'inf_01HZZZZZZZZZZZZZZZZZZZZZZZ';
    const record = {
      inference_id: id,
      model_id: 'fastino/gliner2-base-v1',
      type: 'encoder',
      tasks: ['ner'],
      project_id: null,
      training_job_id: null,
      endpoint: '/inference',
    };
    await stack.svc.records.put(
      { pk: inferencePartition(teamId), sk: id },
      {
        ...record,
        input: { text: 'a' },
        output: {},
        usage: {},
        latency_ms: 1,
        created_at: new Date().toISOString(),
        feedback: null,
      },
    );
    const feedback = await expectRefused(
      post(`/inferences/${id}/feedback`, '{"verdict":"incorrect","corrected_output":{"__proto__":{"entities":[]}}}'),
      422,
      /__proto__/,
    );
    expect(feedback.body.errors[0].loc).toEqual(['body', 'corrected_output', '__proto__']);
    expect((await stack.call('GET', `/inferences/${id}`)).body.feedback).toBeNull();
  });

  it('duplicate keys: the last one wins, as in JSON.parse (documented in src/http/jsonBody.ts)', async () => {
    const answer = await rawRequest(port, post('/projects', '{"name":"dup-first","name":"dup-last"}'));
    expect(answer.status).toBe(201);
    expect(answer.body.name).toBe('dup-last');
  });

  it('invalid UTF-8 in a body: 422 json_invalid at the body', async () => {
    const answer = await expectRefused(
      post('/projects', Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])),
      422,
      /not valid UTF-8/,
    );
    expect(answer.body.errors[0]).toMatchObject({ loc: ['body'], type: 'json_invalid' });
  });

  it('huge bodies within the 10 MiB limit: a 9 MiB string and a 2-million-element array, each a 422 naming where', async () => {
    const longName = await expectRefused(
      post('/projects', `{"name":"${'x'.repeat(9 * 1024 * 1024)}"}`),
      422,
      /body\.name/,
    );
    expect(longName.body.errors[0].loc).toEqual(['body', 'name']);
    await expectRefused(post('/projects', `[${'1,'.repeat(2 * 1024 * 1024)}1]`), 422, /body: .*expected object/);
  });

  it('a body over the limit: 413, read no further than the limit', async () => {
    await expectRefused(
      request('POST /projects HTTP/1.1', { ...json, 'content-length': String(11 * 1024 * 1024) }),
      413,
      /larger than the 10485760 byte limit/,
    );
  });
});

describe('the console behind the same guard (a built console: web/dist stand-in)', () => {
  let dist: string;
  let server: Server;
  let consolePort: number;

  beforeAll(async () => {
    dist = await mkdtemp(join(tmpdir(), 'sift-console-'));
    await writeFile(join(dist, 'index.html'), '<!doctype html><title>Sift</title>');
    const svc = createMemoryServices();
    server = createApiServer(new SiftApp(svc, allRoutes(), silentLogger), svc.config.maxBodyBytes, {
      logger: silentLogger,
      front: (req, res, target) => serveConsole(req, res, target, dist),
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
    consolePort = (server.address() as { port: number }).port;
  });
  afterAll(async () => {
    await new Promise((ok) => server.close(ok));
    await rm(dist, { recursive: true, force: true });
  });

  it('GET /console/%ff: 400 with detail, and the console still serves', async () => {
    const bad = await rawRequest(consolePort, request('GET /console/%ff HTTP/1.1'));
    expect({ status: bad.status, detail: bad.body?.detail }).toEqual({
      status: 400,
      detail: expect.stringMatching(/malformed percent-encoding/),
    });
    const page = await rawRequest(consolePort, request('GET /console/ HTTP/1.1'));
    expect(page.status).toBe(200);
    expect(page.text).toContain('<title>Sift</title>');
  });

  it('an encoded ../ stays inside the console directory (404)', async () => {
    const answer = await rawRequest(consolePort, request('GET /console/..%2f..%2f..%2fetc%2fpasswd HTTP/1.1'));
    expect(answer.status).toBe(404);
  });
});

describe('properties (fast-check, fixed seed and run count)', () => {
  it('parseRequestTarget: any string either parses to a decodable path or is a 400 (BadRequestError), nothing else', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string(),
          fc.string().map((s) => `/${s}`),
          fc.webUrl({ withQueryParameters: true, withFragments: true }),
          fc.string({ unit: 'binary' }).map((s) => `/${s}`),
        ),
        (target) => {
          let parsed: ReturnType<typeof parseRequestTarget>;
          try {
            parsed = parseRequestTarget(target);
          } catch (err) {
            expect(err).toBeInstanceOf(BadRequestError);
            return;
          }
          expect(parsed.path.startsWith('/')).toBe(true);
          expect(() => decodePath(parsed.path)).not.toThrow();
        },
      ),
      { seed: 20261126, numRuns: 2000 },
    );
  });

  it('over HTTP: arbitrary printable targets always get a well-formed answer (JSON detail on errors), never a dropped connection', async () => {
    const target = fc.oneof(
      fc
        .string({
          unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
          minLength: 1,
          maxLength: 80,
        })
        .map((s) => `/${s}`),
      fc.string({
        unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
        minLength: 1,
        maxLength: 80,
      }),
    );
    await fc.assert(
      fc.asyncProperty(fc.constantFrom('GET', 'POST', 'DELETE', 'OPTIONS'), target, async (method, t) => {
        const answer = await rawRequest(port, request(`${method} ${t} HTTP/1.1`, { 'x-api-key': OPERATOR_KEY }));
        expect(answer.status).toBeGreaterThanOrEqual(200);
        expect(answer.status).not.toBe(500);
        if (answer.status! >= 400) expect(typeof answer.body?.detail).toBe('string');
      }),
      { seed: 20261126, numRuns: 150 },
    );
    await expectAlive();
  });

  it('SiftApp.handle: any method, path, query, headers and body get a documented status, `detail` on errors, and never a throw or a 500', async () => {
    const svc = createMemoryServices();
    const routes = allRoutes();
    const app = new SiftApp(svc, routes, silentLogger);
    const team = await createTeam(svc, { name: 'fuzz' });
    const key = (await createApiKey(svc, team.id, { name: 'fuzz' })).key;
    const doc = buildOpenApi(routes, API_VERSION) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    /** Every status some operation on a path of this shape documents, plus routing's own 404/405 and the edge limit's 429. */
    const documented = (path: string): Set<number> => {
      const statuses = new Set([404, 405, 429, 503]);
      for (const spec of routes) {
        const segments = spec.path
          .split('/')
          .map((seg) =>
            seg.startsWith(':') ? '[^/]*' : seg === '*' ? '.*' : seg.replace(/[.+?^${}()|[\]\\]/g, '\\$&'),
          );
        const pattern = new RegExp(`^${segments.join('/')}$`);
        if (!pattern.test(path)) continue;
        for (const op of Object.values(doc.paths[openApiPath(spec.path)] ?? {}))
          for (const s of Object.keys(op.responses)) statuses.add(Number(s));
      }
      return statuses;
    };
    const paramValue = fc.oneof(
      fc.string(),
      fc.uuid(),
      fc.constantFrom(
        'fastino/gliner2-base-v1',
        'sift/gliner2-mini-v1',
        'adc_01HZZZZZZZZZZZZZZZZZZZZZZZ',
        'inf_01HZZZZZZZZZZZZZZZZZZZZZZZ',
        '0',
        '1',
        '-1',
        '..',
        '%2e%2e',
        '',
      ),
    );
    /** A route's own method and path, its parameters filled with arbitrary values (percent-encoded as a client would). */
    const routeRequest = fc
      .tuple(fc.constantFrom(...routes), fc.array(paramValue, { minLength: 3, maxLength: 3 }))
      .map(([spec, values]) => {
        let i = 0;
        const path = spec.path
          .replace(/:\w+/g, () => encodeURIComponent(values[i++]!))
          .replace(/\*$/, encodeURIComponent(values[2]!));
        return [spec.method as string, path] as const;
      });
    const anyMethod = fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'PROPFIND');
    const anyRequest = fc.tuple(
      anyMethod,
      fc.oneof(
        routeRequest.map(([, path]) => path),
        fc.webPath(),
        fc.string().map((s) => `/${s}`),
      ),
    );
    const methodAndPath = fc.oneof({ arbitrary: routeRequest, weight: 4 }, { arbitrary: anyRequest, weight: 1 });
    const fieldNames = fc.constantFrom(
      'name',
      'model_id',
      'model',
      'text',
      'schema',
      'dataset_name',
      'base_model',
      'datasets',
      'version',
      'verdict',
      'training_job_id',
      'messages',
      'max_tokens',
      'description',
      'amount_usd',
      'project_id',
      'checkpoint_id',
      '__proto__',
      'constructor',
    );
    const body = fc.oneof(
      fc.constant(undefined),
      fc.json().map((s) => Buffer.from(s)),
      fc.dictionary(fieldNames, fc.jsonValue({ maxDepth: 4 })).map((o) => Buffer.from(JSON.stringify(o))),
      fc.uint8Array({ maxLength: 64 }).map((b) => Buffer.from(b)),
    );
    const headers = fc.record(
      {
        'x-api-key': fc.oneof({ arbitrary: fc.constant(key), weight: 4 }, { arbitrary: fc.string(), weight: 1 }),
        'content-type': fc.oneof(
          { arbitrary: fc.constant('application/json'), weight: 4 },
          { arbitrary: fc.constantFrom('text/plain', 'application/x-www-form-urlencoded', ''), weight: 1 },
        ),
        authorization: fc.string(),
        'x-request-id': fc.string(),
      },
      { requiredKeys: ['x-api-key', 'content-type'] },
    );
    let ip = 0;
    await fc.assert(
      fc.asyncProperty(
        methodAndPath,
        fc.dictionary(fc.string(), fc.string(), { maxKeys: 4 }),
        headers,
        body,
        async ([method, path], query, hdrs, raw) => {
          let response: ApiResponse;
          try {
            response = await app.handle({
              method,
              path,
              query,
              headers: hdrs,
              ...(raw ? { body: raw } : {}),
              sourceIp: `10.0.${Math.floor(ip / 250)}.${ip++ % 250}`,
            });
          } catch (err) {
            throw new Error(`SiftApp.handle threw on ${method} ${path}: ${(err as Error).stack}`);
          }
          await (response.stream as AsyncGenerator | undefined)?.return?.(undefined);
          expect(Number.isInteger(response.status)).toBe(true);
          expect(response.status).not.toBe(500);
          expect(response.headers?.['x-request-id']).toEqual(expect.any(String));
          expect(() => JSON.stringify(response.body)).not.toThrow();
          if (response.status >= 400) expect(typeof (response.body as { detail?: unknown }).detail).toBe('string');
          expect({ status: response.status, documented: documented(path).has(response.status) }).toEqual({
            status: response.status,
            documented: true,
          });
        },
      ),
      { seed: 20261126, numRuns: 400 },
    );
  });
});

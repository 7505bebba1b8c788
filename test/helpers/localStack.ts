import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Ports } from '../../src/adapters/aws';
import type { SiftConfig } from '../../src/core/context';
import { silentLogger } from '../../src/http/logger';
import { startLocal, type LocalService } from '../../src/runtimes/local/main';
import { DEFAULT_MODELS_DIR } from '../../src/paths';

export const OPERATOR_KEY = 'svc_sk_test-operator-key-0123456789abcdefghijklmnop';

export interface CallResult<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

/** A running local stack in a fresh data dir, plus a small HTTP client for it. */
export class TestStack {
  private constructor(
    readonly service: LocalService,
    readonly dataDir: string,
    private readonly ownsDir: boolean,
  ) {}

  /**
   * `maxTrainingJobs` defaults to 0 (jobs stay `requested`); training tests pass 1. `withModels`
   * publishes the weights that set-up built (~/.cache/sift/models) into this stack's model store;
   * without it the store starts empty, which keeps start-up fast and `available` false.
   */
  static async start(
    opts: {
      dataDir?: string;
      adminKey?: string;
      config?: Partial<SiftConfig>;
      maxTrainingJobs?: number;
      withModels?: boolean;
      /** A models directory of the test's own (its background-build status file included); overrides `withModels`. */
      modelsDir?: string;
      buildPollMs?: number;
      /** The trainer's Python (default: the venv in the user cache). */
      python?: string;
      workflowPollMs?: number;
      adaptiveEveryMs?: number;
      /** Ports that replace the stack's own (the composition's `ports`: the graph is read-only once built). */
      ports?: Ports;
    } = {},
  ): Promise<TestStack> {
    const dataDir = opts.dataDir ?? (await mkdtemp(join(tmpdir(), 'sift-test-')));
    const service = await startLocal({
      port: 0,
      dataDir,
      adminKey: opts.adminKey ?? OPERATOR_KEY,
      logger: silentLogger,
      maxTrainingJobs: opts.maxTrainingJobs ?? 0,
      modelsDir: opts.modelsDir ?? (opts.withModels ? DEFAULT_MODELS_DIR : join(dataDir, 'no-models')),
      ...(opts.buildPollMs !== undefined ? { buildPollMs: opts.buildPollMs } : {}),
      ...(opts.python !== undefined ? { python: opts.python } : {}),
      // Test-only request switches on (SiftConfig.testSwitches, x-sift-test-unconstrained).
      config: { testSwitches: true, ...opts.config },
      ...(opts.workflowPollMs !== undefined ? { workflowPollMs: opts.workflowPollMs } : {}),
      ...(opts.adaptiveEveryMs !== undefined ? { adaptiveEveryMs: opts.adaptiveEveryMs } : {}),
      ...(opts.ports ? { ports: opts.ports } : {}),
    });
    return new TestStack(service, dataDir, !opts.dataDir);
  }

  get url(): string {
    return this.service.url;
  }

  get svc() {
    return this.service.svc;
  }

  async call<T = any>(
    method: string,
    path: string,
    opts: { key?: string | null; body?: unknown; rawBody?: string | Buffer; headers?: Record<string, string> } = {},
  ): Promise<CallResult<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    const key = opts.key === undefined ? OPERATOR_KEY : opts.key;
    if (key) headers['x-api-key'] = key;
    let body: string | Buffer | undefined;
    if (opts.rawBody !== undefined) body = opts.rawBody;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(this.url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed as T, text };
  }

  /** A new team with its own admin key: for isolation tests. */
  async newTeam(name = 'other'): Promise<{ teamId: string; key: string }> {
    const res = await this.call('POST', '/teams', { body: { name } });
    if (res.status !== 201) throw new Error(`team creation failed: ${res.text}`);
    return { teamId: res.body.team.id, key: res.body.api_key.key };
  }

  /** Uploads rows through the real presigned URL and waits until the version settles. */
  async uploadDataset(
    name: string,
    content: string | Buffer,
    opts: {
      key?: string;
      fileName?: string;
      newVersion?: boolean;
      declare?: { size_bytes?: number; sha256?: string };
    } = {},
  ): Promise<any> {
    const url = await this.call('POST', '/core/datasets/upload/url', {
      ...(opts.key ? { key: opts.key } : {}),
      body: {
        dataset_name: name,
        file_name: opts.fileName ?? 'rows.jsonl',
        ...(opts.newVersion ? { new_version: true } : {}),
        ...(opts.declare ?? {}),
      },
    });
    if (url.status !== 200) throw new Error(`upload url failed: ${url.status} ${url.text}`);
    const put = await fetch(url.body.upload_url, { method: 'PUT', body: content });
    if (!put.ok) throw new Error(`PUT failed: ${put.status}`);
    const processed = await this.call('POST', '/core/datasets/upload/process', {
      ...(opts.key ? { key: opts.key } : {}),
      body: { dataset_name: name, version: url.body.version },
    });
    if (processed.status !== 202) throw new Error(`process failed: ${processed.status} ${processed.text}`);
    await this.service.idle();
    return (
      await this.call('GET', `/core/datasets/${name}/${url.body.version}`, { ...(opts.key ? { key: opts.key } : {}) })
    ).body;
  }

  /** GETs `path` (a training job, an evaluation) every second until its status leaves requested/running. */
  async settled(path: string): Promise<any> {
    for (;;) {
      const body = (await this.call('GET', path)).body;
      if (!['requested', 'running'].includes(body.status)) return body;
      await new Promise((r) => setTimeout(r, 1000));
    }
  }

  async stop(): Promise<void> {
    await this.service.close();
    if (this.ownsDir) await rm(this.dataDir, { recursive: true, force: true });
  }
}

export const jsonl = (rows: unknown[]): string => `${rows.map((r) => JSON.stringify(r)).join('\n')}\n`;

/**
 * The request pipeline of one process on the in-memory service graph, with a decoder backend of the
 * test's choosing, driven through the node:http adapter's `writeApiResponse` with a response
 * object whose client "closes the socket" at a chosen stage. Shared by the decoder lifecycle tests.
 */
import type { ServerResponse } from 'node:http';
import { configureDecoder, type DecoderSetup } from '../../src/adapters/decoder';
import { createMemoryServices, type MemoryServices } from '../../src/adapters/memory/services';
import { createApiKey } from '../../src/core/apiKeys';
import { createTeam } from '../../src/core/teams';
import { listUsageRequests } from '../../src/core/usage';
import { SiftApp } from '../../src/http/app';
import { silentLogger } from '../../src/http/logger';
import { allRoutes } from '../../src/http/routes';
import type { ApiResponse } from '../../src/http/types';
import { writeApiResponse } from '../../src/runtimes/node/httpAdapter';

/**
 * Where the client goes away: while the backend computes the prompt (`prefill`, the test aborts
 * through `onPrefill`); once the headers are written; after the first chunk (a header event on
 * chat, messages and responses; text on completions); after the second text chunk; after the
 * chunk carrying `lastText` but before the final events; or never.
 */
export type Stage = 'prefill' | 'headers' | 'first-chunk' | 'mid-stream' | 'last-chunk' | 'none';

export interface Pipeline {
  svc: MemoryServices;
  app: SiftApp;
  teamId: string;
  key: string;
}

export async function memoryPipeline(setup: DecoderSetup): Promise<Pipeline> {
  const svc = createMemoryServices();
  configureDecoder(svc, setup);
  const teamId = (await createTeam(svc, { name: 'acme' })).id;
  const key = (await createApiKey(svc, teamId, { name: 'k', role: 'admin' })).key;
  return { svc, app: new SiftApp(svc, allRoutes(), silentLogger), teamId, key };
}

/** A ServerResponse stand-in that records what was written and aborts the request at `stage`. */
function clientLeavingAt(
  stage: Stage,
  abort: AbortController,
  isText: (chunk: string) => boolean,
  lastText: string | undefined,
) {
  const written: string[] = [];
  const res = {
    writeHead() {
      if (stage === 'headers') abort.abort();
      return res;
    },
    write(chunk: string | Uint8Array) {
      const text = String(chunk);
      written.push(text);
      if (stage === 'first-chunk' && written.length === 1) abort.abort();
      if (stage === 'mid-stream' && written.filter(isText).length === 2) abort.abort();
      if (stage === 'last-chunk' && lastText !== undefined && text.includes(lastText)) abort.abort();
      return true;
    },
    end() {
      return res;
    },
  };
  return { res: res as unknown as ServerResponse, written };
}

/**
 * One request through SiftApp and `writeApiResponse`. For `prefill`, `onPrefill` receives the
 * abort function and must call it while the backend holds a slot (the test's hook into prefill).
 */
export async function runRequest(
  p: Pipeline,
  path: string,
  body: Record<string, unknown>,
  opts: {
    stage: Stage;
    isText: (chunk: string) => boolean;
    lastText?: string;
    onPrefill?: (abort: () => void) => Promise<void> | void;
    key?: string;
  },
): Promise<{ response: ApiResponse; written: string[]; inferenceId: string | undefined }> {
  const abort = new AbortController();
  const handled = p.app.handle({
    method: 'POST',
    path,
    query: {},
    headers: { 'x-api-key': opts.key ?? p.key, 'content-type': 'application/json' },
    body: Buffer.from(JSON.stringify(body)),
    sourceIp: '127.0.0.1',
    signal: abort.signal,
  });
  if (opts.stage === 'prefill') await opts.onPrefill!(() => abort.abort());
  const response = await handled;
  const client = clientLeavingAt(opts.stage, abort, opts.isText, opts.lastText);
  await writeApiResponse(client.res, response, abort.signal);
  const inferenceId =
    response.headers?.['x-inference-id'] ?? (response.body as { inference_id?: string } | undefined)?.inference_id;
  return { response, written: client.written, inferenceId };
}

/** A row of GET /billing/usage/requests/list, with the fields these tests read. */
export interface BilledRow {
  inference_id: string;
  endpoint: string;
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cost_usd: number;
}

/** The team's billed rows, newest first. */
export async function allBilledRows(p: Pipeline, teamId = p.teamId): Promise<BilledRow[]> {
  return (await listUsageRequests(p.svc, teamId, { limit: 500 })).data as unknown as BilledRow[];
}

/** The team's billed rows for one inference. */
export async function billedRows(p: Pipeline, inferenceId: string, teamId = p.teamId): Promise<BilledRow[]> {
  return (await allBilledRows(p, teamId)).filter((r) => r.inference_id === inferenceId);
}

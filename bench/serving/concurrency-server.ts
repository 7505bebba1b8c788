/**
 * The local Sift service of `bench/serving/concurrency.ts`, in a process of its own (as it runs in production:
 * the load generator does not share its event loop). Started with IPC; answers `stats` with the
 * batcher's counters and the process's CPU time, `close` by shutting down.
 * Batching settings come from the environment (SIFT_ENCODER_BATCH_*, SIFT_ORT_WORKER).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { OnnxEncoderRuntime } from '../../src/adapters/onnx/encoderRuntime';
import { requireRuntime } from '../../src/core/models';
import { silentLogger } from '../../src/http/logger';
import { startLocal } from '../../src/runtimes/local/main';
import { DEFAULT_MODELS_DIR } from '../../src/paths';

export interface ServerReady {
  url: string;
  key: string;
  settings: string;
}

const OPERATOR = 'svc_sk_bench-concurrency-operator-key-0123456789abcd';
const send = (m: unknown) => process.send!(m);

const dataDir = await mkdtemp(join(tmpdir(), 'sift-bench-concurrency-'));
const service = await startLocal({ port: 0, dataDir, adminKey: OPERATOR, logger: silentLogger, maxTrainingJobs: 0, modelsDir: DEFAULT_MODELS_DIR });
const team = await fetch(`${service.url}/teams`, { method: 'POST', headers: { 'x-api-key': OPERATOR, 'content-type': 'application/json' }, body: JSON.stringify({ name: 'bench' }) });
const key = ((await team.json()) as { api_key: { key: string } }).api_key.key;
const batcher = (requireRuntime(service.svc, 'encoder') as OnnxEncoderRuntime).batcher;
const settings = `wait ≤ ${batcher.maxWaitMs} ms, ≤ ${batcher.maxBatchTexts} texts / ${batcher.maxBatchChars} chars per engine call, ${batcher.passTexts} per encoder pass, ${batcher.maxInFlight} call(s) in flight per model, ORT ${process.env['SIFT_ORT_WORKER'] === '1' ? 'in a worker thread' : 'on the main thread'}`;
process.on('message', (m: string) => {
  if (m === 'stats') {
    const cpu = process.cpuUsage();
    send({ stats: batcher.stats(), cpuMs: (cpu.user + cpu.system) / 1000 });
  } else if (m === 'close') {
    void service
      .close()
      .then(() => rm(dataDir, { recursive: true, force: true }))
      .finally(() => process.exit(0));
  }
});
send({ url: service.url, key, settings } satisfies ServerReady);

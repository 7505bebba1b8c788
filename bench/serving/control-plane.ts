/**
 * Control-plane throughput and latency on this machine, through real HTTP against the local stack
 * (dynalite + s3rver on disk): `npm run bench:control-plane`.
 *
 *   GET /core/datasets            auth + a DynamoDB query over 20 datasets + JSON
 *   POST /projects (invalid body) auth + JSON parse + schema validation → 422: the same front half
 *                                 an inference request goes through before the model runs
 *   GET /health                   the bare HTTP + router floor, for comparison
 *
 * Each scenario uses its own team so the 20,000/min per-team limit never trips mid-run.
 */
import autocannon from 'autocannon';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../src/http/logger';
import { startLocal } from '../../src/runtimes/local/main';

const OPERATOR = 'svc_sk_bench-operator-key-0123456789abcdefghijklm';
const AMOUNT = Number(process.env['BENCH_REQUESTS'] ?? 5000);
const CONNECTIONS = Number(process.env['BENCH_CONNECTIONS'] ?? 16);

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'sift-bench-'));
  const service = await startLocal({ port: 0, dataDir: dir, adminKey: OPERATOR, logger: silentLogger });
  const post = async (path: string, body: unknown, key = OPERATOR) => {
    const res = await fetch(service.url + path, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return (await res.json()) as any;
  };
  const teamKey = async (name: string) => (await post('/teams', { name })).api_key.key as string;

  const listKey = await teamKey('bench-list');
  for (let i = 0; i < 20; i += 1) await post('/core/datasets/upload/url', { dataset_name: `ds-${i}`, file_name: 'rows.jsonl' }, listKey);
  const validateKey = await teamKey('bench-validate');

  const scenarios: { name: string; opts: autocannon.Options }[] = [
    { name: 'GET /health', opts: { url: `${service.url}/health` } },
    { name: 'GET /core/datasets', opts: { url: `${service.url}/core/datasets`, headers: { 'x-api-key': listKey } } },
    {
      name: 'POST /projects → 422 (auth + validation)',
      opts: {
        url: `${service.url}/projects`,
        method: 'POST',
        headers: { 'x-api-key': validateKey, 'content-type': 'application/json' },
        body: JSON.stringify({ name: '../not allowed', description: 'x'.repeat(200), extra: true }),
      },
    },
  ];
  process.stdout.write(`node ${process.version}, ${AMOUNT} requests per scenario, ${CONNECTIONS} connections\n`);
  process.stdout.write(`${'scenario'.padEnd(44)} ${'req/s'.padStart(9)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'non-2xx'.padStart(8)}\n`);
  for (const s of scenarios) {
    const result = await autocannon({ ...s.opts, amount: AMOUNT, connections: CONNECTIONS });
    const non2xx = result.non2xx;
    process.stdout.write(
      `${s.name.padEnd(44)} ${result.requests.average.toFixed(0).padStart(9)} ${String(result.latency.p50).padStart(8)} ${String(result.latency.p99).padStart(8)} ${String(non2xx).padStart(8)}\n`,
    );
  }
  await service.close();
  await rm(dir, { recursive: true, force: true });
}

await main();

/**
 * `npm run fuzz:api` is a deterministic gate (issue #25 item 8): a fixed number of cases per
 * operation, generated without randomness, no time budget. Here it runs twice on a few operations,
 * each run on a fresh server (FUZZ_REPEAT=2), and the script itself fails unless both runs sent the
 * same requests (scripts/fuzz_requests.py masks only the server's fresh ids, times and the run's key).
 *
 * The operations are the team ones: schemathesis creates teams (some billed in arrears) and then
 * tops them up, the state in which `POST /teams/{id}/credits` used to answer 400 to a schema-valid
 * request; it answers its declared 409 now, so the run passes.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REPO_ROOT } from '../../src/paths';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-fuzz-determinism-'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

function fuzz(env: Record<string, string>): Promise<{ code: number; stderr: string; stdout: string }> {
  return new Promise((resolve) => {
    execFile(
      'bash',
      [join(REPO_ROOT, 'scripts', 'fuzz-openapi.sh')],
      { cwd: REPO_ROOT, env: { ...process.env, TMPDIR: dir, ...env }, maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

test('two runs on fresh servers send the same requests, and the state conflicts they meet answer 409', async () => {
  const requestsOut = join(dir, 'requests.txt');
  const run = await fuzz({
    FUZZ_REPEAT: '2',
    FUZZ_EXAMPLES: '3',
    FUZZ_INCLUDE: '^(POST /teams|GET /teams|POST /teams/\\{id\\}/credits)$',
    FUZZ_REQUESTS_OUT: requestsOut,
  });
  expect({ code: run.code, tail: run.stdout.slice(-3000) + run.stderr.slice(-2000) }).toMatchObject({ code: 0 });
  const same = /fuzz-openapi: 2 runs sent the same (\d+) requests/.exec(run.stderr);
  expect(same).not.toBeNull();
  const requests = (await readFile(requestsOut, 'utf8')).trim().split('\n');
  expect(requests).toHaveLength(Number(same![1]));
  // it met the state: teams created in arrears, then topped up by id (an id from an earlier answer)
  expect(
    requests.some((r) => r.startsWith('["POST", "/teams", ') && r.includes('\\"credit_balance_usd\\": null')),
  ).toBe(true);
  expect(requests.some((r) => r.startsWith('["POST", "/teams/<uuid>/credits", '))).toBe(true);
}, 900_000);

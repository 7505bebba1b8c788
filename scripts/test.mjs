#!/usr/bin/env node
/**
 * `npm test`: every check, in order, with one scratch directory for the whole run.
 *
 * Why: the suite writes gigabytes of scratch files (trained checkpoints under pytest's tmp_path, ONNX
 * copies in the encoder cache, synthesized CDK assemblies, local stacks). Left in the machine's /tmp
 * they add up run after run, and on a shared disk a full /tmp fails the next run's `npm install` with
 * ENOSPC. Every step runs with TMPDIR pointing at a fresh directory (Node's os.tmpdir(), Python's
 * tempfile and Chromium all honour it) that is removed when the run ends, pass, fail or Ctrl-C.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

// Fast checks first: lint (Biome over the TypeScript, ruff over containers/) and both typechecks
// (the service's and the console's) fail in seconds, before the long test steps.
const STEPS = ['check:deps', 'lint', 'lint:py', 'format:check', 'typecheck', 'typecheck:web', 'test:unit', 'test:trainer', 'fuzz:api'];

const scratch = mkdtempSync(join(tmpdir(), 'sift-test-run-'));
const env = { ...process.env, TMPDIR: scratch, TMP: scratch, TEMP: scratch };

function bytesUnder(path) {
  let total = 0;
  for (const entry of readdirSync(path, { withFileTypes: true })) {
    const full = join(path, entry.name);
    try {
      if (entry.isDirectory()) total += bytesUnder(full);
      else if (entry.isFile()) total += statSync(full).size;
    } catch {
      // a file removed while we count: nothing to add
    }
  }
  return total;
}

function cleanUp() {
  let size = 0;
  try {
    size = bytesUnder(scratch);
  } catch {
    // already gone
  }
  rmSync(scratch, { recursive: true, force: true });
  console.log(`[test] removed the run's scratch directory (${(size / 1024 ** 3).toFixed(2)} GiB): ${scratch}`);
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    cleanUp();
    process.exit(130);
  });
}

let failed;
const timings = [];
for (const step of STEPS) {
  console.log(`[test] npm run ${step}`);
  const started = Date.now();
  const r = spawnSync('npm', ['run', step], { stdio: 'inherit', env });
  timings.push(`${step} ${Math.round((Date.now() - started) / 1000)} s`);
  if (r.status !== 0) {
    failed = `${step} exited with ${r.status ?? r.signal}`;
    break;
  }
}
cleanUp();
// Each step's wall time, so a run that grows shows where (CI prints only the total).
console.log(`[test] step times: ${timings.join(', ')}`);
if (failed) {
  console.error(`[test] FAILED: ${failed}`);
  process.exit(1);
}
console.log('[test] every step passed');

#!/usr/bin/env node
// Installs whatever a fresh clone is missing before `npm start` / `npm test`, and nothing twice.
// Node built-ins only: this runs before node_modules exists.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (msg) => process.stderr.write(`[setup] ${msg}\n`);
const digest = (...files) => {
  const h = createHash('sha256');
  for (const f of files) h.update(existsSync(f) ? readFileSync(f) : '');
  return h.digest('hex');
};

function ensureNodeModules() {
  const stamp = join(root, 'node_modules', '.sift-setup');
  const want = digest(join(root, 'package-lock.json'));
  if (existsSync(stamp) && readFileSync(stamp, 'utf8') === want) return;
  // `npm install`, not `npm ci`: npm 11 omits other platforms' optional binaries from the lock
  // file and `npm ci` then refuses it (unrs-resolver, under jest). The lock still pins versions.
  log('installing npm dependencies');
  // onnxruntime-node's postinstall would fetch CUDA binaries from outside the registry.
  execFileSync('npm', ['install', '--no-audit', '--no-fund'], {
    cwd: root,
    stdio: 'inherit',
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip' },
  });
  writeFileSync(stamp, want);
}

ensureNodeModules();

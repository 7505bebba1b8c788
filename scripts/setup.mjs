#!/usr/bin/env node
// Installs whatever a fresh clone is missing before `npm start` / `npm test`, and nothing twice:
//   1. npm dependencies (skipped while package-lock.json is unchanged);
//   2. the training venv (PyTorch, gliner2, TRL, PEFT) and the offline base models, built once into
//      the per-user cache (src/local/paths.ts reads the same locations);
//   3. with --for-tests: the API document tools' venv (scripts/setup-api-check.sh).
// Node built-ins only: this runs before node_modules exists.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const log = (msg) => process.stderr.write(`[setup] ${msg}\n`);
const digest = (...files) => {
  const h = createHash('sha256');
  for (const f of files) h.update(existsSync(f) ? readFileSync(f) : '');
  return h.digest('hex');
};

const cacheDir = process.env.SIFT_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sift');
const venv = process.env.SIFT_VENV ?? join(cacheDir, 'venv');
const modelsDir = process.env.SIFT_MODELS_DIR ?? join(cacheDir, 'models');

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
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: 'skip', NODE_LLAMA_CPP_SKIP_DOWNLOAD: 'true' },
  });
  writeFileSync(stamp, want);
}

function ensureTrainingAndModels() {
  if (process.env.SIFT_SKIP_MODELS === '1') {
    log('SIFT_SKIP_MODELS=1: not installing the training venv or building models');
    return;
  }
  log(`training venv: ${venv}; models: ${modelsDir} (first run: a few GB of wheels and a model build)`);
  execFileSync(
    'bash',
    [
      join(root, 'containers', 'training', 'setup.sh'),
      '--mini-out',
      join(modelsDir, 'sift--gliner2-mini-v1'),
      '--decoder-out',
      join(modelsDir, 'HuggingFaceTB--SmolLM2-135M-Instruct'),
    ],
    { cwd: root, stdio: 'inherit', env: { ...process.env, SIFT_VENV: venv } },
  );
  // The decoder serves the GGUF itself (llama.cpp); training uses the HF checkpoint built above.
  execFileSync(process.execPath, [join(root, 'scripts', 'fetch-decoder.mjs')], { cwd: root, stdio: 'inherit', env: { ...process.env, SIFT_MODELS_DIR: modelsDir } });
}

// The API document checks' own small venv (openapi-spec-validator, schemathesis): tests only.
function ensureApiCheckTools() {
  execFileSync('bash', [join(root, 'scripts', 'setup-api-check.sh')], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}

ensureNodeModules();
ensureTrainingAndModels();
if (process.argv.includes('--for-tests')) ensureApiCheckTools();

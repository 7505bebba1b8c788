#!/usr/bin/env node
// Installs whatever a fresh clone is missing before `npm start` / `npm test`, and nothing twice:
//   1. npm dependencies (skipped while package-lock.json is unchanged; the server needs them);
//   2. the training venv (PyTorch, gliner2, TRL, PEFT) and the offline base models, built once into
//      the per-user cache (src/paths.ts reads the same locations) by scripts/build-models.mjs:
//      in the background for `npm start` (the server answers meanwhile), in the foreground for
//      `npm test` (`--for-tests`: the tests need the models);
//   3. the web console (web/): its own npm dependencies and `vite build` into web/dist, which the
//      local server serves at /console; both skipped while their inputs are unchanged (~5 s build);
//   4. with --for-tests: the tests' own small venvs (scripts/setup-test-venv.sh: the API document tools,
//      the Python client checks) and Chromium for the console's browser tests (Debian's package:
//      browser downloads from elsewhere do not work).
// Node built-ins only: this runs before node_modules exists.
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, openSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
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
  // the stamp is the lock file as the install left it: npm may add entries to it (other platforms'
  // optional binaries), and a stamp of the lock from before would re-run the install every time
  writeFileSync(stamp, digest(join(root, 'package-lock.json')));
}

// `--for-tests` (npm test) / `--foreground`: wait for the build instead of starting it in the background
const forTests = process.argv.includes('--for-tests') || process.argv.includes('--foreground');
const buildStatus = join(modelsDir, '.sift-build.json');
const buildLog = join(modelsDir, '.sift-build.log');
const buildLock = join(modelsDir, '.sift-build.lock');
const builder = [join(root, 'scripts', 'build-models.mjs')];

/** A build another start launched is still going when its status says so and its process lives. */
function buildRunning() {
  try {
    const s = JSON.parse(readFileSync(buildStatus, 'utf8'));
    if (s.state !== 'running') return undefined;
    process.kill(s.pid, 0);
    return s.pid;
  } catch {
    return undefined;
  }
}

function ensureTrainingAndModels() {
  if (process.env.SIFT_SKIP_MODELS === '1') {
    log('SIFT_SKIP_MODELS=1: not installing the training venv or building models');
    return;
  }
  mkdirSync(modelsDir, { recursive: true });
  if (forTests) {
    // Tests need the models: build (or wait for a running build) in the foreground, same lock.
    log(`training venv: ${venv}; models: ${modelsDir} (first run: a few GB of wheels and a model build)`);
    execFileSync('flock', [buildLock, process.execPath, ...builder], { cwd: root, stdio: 'inherit', env: { ...process.env, SIFT_VENV: venv, SIFT_MODELS_DIR: modelsDir } });
    return;
  }
  const running = buildRunning();
  if (running) {
    log(`the venv and model build is already running (pid ${running}; log ${buildLog})`);
    return;
  }
  // `npm start` answers at once: the venv and models build in a detached process (it outlives this
  // one and the server); the server reads its status file and publishes each model when it is built.
  // `flock -n`: a second start racing this one finds the lock taken and leaves the build to it.
  const out = openSync(buildLog, 'a');
  const child = spawn('flock', ['-n', buildLock, process.execPath, ...builder], {
    cwd: root,
    detached: true,
    stdio: ['ignore', out, out],
    env: { ...process.env, SIFT_VENV: venv, SIFT_MODELS_DIR: modelsDir },
  });
  child.unref();
  log(`building the training venv and offline models in the background (pid ${child.pid}; log ${buildLog});`);
  log('the server starts now: `sift models status`, GET /base-models and GET /ready show the progress');
}

// The tests' own small venvs: the API document checks (openapi-spec-validator, schemathesis) and the
// Python client checks (instructor, openai). Tests only.
function ensureTestVenvs() {
  for (const name of ['api-check', 'clients']) {
    execFileSync('bash', [join(root, 'scripts', 'setup-test-venv.sh'), name], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
  }
}

/** Hashes every file under `dir` (sorted paths): the console is rebuilt only when a source changed. */
function treeDigest(dir, h = createHash('sha256')) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) treeDigest(p, h);
    else h.update(p).update(readFileSync(p));
  }
  return h;
}

function ensureConsole() {
  const web = join(root, 'web');
  const depsStamp = join(web, 'node_modules', '.sift-setup');
  const depsWant = digest(join(web, 'package-lock.json'));
  if (!existsSync(depsStamp) || readFileSync(depsStamp, 'utf8') !== depsWant) {
    log('installing the console\'s npm dependencies (web/)');
    execFileSync('npm', ['ci', '--no-audit', '--no-fund'], { cwd: web, stdio: 'inherit' });
    writeFileSync(depsStamp, depsWant);
  }
  const buildStamp = join(web, 'dist', '.sift-build');
  const h = treeDigest(join(web, 'src'));
  for (const f of ['index.html', 'vite.config.ts', 'package-lock.json']) h.update(readFileSync(join(web, f)));
  const buildWant = h.digest('hex');
  if (existsSync(buildStamp) && readFileSync(buildStamp, 'utf8') === buildWant) return;
  log('building the web console (web/dist, served at /console)');
  execFileSync('npm', ['run', 'build', '--silent'], { cwd: web, stdio: ['ignore', 'ignore', 'inherit'] });
  writeFileSync(buildStamp, buildWant);
}

// The console's browser tests drive Debian's Chromium (test/console/); install it when missing.
const CHROMIUM = process.env.SIFT_CHROMIUM ?? '/usr/bin/chromium';
function ensureChromium() {
  if (existsSync(CHROMIUM)) return;
  log(`installing Chromium for the console's browser tests (apt-get install chromium → ${CHROMIUM})`);
  try {
    const sudo = process.getuid?.() === 0 ? [] : ['sudo', '-n'];
    const apt = (...args) => execFileSync(sudo[0] ?? 'apt-get', [...sudo.slice(1), ...(sudo.length ? ['apt-get'] : []), ...args], { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    apt('update');
    apt('install', '-y', '--no-install-recommends', 'chromium');
  } catch (err) {
    // not fatal here: the browser test fails with a message that names what is missing
    log(`could not install Chromium (${err.message}); the console's browser tests will fail until ${CHROMIUM} exists`);
  }
}

ensureNodeModules();
ensureTrainingAndModels();
ensureConsole();
if (process.argv.includes('--for-tests')) {
  ensureTestVenvs();
  ensureChromium();
}

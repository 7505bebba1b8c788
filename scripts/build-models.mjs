#!/usr/bin/env node
// Builds what the service needs besides node_modules: the training venv and the offline base models,
// reporting progress in a status file the local server reads (src/local/modelBuild.ts parses it):
//   <modelsDir>/.sift-build.json   {state, pid, stage, venv, models: {<id>: {state, stage, step, total, eta_seconds, error}}}
//   <modelsDir>/.sift-build.log    everything the steps print (when run in the background)
// scripts/setup.mjs runs it under `flock <modelsDir>/.sift-build.lock`: detached on `npm start`,
// in the foreground for `npm test`. Each step skips itself when its output is up to date.
// Env: SIFT_CACHE_DIR / SIFT_VENV / SIFT_MODELS_DIR (locations), SIFT_PYTHON (the base Python the
// venv is made from), SIFT_BUILD_MODELS (comma list of catalog ids; default all offline models).
// Node built-ins only.
import { spawn } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const trainerDir = join(root, 'containers', 'training');
const cacheDir = process.env.SIFT_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sift');
const venv = process.env.SIFT_VENV ?? join(cacheDir, 'venv');
const modelsDir = process.env.SIFT_MODELS_DIR ?? join(cacheDir, 'models');
const statusFile = join(modelsDir, '.sift-build.json');

const MINI = 'sift/gliner2-mini-v1';
const DECODER = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const dirOf = (id) => join(modelsDir, id.replace('/', '--'));
const wanted = (process.env.SIFT_BUILD_MODELS ?? `${MINI},${DECODER}`).split(',').map((s) => s.trim()).filter(Boolean);
for (const id of wanted) {
  if (id !== MINI && id !== DECODER) {
    process.stderr.write(`build-models: SIFT_BUILD_MODELS names '${id}', which is not built offline (${MINI}, ${DECODER})\n`);
    process.exit(2);
  }
}

const now = () => new Date().toISOString();
const status = {
  state: 'running',
  pid: process.pid,
  started_at: now(),
  updated_at: now(),
  log: join(modelsDir, '.sift-build.log'),
  stage: 'venv',
  venv: { state: 'building' },
  models: Object.fromEntries(wanted.map((id) => [id, { state: 'pending' }])),
};

/** Written whole then renamed, so a reader never sees half a file. */
function save() {
  status.updated_at = now();
  mkdirSync(modelsDir, { recursive: true });
  const tmp = `${statusFile}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(status, null, 2) + '\n');
  renameSync(tmp, statusFile);
}

let current; // the step's process, stopped with the build

/** Runs one step; stdout lines go to `onLine` (JSON events) and are echoed; resolves with the exit and stderr tail. */
function step(cmd, args, opts, onLine = () => {}) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
    current = child;
    const tail = [];
    createInterface({ input: child.stdout }).on('line', (line) => {
      process.stdout.write(line + '\n');
      onLine(line);
    });
    createInterface({ input: child.stderr }).on('line', (line) => {
      process.stderr.write(line + '\n');
      tail.push(line);
      if (tail.length > 5) tail.shift();
    });
    child.once('error', (err) => resolve({ code: -1, tail: [err.message] }));
    child.once('close', (code, signal) => resolve({ code: code ?? -1, signal, tail }));
  });
}

const reason = (what, r, event) =>
  event?.error ? `${what}: ${event.error}` : `${what} exited with ${r.signal ?? `code ${r.code}`}${r.tail.length ? `: ${r.tail.at(-1)}` : ''}`;

/** Builds one model with a `sift_trainer` module, turning its event lines into the model's progress. */
async function buildModel(id, module, extra = async () => ({ code: 0, tail: [] })) {
  const m = status.models[id];
  status.stage = id;
  Object.assign(m, { state: 'building', stage: 'starting' });
  save();
  let failedEvent;
  let first; // the first progress event: the rate between it and the latest gives the ETA
  const python = join(venv, 'bin', 'python');
  const env = { ...process.env, PYTHONUNBUFFERED: '1', HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1' };
  const r = await step(python, ['-m', module, '--out', dirOf(id)], { cwd: trainerDir, env }, (line) => {
    let e;
    try {
      e = JSON.parse(line);
    } catch {
      return;
    }
    if (e.event === 'progress' && Number.isFinite(e.step)) {
      const t = Date.now();
      first ??= { t, step: e.step };
      Object.assign(m, { stage: 'training', step: e.step, total: e.total_steps || undefined });
      const rate = e.step > first.step ? (t - first.t) / (e.step - first.step) : undefined;
      m.eta_seconds = rate && m.total ? Math.round((rate * (m.total - e.step)) / 1000) : undefined;
      save();
    } else if (e.event === 'build_stage') {
      Object.assign(m, { stage: e.stage, eta_seconds: e.stage === 'stage1_done' ? undefined : m.eta_seconds });
      save();
    } else if (e.event === 'build_failed') failedEvent = e;
  });
  const more = r.code === 0 ? await extra() : undefined;
  if (r.code !== 0 || (more && more.code !== 0)) {
    Object.assign(m, { state: 'failed', error: r.code !== 0 ? reason(module, r, failedEvent) : reason('fetch-decoder', more) });
  } else {
    Object.assign(m, { state: 'done', stage: 'built', eta_seconds: undefined });
  }
  save();
}

async function main() {
  save();
  process.stderr.write(`build-models: venv ${venv}; models ${modelsDir}; status ${statusFile}\n`);
  const v = await step('bash', [join(trainerDir, 'setup.sh')], { cwd: root, env: { ...process.env, SIFT_VENV: venv } });
  if (v.code !== 0) {
    status.venv = { state: 'failed', error: reason('containers/training/setup.sh', v) };
    for (const m of Object.values(status.models)) Object.assign(m, { state: 'failed', error: 'the training venv could not be installed' });
  } else {
    status.venv = { state: 'done' };
    save();
    if (wanted.includes(MINI)) await buildModel(MINI, 'sift_trainer.build.build_mini');
    // The decoder serves the GGUF (llama.cpp); training uses the HF checkpoint prepare_decoder writes.
    if (wanted.includes(DECODER)) {
      await buildModel(DECODER, 'sift_trainer.build.prepare_decoder', () =>
        step(process.execPath, [join(root, 'scripts', 'fetch-decoder.mjs')], { cwd: root, env: { ...process.env, SIFT_MODELS_DIR: modelsDir } }),
      );
    }
  }
  const failed = [status.venv, ...Object.values(status.models)].filter((s) => s.state === 'failed');
  status.state = failed.length ? 'failed' : 'done';
  if (failed.length) status.error = failed.map((s) => s.error).join('; ');
  status.stage = status.state;
  status.finished_at = now();
  save();
  process.stderr.write(`build-models: ${status.state}${status.error ? ` (${status.error})` : ''}\n`);
  return failed.length ? 1 : 0;
}

/** Ends the build as failed: what it had not finished failed with it (never left `running`). */
function abandon(error) {
  current?.kill('SIGTERM');
  for (const s of [status.venv, ...Object.values(status.models)]) if (s.state === 'pending' || s.state === 'building') Object.assign(s, { state: 'failed', error });
  Object.assign(status, { state: 'failed', error, finished_at: now() });
  save();
  process.exit(1);
}

for (const sig of ['SIGTERM', 'SIGINT', 'SIGHUP']) process.once(sig, () => abandon(`the build was stopped (${sig})`));

main().then(
  (code) => process.exit(code),
  (err) => abandon(`build-models crashed: ${err.message}`),
);

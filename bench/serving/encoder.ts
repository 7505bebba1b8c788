/**
 * Encoder benchmark, side by side in one run on this machine: throughput (texts/s at batch 1, 8,
 * 32) and p50/p99 latency per call of the TS engine (onnxruntime-node fp32, and int8 when the model
 * has onnx/encoder.int8.onnx) vs the Python `gliner2` library on PyTorch CPU, same model, inputs
 * and schema (wnut17 test texts, its 6 entity types); plus entity F1 of fp32 and int8 on the
 * wnut17 test set (exact label+offsets).
 *
 * Both sides run with `--threads` (default 1) intra-op threads. Besides wall-clock texts/s it reports
 * CPU milliseconds per text (process CPU time, both sides): on a machine shared with other work, wall
 * time swings with the load while CPU time per text stays put, so the speed-up is given for both.
 *
 *   npx tsx bench/serving/encoder.ts [MODEL_DIR] [--texts 96] [--f1-texts 1287] [--threads 1] [--skip-python]
 *   (exports since sift-gliner2-fragments/2 carry onnx/encoder.int8.onnx; older ones:
 *    ~/.cache/sift/venv/bin/python -m sift_trainer.export.quantize_onnx MODEL_DIR, run in containers/training)
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { EncoderModel, type Precision } from '../../src/encoder/engine';
import { createLogger } from '../../src/http/logger';
import type { EncoderSchema } from '../../src/encoder/schema';
import { DEFAULT_PYTHON } from '../../src/paths';
import { defaultModelDir } from '../parity/encoder-parity';

const args = process.argv.slice(2);
const flag = (n: string, d: number) => (args.includes(n) ? Number(args[args.indexOf(n) + 1]) : d);
const dir = args[0] && !args[0].startsWith('--') ? args[0] : defaultModelDir();
const N = flag('--texts', 96);
const F1_N = flag('--f1-texts', 1287);
const BATCHES = [1, 8, 32];
const THREADS = flag('--threads', 1);
const DATA = process.env.SIFT_SHARED_DATA ?? join(process.cwd(), '..', 'shared', 'data');
const LABELS = ['person', 'group', 'location', 'creative work', 'product', 'corporation'];
const schema: EncoderSchema = { entities: LABELS.map((name) => ({ name })), classifications: [], structures: [], relations: [] };

interface Row {
  text: string;
  entities?: Array<{ label: string; start: number; end: number }>;
}
const rows: Row[] = readFileSync(join(DATA, 'wnut17/test.jsonl'), 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Row);
const texts = rows.slice(0, N).map((r) => r.text);

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};

interface Result {
  engine: string;
  batch: number;
  textsPerSec: number;
  p50: number;
  p99: number;
  cpuMsPerText: number;
}

async function benchTs(precision: Precision): Promise<{ results: Result[]; model: EncoderModel }> {
  const model = await EncoderModel.load(dir, { precision, threads: THREADS, logger: createLogger() });
  const results: Result[] = [];
  for (const bs of BATCHES) {
    await model.infer(texts.slice(0, bs), schema, { batchSize: bs }); // warm-up
    const lat: number[] = [];
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < texts.length; i += bs) {
      const t1 = performance.now();
      await model.infer(texts.slice(i, i + bs), schema, { batchSize: bs });
      lat.push(performance.now() - t1);
    }
    const secs = (performance.now() - t0) / 1000;
    const cpu = process.cpuUsage(c0);
    results.push({ engine: `TS onnxruntime ${precision}`, batch: bs, textsPerSec: texts.length / secs, p50: pct(lat, 50), p99: pct(lat, 99), cpuMsPerText: (cpu.user + cpu.system) / 1000 / texts.length });
  }
  return { results, model };
}

function benchPython(): Result[] {
  const py = DEFAULT_PYTHON; // the set-up's venv (SIFT_PYTHON / SIFT_VENV move it)
  const tmp = mkdtempSync(join(tmpdir(), 'enc-bench-'));
  const cases = BATCHES.map((bs) => ({ name: `b${bs}`, texts, schema, batch_size: bs, threshold: 0.5 }));
  writeFileSync(join(tmp, 'cases.json'), JSON.stringify(cases));
  const p = spawnSync(py, ['bench/parity/gliner2_ref.py', 'bench', dir, join(tmp, 'cases.json'), join(tmp, 'out.json')], { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, HF_HUB_OFFLINE: '1', REF_THREADS: String(THREADS), OMP_NUM_THREADS: String(THREADS), MKL_NUM_THREADS: String(THREADS) } });
  if (p.status !== 0) throw new Error('python benchmark failed');
  const out = JSON.parse(readFileSync(join(tmp, 'out.json'), 'utf8')) as Array<{ batch_size: number; texts: number; seconds: number; cpu_seconds: number; latencies_ms: number[] }>;
  return out.map((o) => ({ engine: 'Python gliner2 (PyTorch CPU)', batch: o.batch_size, textsPerSec: o.texts / o.seconds, p50: pct(o.latencies_ms, 50), p99: pct(o.latencies_ms, 99), cpuMsPerText: (o.cpu_seconds * 1000) / o.texts }));
}

async function f1(model: EncoderModel): Promise<{ p: number; r: number; f1: number }> {
  const sample = rows.slice(0, F1_N);
  const out = await model.infer(sample.map((r) => r.text), schema, { batchSize: 16 });
  let tp = 0;
  let fp = 0;
  let fn = 0;
  sample.forEach((row, i) => {
    const gold = new Set((row.entities ?? []).map((e) => `${e.label}|${e.start}|${e.end}`));
    const pred = new Set(Object.entries(out.results[i]!.entities ?? {}).flatMap(([label, spans]) => spans.map((s) => `${label}|${s.start}|${s.end}`)));
    for (const k of pred) (gold.has(k) ? tp++ : fp++);
    for (const k of gold) if (!pred.has(k)) fn++;
  });
  const p = tp / Math.max(1, tp + fp);
  const r = tp / Math.max(1, tp + fn);
  return { p, r, f1: (2 * p * r) / Math.max(1e-9, p + r) };
}

async function main(): Promise<void> {
  console.log(`model ${dir}; ${texts.length} wnut17 test texts, schema = ${LABELS.length} entity types; ${THREADS} thread(s) each side; ${cpus().length} CPU cores (load average ${loadavg()[0]!.toFixed(1)}); node ${process.version}`);
  const all: Result[] = [];
  const fp32 = await benchTs('fp32');
  all.push(...fp32.results);
  const hasInt8 = existsSync(join(dir, 'onnx/encoder.int8.onnx'));
  const int8 = hasInt8 ? await benchTs('int8') : undefined;
  if (int8) all.push(...int8.results);
  if (!args.includes('--skip-python')) all.push(...benchPython());
  console.log('\nengine                          batch   texts/s    p50 ms    p99 ms  CPU ms/text');
  for (const b of BATCHES)
    for (const r of all.filter((x) => x.batch === b))
      console.log(`${r.engine.padEnd(32)}${String(r.batch).padStart(5)}${r.textsPerSec.toFixed(1).padStart(10)}${r.p50.toFixed(1).padStart(10)}${r.p99.toFixed(1).padStart(10)}${r.cpuMsPerText.toFixed(1).padStart(13)}`);
  const py = all.filter((x) => x.engine.startsWith('Python'));
  if (py.length) {
    console.log('\nspeed-up vs Python (wall texts/s | CPU time per text):');
    for (const b of BATCHES) {
      const base = py.find((x) => x.batch === b)!;
      console.log(`  batch ${b}: ` + all.filter((x) => x.batch === b && !x.engine.startsWith('Python')).map((x) => `${x.engine} ${(x.textsPerSec / base.textsPerSec).toFixed(2)}× | ${(base.cpuMsPerText / x.cpuMsPerText).toFixed(2)}×`).join(', '));
    }
  }
  if (F1_N > 0) {
    const a = await f1(fp32.model);
    console.log(`\nwnut17 test (${Math.min(F1_N, rows.length)} texts) entity F1 (exact label+offsets, threshold 0.5): fp32 ${(a.f1 * 100).toFixed(2)} (P ${(a.p * 100).toFixed(1)} R ${(a.r * 100).toFixed(1)})`);
    if (int8) {
      const b = await f1(int8.model);
      console.log(`                                                   int8 ${(b.f1 * 100).toFixed(2)} (P ${(b.p * 100).toFixed(1)} R ${(b.r * 100).toFixed(1)}); Δ ${((b.f1 - a.f1) * 100).toFixed(2)} points`);
    }
  }
  await fp32.model.release();
  await int8?.model.release();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

/**
 * Fine-tuning quality, side by side in one run: Sift (a job through the public HTTP API of a locally
 * started service, with the service's defaults, scored by POST /core/evaluations on held-out rows)
 * vs the plain `gliner2` trainer with the library's own defaults (bench/parity/quality_plain.py, the same
 * base model and the same training rows, scored by Sift's Python scorer: the same exact-span micro
 * F1 rules). Prints test F1 and wall time per dataset and training size.
 *
 *   npm run bench:quality -- [--sets wnut17,conll04-entities,conll04-relations,banking77,snips,restaurant8k]
 *                            [--sizes 100,300,1000] [--test-rows 300 (0: all)] [--skip-plain | --skip-sift] [--training-type lora|full]
 *                            [--base-model ID] [--epochs N] [--learning-rate R]   (nr_epochs / learning_rate for the Sift jobs;
 *                                                                 default: the service's own choice)
 *
 * Data: SIFT_SHARED_DATA or ../shared/data (read at run time; nothing from it is kept in the repo).
 * Training uses one torch thread per trainer (SIFT_TORCH_THREADS, default 1) so runs on a shared
 * machine are comparable; a 1,000-row run takes tens of minutes per set on 2 CPU cores.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../src/http/logger';
import { startLocal } from '../../src/runtimes/local/main';
import { DEFAULT_MODELS_DIR, DEFAULT_PYTHON } from '../../src/paths';

type Row = Record<string, unknown> & { text: string };
const OPERATOR = 'svc_sk_bench-quality-operator-key-0123456789abcdefghij';

/**
 * Each benchmark set: a shared dataset, the columns of its rows that the set trains and scores, the metric
 * (the evaluation's micro F1; for a single-label set, where every row gets one top-1 prediction, that is
 * the accuracy) and issue #30's target for it.
 */
const SETS: Record<string, { dir: string; keep: string[]; metric: string; target?: number }> = {
  wnut17: { dir: 'wnut17', keep: ['entities'], metric: 'micro F1', target: 0.45 },
  'conll04-entities': { dir: 'conll04', keep: ['entities'], metric: 'micro F1', target: 0.75 },
  'conll04-relations': { dir: 'conll04', keep: ['relations'], metric: 'micro F1', target: 0.45 },
  banking77: { dir: 'banking77', keep: ['label'], metric: 'accuracy', target: 0.85 },
  // the issue's snips target is intent accuracy (its `label`); its slots are not trained or scored here
  snips: { dir: 'snips', keep: ['label'], metric: 'intent accuracy', target: 0.95 },
  restaurant8k: { dir: 'restaurant8k', keep: ['json_structures'], metric: 'micro F1' },
};

const args = process.argv.slice(2);
const opt = (name: string, d: string) => (args.includes(name) ? String(args[args.indexOf(name) + 1]) : d);
const sets = opt('--sets', Object.keys(SETS).join(',')).split(',');
const sizes = opt('--sizes', '100,300,1000').split(',').map(Number);
const testRows = Number(opt('--test-rows', '300')); // 0: the whole test split
const trainingType = opt('--training-type', '');
const epochs = opt('--epochs', '');
const learningRate = opt('--learning-rate', '');
const skipPlain = args.includes('--skip-plain');
const skipSift = args.includes('--skip-sift'); // the reference side alone (e.g. for a size Sift already ran)
// any served encoder: the embedded mini model, or one imported with `sift models import`/`pull` into the models dir
const BASE_MODEL = opt('--base-model', 'sift/gliner2-mini-v1');
const DATA = process.env['SIFT_SHARED_DATA'] ?? join(process.cwd(), '..', 'shared', 'data');
const threads = process.env['SIFT_TORCH_THREADS'] ?? '1';
process.env['SIFT_TORCH_THREADS'] = threads; // the service's trainer child inherits it
for (const s of sets) if (!SETS[s]) throw new Error(`unknown set '${s}' (known: ${Object.keys(SETS).join(', ')})`);

/** Seeded shuffle (mulberry32): the same rows every run, and never a file's sorted head. */
function shuffled<T>(xs: T[], seed: number): T[] {
  let a = seed >>> 0;
  const rand = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out = [...xs];
  for (let i = out.length - 1; i > 0; i -= 1) {
    const j = Math.floor(rand() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

async function readRows(set: string, split: 'train' | 'test'): Promise<Row[]> {
  const { dir, keep } = SETS[set]!;
  const raw = await readFile(join(DATA, dir, `${split}.jsonl`), 'utf8');
  return raw
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Row)
    .map((r) => Object.fromEntries([['text', r.text], ...keep.filter((k) => k in r).map((k) => [k, r[k]])]) as Row)
    .filter((r) => keep.some((k) => k in r));
}

interface Result {
  set: string;
  rows: number;
  path: string;
  f1: number | null;
  wall: number | null;
  /** classification sets: the route that answered (the pooled classifier or the GLiNER2 heads) */
  route?: string;
  note: string;
}

/**
 * The head that answered each classification task of an evaluation (`metrics.routes`: task → the route that
 * answered most of its rows; issue #30's pooled classifier or the GLiNER2 route).
 */
function routesOf(metrics: { routes?: Record<string, string> } | undefined): string | undefined {
  const routes = [...new Set(Object.values(metrics?.routes ?? {}))];
  return routes.length ? routes.join(', ') : undefined;
}

async function main() {
  const dir = await mkdtemp(join(tmpdir(), 'sift-bench-quality-'));
  const service = await startLocal({ port: 0, dataDir: dir, adminKey: OPERATOR, logger: silentLogger, maxTrainingJobs: 1, modelsDir: DEFAULT_MODELS_DIR });
  const call = async (method: string, path: string, body?: unknown, key = OPERATOR) => {
    const res = await fetch(service.url + path, {
      method,
      headers: { 'x-api-key': key, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as any };
  };
  const until = async <T>(read: () => Promise<T>, done: (v: T) => boolean): Promise<T> => {
    for (;;) {
      const v = await read();
      if (done(v)) return v;
      await new Promise((r) => setTimeout(r, 2000));
    }
  };
  const results: Result[] = [];
  try {
    const team = await call('POST', '/teams', { name: 'bench-quality' });
    const key = team.body.api_key.key as string;
    const models = (await call('GET', '/base-models', undefined, key)).body.data as { id: string; available: boolean }[];
    if (!models.find((m) => m.id === BASE_MODEL)?.available) throw new Error(`${BASE_MODEL} is not built: run npm start (or node scripts/setup.mjs) first`);
    const upload = async (name: string, rows: Row[]) => {
      const url = await call('POST', '/core/datasets/upload/url', { dataset_name: name, file_name: 'rows.jsonl' }, key);
      if (url.status !== 200) throw new Error(`upload url for ${name}: ${url.status} ${JSON.stringify(url.body)}`);
      const put = await fetch(url.body.upload_url, { method: 'PUT', body: rows.map((r) => JSON.stringify(r)).join('\n') + '\n' });
      if (!put.ok) throw new Error(`PUT ${name}: ${put.status}`);
      await call('POST', '/core/datasets/upload/process', { dataset_name: name, version: url.body.version }, key);
      const ds = await until(
        () => call('GET', `/core/datasets/${name}/${url.body.version}`, undefined, key),
        (r) => !['processing', 'pending_upload'].includes(r.body?.status),
      );
      if (ds.body.status !== 'ready') throw new Error(`dataset ${name} is ${ds.body.status}: ${JSON.stringify(ds.body).slice(0, 400)}`);
    };
    /** Sift's side: a job with the service's defaults, then an evaluation of the finished job on the test rows. */
    const siftResult = async (set: string, n: number, name: string, testName: string): Promise<Result> => {
      const t0 = Date.now();
      const created = await call('POST', '/core/training-jobs', {
        model_name: name, base_model: BASE_MODEL, datasets: [{ name }], ...(trainingType ? { training_type: trainingType } : {}),
        ...(epochs ? { nr_epochs: Number(epochs) } : {}),
        ...(learningRate ? { learning_rate: Number(learningRate) } : {}),
      }, key);
      if (created.status !== 201) throw new Error(`job for ${name}: ${created.status} ${JSON.stringify(created.body)}`);
      const job = await until(() => call('GET', `/core/training-jobs/${created.body.id}`, undefined, key), (r) => ['complete', 'failed', 'stopped'].includes(r.body.status));
      const wall = (Date.now() - t0) / 1000;
      if (job.body.status !== 'complete') {
        return { set, rows: n, path: 'sift', f1: null, wall, note: `job ${job.body.status}: ${String(job.body.error).slice(0, 120)}` };
      }
      // the learning curve: validation F1 of each saved checkpoint, in training order
      const saved = (await call('GET', `/core/training-jobs/${created.body.id}/checkpoints`, undefined, key)).body?.checkpoints ?? [];
      const curve = (saved as { epoch: number | null; metrics?: { f1?: number } }[])
        // the chosen checkpoint is listed again as the final model: one point per epoch
        .filter((c, i, all) => typeof c.metrics?.f1 === 'number' && all.findIndex((o) => o.epoch === c.epoch) === i)
        .map((c) => `${c.epoch ?? '?'}:${c.metrics!.f1!.toFixed(3)}`)
        .join(' ');
      const ev = await call('POST', '/core/evaluations', { base_model: created.body.id, dataset_name: testName }, key);
      const scored = await until(() => call('GET', `/core/evaluations/${ev.body.id}`, undefined, key), (r) => r.body.status !== 'running');
      const route = SETS[set]!.keep.some((k) => k === 'label' || k === 'labels') ? (routesOf(scored.body.metrics) ?? 'not reported') : undefined;
      return {
        set, rows: n, path: 'sift', f1: scored.body.metrics?.f1 ?? null, wall, ...(route ? { route } : {}),
        note: `${job.body.training_type}${learningRate ? ` at ${learningRate}` : ''}, ${job.body.nr_epochs} epochs, ${job.body.progress?.total_steps ?? '?'} steps; validation F1 ${job.body.metrics?.f1?.toFixed(3)}${curve ? ` (epoch:F1 ${curve})` : ''}${job.body.warnings?.length ? '; warned' : ''}`,
      };
    };
    for (const set of sets) {
      const train = shuffled(await readRows(set, 'train'), 13);
      const test = shuffled(await readRows(set, 'test'), 17).slice(0, testRows || undefined);
      const testName = `${set}-test`;
      await upload(testName, test);
      for (const n of sizes) {
        const rows = train.slice(0, n);
        const name = `${set}-${n}`;
        await upload(name, rows);
        if (!skipSift) {
          results.push(await siftResult(set, n, name, testName));
          process.stdout.write(`${JSON.stringify(results.at(-1))}\n`);
        }
        if (skipPlain) continue;
        const spec = join(dir, `${name}.plain.json`);
        await writeFile(spec, JSON.stringify({ base: join(DEFAULT_MODELS_DIR, BASE_MODEL.replace('/', '--')), train: rows, test, threads: Number(threads), seed: 42 }));
        const p = spawnSync(DEFAULT_PYTHON, ['bench/parity/quality_plain.py', spec], { encoding: 'utf8', env: { ...process.env, HF_HUB_OFFLINE: '1' }, maxBuffer: 1 << 26 });
        const line = p.stdout.trim().split('\n').at(-1) ?? '';
        if (p.status === 0 && line.startsWith('{')) {
          const r = JSON.parse(line) as { f1: number; wall_s: number; epochs: number; batch_size: number; steps: number };
          results.push({ set, rows: n, path: 'plain gliner2', f1: r.f1, wall: r.wall_s, note: `full, ${r.epochs} epochs, batch ${r.batch_size}, ${r.steps} steps` });
        } else {
          const why = (p.stderr || '').trim().split('\n').filter((l) => /Error|error/.test(l)).at(-1) ?? `exit ${p.status}`;
          results.push({ set, rows: n, path: 'plain gliner2', f1: null, wall: null, note: `failed: ${why.slice(0, 140)}` });
        }
        process.stdout.write(`${JSON.stringify(results.at(-1))}\n`);
      }
    }
  } finally {
    await service.close();
    await rm(dir, { recursive: true, force: true });
  }
  const f = (v: number | null | undefined, d: number) => (v === null || v === undefined ? '-' : v.toFixed(d));
  const met = (set: string, v: number | null | undefined) => {
    const target = SETS[set]!.target;
    return target === undefined || v === null || v === undefined ? '-' : v >= target ? 'met' : 'not met';
  };
  process.stdout.write(
    `\ntest rows per set: ${testRows}; torch threads per trainer: ${threads}; ${cpus().length} CPU cores; ` +
      `wall = job created -> complete (sift: training, checkpoints, export), load + train (plain)\n`,
  );
  process.stdout.write(
    '| set (metric) | train rows | target | Sift | met | Sift wall s | route | plain gliner2 | met | plain wall s | Sift notes |\n' +
      '|---|---:|---:|---:|---|---:|---|---:|---|---:|---|\n',
  );
  for (const set of sets)
    for (const n of sizes) {
      const sift = results.find((r) => r.set === set && r.rows === n && r.path === 'sift');
      const plain = results.find((r) => r.set === set && r.rows === n && r.path !== 'sift');
      if (!sift && !plain) continue;
      const target = SETS[set]!.target;
      process.stdout.write(
        `| ${set} (${SETS[set]!.metric}) | ${n} | ${target === undefined ? '-' : `≥ ${target}`} | ${f(sift?.f1, 3)} | ${met(set, sift?.f1)} | ${f(sift?.wall, 0)} | ` +
          `${sift?.route ?? '-'} | ${f(plain?.f1, 3)} | ${met(set, plain?.f1)} | ${f(plain?.wall, 0)} | ${[sift?.note, plain && `plain: ${plain.note}`].filter(Boolean).join('; ')} |\n`,
      );
    }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});

/**
 * Memory per loaded encoder model: resident set size (RSS) of a fresh Node process after
 * `EncoderModel.load` of the same model directory 1, 2 and 3 times (separate sessions, as three models
 * would be), and after one `infer` on each (onnxruntime's arena grows on the first run), for fp32
 * and int8. Each precision runs in its own child process so one does not inherit the other's heap.
 *
 *   npx tsx bench/serving/encoder-memory.ts [MODEL_DIR] [--models 3] [--threads 1]
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { EncoderModel, type Precision } from '../../src/encoder/engine';
import { createLogger } from '../../src/http/logger';
import type { EncoderSchema } from '../../src/encoder/schema';
import { defaultModelDir } from '../parity/encoder-parity';

const args = process.argv.slice(2);
const flag = (n: string, d: number) => (args.includes(n) ? Number(args[args.indexOf(n) + 1]) : d);
const dir = args[0] && !args[0].startsWith('--') ? args[0] : defaultModelDir();
const MODELS = flag('--models', 3);
const THREADS = flag('--threads', 1);
const MB = (b: number) => (b / 2 ** 20).toFixed(0);
const schema: EncoderSchema = { entities: ['person', 'location', 'corporation'].map((name) => ({ name })), classifications: [], structures: [], relations: [] };
const TEXT = 'Tim Cook met Satya Nadella in Paris to talk about Apple and Microsoft.';

async function child(precision: Precision): Promise<void> {
  const rss = () => process.memoryUsage().rss;
  const base = rss();
  console.log(`${precision}: RSS before any model ${MB(base)} MiB`);
  const models: EncoderModel[] = [];
  let prev = base;
  for (let i = 1; i <= MODELS; i++) {
    models.push(await EncoderModel.load(dir, { precision, threads: THREADS, logger: createLogger() }));
    const loaded = rss();
    await models[i - 1]!.infer([TEXT], schema, { batchSize: 1 });
    const ran = rss();
    console.log(`${precision}: ${i} model(s): RSS ${MB(loaded)} MiB after load, ${MB(ran)} MiB after one infer; this model +${MB(ran - prev)} MiB, mean +${MB((ran - base) / i)} MiB per model`);
    prev = ran;
  }
  for (const m of models) await m.release();
}

async function main(): Promise<void> {
  const childArg = args.indexOf('--child');
  if (childArg >= 0) return child(args[childArg + 1] as Precision);
  const precisions: Precision[] = existsSync(join(dir, 'onnx/encoder.int8.onnx')) ? ['fp32', 'int8'] : ['fp32'];
  console.log(`model ${dir}; ${MODELS} loads of it per precision, each in a fresh process`);
  for (const p of precisions) {
    const r = spawnSync(process.execPath, [...process.execArgv, process.argv[1]!, dir, '--models', String(MODELS), '--threads', String(THREADS), '--child', p], { stdio: 'inherit' });
    if (r.status !== 0) throw new Error(`${p} child failed`);
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

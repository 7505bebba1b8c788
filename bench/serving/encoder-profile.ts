/**
 * Where the encoder engine's time goes per batch size: each ONNX session (by name) vs everything
 * else (tokenization, padding, gathering, JS scoring and decoding), on the wnut17 texts and 6 entity
 * types bench/serving/encoder.ts uses. Session time is measured around `SessionSet.run` (the native call and
 * its tensor wrapping); "host" is the rest of `infer`.
 *
 *   npx tsx bench/serving/encoder-profile.ts [MODEL_DIR] [--texts 64] [--int8] [--threads 1]
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EncoderModel } from '../../src/encoder/engine';
import { createLogger } from '../../src/http/logger';
import type { EncoderSchema } from '../../src/encoder/schema';
import { defaultModelDir } from '../parity/encoder-parity';

const args = process.argv.slice(2);
const flag = (n: string, d: number) => (args.includes(n) ? Number(args[args.indexOf(n) + 1]) : d);
const dir = args[0] && !args[0].startsWith('--') ? args[0] : defaultModelDir();
const N = flag('--texts', 64);
const DATA = process.env.SIFT_SHARED_DATA ?? join(process.cwd(), '..', 'shared', 'data');
const LABELS = ['person', 'group', 'location', 'creative work', 'product', 'corporation'];
const schema: EncoderSchema = { entities: LABELS.map((name) => ({ name })), classifications: [], structures: [], relations: [] };
const texts = readFileSync(join(DATA, 'wnut17/test.jsonl'), 'utf8').split('\n').filter(Boolean).slice(0, N).map((l) => (JSON.parse(l) as { text: string }).text);

async function main(): Promise<void> {
  const model = await EncoderModel.load(dir, { precision: args.includes('--int8') ? 'int8' : 'fp32', threads: flag('--threads', 1), logger: createLogger() });
  // wrap the session set: time per fragment and count runs
  const sessions = (model as unknown as { sessions: { run: (n: string, f: unknown) => Promise<unknown> } }).sessions;
  const run = sessions.run.bind(sessions);
  const ms = new Map<string, number>();
  const calls = new Map<string, number>();
  sessions.run = async (n, f) => {
    const t = performance.now();
    const out = await run(n, f);
    ms.set(n, (ms.get(n) ?? 0) + performance.now() - t);
    calls.set(n, (calls.get(n) ?? 0) + 1);
    return out;
  };
  // and the engine's stages: tokenization (tokenizeAll) and runBatch (sessions + JS scoring/decoding)
  const stage = new Map<string, number>();
  type Methods = Record<string, (...a: unknown[]) => Promise<unknown>>;
  const targets: Array<[Methods, string]> = [
    [(model as unknown as { tok: Methods }).tok, 'tokenizeAll'], // tokenize.ts PromptTokens
    [model as unknown as Methods, 'runBatch'],
  ];
  for (const [m, name] of targets) {
    const f = m[name];
    if (typeof f !== 'function') continue;
    const bound = f.bind(m);
    m[name] = async (...a: unknown[]) => {
      const t = performance.now();
      try {
        return await bound(...a);
      } finally {
        stage.set(name, (stage.get(name) ?? 0) + performance.now() - t);
      }
    };
  }
  console.log(`model ${dir}; ${texts.length} texts; ${LABELS.length} entity types; fragments: ${Object.keys((sessions as unknown as { s?: object }).s ?? {}).join(', ')}`);
  for (const bs of [1, 8, 32]) {
    await model.infer(texts.slice(0, bs), schema, { batchSize: bs }); // warm-up
    ms.clear();
    calls.clear();
    stage.clear();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    for (let i = 0; i < texts.length; i += bs) await model.infer(texts.slice(i, i + bs), schema, { batchSize: bs });
    const total = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    const sess = [...ms.values()].reduce((a, b) => a + b, 0);
    const parts = [...ms.entries()].map(([n, t]) => `${n} ${(t / texts.length).toFixed(2)} (${calls.get(n)} runs)`).join(', ');
    console.log(`batch ${String(bs).padStart(2)}: ${(texts.length / (total / 1000)).toFixed(1)} texts/s (CPU ${((cpu.user + cpu.system) / 1000 / texts.length).toFixed(1)} ms/text); per text ms: total ${(total / texts.length).toFixed(2)}, host ${((total - sess) / texts.length).toFixed(2)} (tokenize ${((stage.get('tokenizeAll') ?? 0) / texts.length).toFixed(2)}, runBatch JS ${(((stage.get('runBatch') ?? sess) - sess) / texts.length).toFixed(2)}); ${parts}`);
  }
  await model.release();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

/**
 * The TS engine's tokenizer on large SentencePiece vocabularies (issue #27): mDeBERTa-v3's 250k-piece
 * Unigram (fastino/gliner2-multi-v1) against DeBERTa-v3's small test one. Prints, per tokenizer.json:
 * load time and RSS added by `Tokenizer.fromFile` (what EncoderModel.load does), and per-text latency of
 * the engine's own tokenization (src/encoder/tokenize.ts: every word of the text as a pre-token, one
 * `encodeBatch` without special tokens, nothing cached) and of a plain `encode` of the whole text.
 *
 *   npx tsx bench/serving/tokenizer.ts [CHECKPOINT_DIR ...] [--texts 200] [--rounds 3]
 *
 * Without directories it builds the random-initialised checkpoints itself (containers/training
 * `sift_trainer.build.architectures`, tiny, seed 0) into a temp dir: mdeberta-v3 and deberta-v3-count_lstm.
 * Each directory is measured in a fresh child process, so one tokenizer's memory never counts for the next.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_PYTHON, REPO_ROOT } from '../../src/paths';

const args = process.argv.slice(2);
const flag = (n: string, d: number) => (args.includes(n) ? Number(args[args.indexOf(n) + 1]) : d);
const N = flag('--texts', 200);
const ROUNDS = flag('--rounds', 3);

/** Several scripts, as the multilingual model serves them; repeated with a counter so no two texts are equal. */
const BASE = [
  'Tim Cook announced that Apple will open a new office in Austin, Texas next March.',
  'José Álvarez from Société Générale visited São Paulo and Kraków on 5 May 2025.',
  'Der Kunde bestellte ein neues Telefon, aber die Lieferung kam zwei Wochen zu spät.',
  'Владимир встретился с Анной в Москве, чтобы обсудить новый контракт.',
  'Η εταιρεία άνοιξε νέο γραφείο στην Αθήνα τον περασμένο μήνα.',
  'وقع الرئيس الاتفاقية في القاهرة بحضور وزير الخارجية.',
  'प्रधानमंत्री ने दिल्ली में नई परियोजना का उद्घाटन किया।',
  '東京で新しい会社が設立され、社長は田中さんです。',
];
const TEXTS = Array.from({ length: N }, (_, i) => `${BASE[i % BASE.length]} (${i})`);

async function measure(dir: string): Promise<Record<string, unknown>> {
  const { Tokenizer } = await import('tokenizers');
  const file = join(dir, 'tokenizer.json');
  global.gc?.();
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  const tokenizer = Tokenizer.fromFile(file);
  const loadMs = performance.now() - t0;
  await tokenizer.encode('warm up');
  global.gc?.();
  const rssAdded = process.memoryUsage().rss - rss0;
  const words = TEXTS.map((t) => t.split(/\s+/).filter(Boolean));
  const perText = { engine: [] as number[], whole: [] as number[], tokens: 0 };
  for (let r = 0; r < ROUNDS; r++) {
    let t = performance.now();
    let tokens = 0;
    for (const w of words) {
      const enc = await tokenizer.encodeBatch(w, { addSpecialTokens: false });
      tokens += enc.reduce((n, e) => n + e.getIds().length, 0);
    }
    perText.engine.push((performance.now() - t) / N);
    perText.tokens = tokens / N;
    t = performance.now();
    for (const text of TEXTS) await tokenizer.encode(text, null, { addSpecialTokens: false });
    perText.whole.push((performance.now() - t) / N);
  }
  const best = (xs: number[]) => Math.min(...xs);
  return {
    dir,
    vocab: tokenizer.getVocabSize(),
    tokenizer_json_mb: +(statSync(file).size / 2 ** 20).toFixed(1),
    load_ms: +loadMs.toFixed(1),
    rss_added_mb: +(rssAdded / 2 ** 20).toFixed(1),
    tokens_per_text: +perText.tokens.toFixed(1),
    engine_ms_per_text: +best(perText.engine).toFixed(3),
    encode_ms_per_text: +best(perText.whole).toFixed(3),
  };
}

async function main(): Promise<void> {
  if (args[0] === '--child') {
    process.stdout.write(`${JSON.stringify(await measure(args[1]!))}\n`);
    return;
  }
  let dirs = args.filter((a, i) => !a.startsWith('--') && !args[i - 1]?.startsWith('--'));
  let scratch: string | undefined;
  if (!dirs.length) {
    scratch = mkdtempSync(join(tmpdir(), 'sift-bench-tok-'));
    for (const arch of ['mdeberta-v3', 'deberta-v3-count_lstm']) {
      execFileSync(
        process.env.SIFT_PYTHON ?? DEFAULT_PYTHON,
        ['-m', 'sift_trainer.build.architectures', '--arch', arch, '--out', join(scratch, arch)],
        { cwd: join(REPO_ROOT, 'containers', 'training'), stdio: ['ignore', 'ignore', 'inherit'] },
      );
    }
    dirs = ['mdeberta-v3', 'deberta-v3-count_lstm'].map((a) => join(scratch!, a));
  }
  try {
    for (const dir of dirs) {
      const out = execFileSync(
        process.execPath,
        [
          '--expose-gc',
          '--import',
          'tsx',
          process.argv[1]!,
          '--child',
          dir,
          '--texts',
          String(N),
          '--rounds',
          String(ROUNDS),
        ],
        { encoding: 'utf8' },
      );
      process.stdout.write(out);
    }
  } finally {
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  }
}

main().catch((err) => {
  process.stderr.write(`${(err as Error).stack}\n`);
  process.exit(1);
});

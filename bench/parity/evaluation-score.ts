/**
 * Scores encoder predictions against dataset rows with Sift's evaluation scorer
 * (src/core/evaluation/scoring/index.ts) and prints the finalized metrics as JSON on stdout.
 *
 *   npx tsx bench/parity/evaluation-score.ts ROWS.jsonl PREDICTIONS.jsonl [--shard-size N]
 *
 * ROWS: dataset rows (validated like an upload); PREDICTIONS: one encoder API `result` per line,
 * in row order. Rows are scored in shards of N (default 100) that are merged, as an evaluation does.
 * Used by bench/parity/evaluation-seqeval.py; timing goes to stderr.
 */
import { readFileSync } from 'node:fs';
import { DatasetSummary, validateRow, type NormalizedRow } from '../../src/core/datasets/rows';
import { emptyCounts, evaluationSchemaFor, finalizeMetrics, mergeCounts, scoreRow, type EncoderPrediction } from '../../src/core/evaluation/scoring';

const args = process.argv.slice(2);
const shardAt = args.indexOf('--shard-size');
const shardSize = shardAt >= 0 ? Number(args[shardAt + 1]) : 100;
const [rowsPath, predsPath] = shardAt >= 0 ? args.filter((_, i) => i !== shardAt && i !== shardAt + 1) : args;
if (!rowsPath || !predsPath || !(shardSize > 0)) {
  console.error('usage: tsx bench/parity/evaluation-score.ts ROWS.jsonl PREDICTIONS.jsonl [--shard-size N]');
  process.exit(2);
}
const lines = (p: string) =>
  readFileSync(p, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as unknown);

const summary = new DatasetSummary();
const rows: NormalizedRow[] = lines(rowsPath).map((raw, i) => {
  const r = validateRow(raw, i + 1);
  if (!r.row) throw new Error(`row ${i + 1}: ${r.errors.map((e) => `${e.field}: ${e.message}`).join('; ')}`);
  summary.add(r.row, r.tasks, i + 1);
  return r.row;
});
const preds = lines(predsPath) as (EncoderPrediction | null)[];
if (preds.length !== rows.length) throw new Error(`${rows.length} rows but ${preds.length} predictions`);
const schema = evaluationSchemaFor(summary.describe());

const t0 = performance.now();
let total = emptyCounts();
for (let s = 0; s < rows.length; s += shardSize) {
  let shard = emptyCounts();
  for (let i = s; i < Math.min(rows.length, s + shardSize); i++) shard = mergeCounts(shard, scoreRow(rows[i]!, preds[i], { schema, row: i + 1 }));
  total = mergeCounts(total, JSON.parse(JSON.stringify(shard)));
}
const metrics = finalizeMetrics(total);
const ms = performance.now() - t0;
console.error(`scored ${rows.length} rows in ${ms.toFixed(1)} ms (${Math.round(rows.length / (ms / 1000))} rows/s); counts JSON ${JSON.stringify(total).length} bytes`);
console.log(JSON.stringify(metrics));

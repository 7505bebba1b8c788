#!/usr/bin/env node
// Sums the per-file CPU log that test/cpuAccountingEnvironment.cjs writes (SIFT_TEST_CPU_LOG=<file>
// npm run test:unit), heaviest first: where test:unit's CPU goes, for choosing what to make cheaper.
//   node scripts/test-cpu-report.mjs <log> [--top N]
import { readFileSync } from 'node:fs';

const [file, ...rest] = process.argv.slice(2);
if (!file) {
  console.error('usage: test-cpu-report.mjs <log> [--top N]');
  process.exit(2);
}
const top = rest[0] === '--top' ? Number(rest[1]) : Number.POSITIVE_INFINITY;
const rows = readFileSync(file, 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((line) => JSON.parse(line))
  .map((r) => ({ ...r, total_s: r.cpu_s + r.children_cpu_s }))
  .sort((a, b) => b.total_s - a.total_s);
const sum = (key) => rows.reduce((acc, r) => acc + r[key], 0);
const pad = (v, n) => String(v).padStart(n);
console.log(`${'cpu s'.padStart(8)} ${'worker'.padStart(8)} ${'children'.padStart(8)} ${'wall s'.padStart(8)}  file`);
for (const r of rows.slice(0, top))
  console.log(
    `${pad(r.total_s.toFixed(0), 8)} ${pad(r.cpu_s.toFixed(0), 8)} ${pad(r.children_cpu_s.toFixed(0), 8)} ${pad(r.wall_s.toFixed(0), 8)}  ${r.file}`,
  );
console.log(
  `${pad(sum('total_s').toFixed(0), 8)} ${pad(sum('cpu_s').toFixed(0), 8)} ${pad(sum('children_cpu_s').toFixed(0), 8)} ${pad(sum('wall_s').toFixed(0), 8)}  all ${rows.length} files`,
);

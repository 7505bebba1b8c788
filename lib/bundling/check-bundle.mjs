#!/usr/bin/env node
/**
 * esbuild afterBundling guard for every Lambda bundle (run by NodejsFunction
 * command hooks): fails the build if a forbidden package (onnxruntime,
 * node-llama-cpp, native `.node` addons) was bundled or is imported statically
 * (a lazy `await import()` of an external engine is allowed: it is not in the
 * bundle and local-mode-only code paths never run in Lambda), then removes the
 * metafile so it is not deployed.
 *
 * usage: node check-bundle.mjs <outputDir>
 */
import { readFileSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const FORBIDDEN = [/onnxruntime/i, /node-llama-cpp/i, /(^|\/)tokenizers(\/|$)/, /\.node$/];
const outputDir = process.argv[2];
if (!outputDir) {
  console.error('check-bundle: missing output directory');
  process.exit(2);
}
const metaPath = join(outputDir, 'index.meta.json');
if (!existsSync(metaPath)) {
  console.error(`check-bundle: ${metaPath} not found (bundling.metafile must be true)`);
  process.exit(2);
}
const meta = JSON.parse(readFileSync(metaPath, 'utf8'));
const offenders = new Set();
for (const input of Object.keys(meta.inputs ?? {})) {
  if (FORBIDDEN.some((re) => re.test(input))) offenders.add(input);
}
for (const output of Object.values(meta.outputs ?? {})) {
  for (const imp of output.imports ?? []) {
    if (imp.kind !== 'dynamic-import' && FORBIDDEN.some((re) => re.test(imp.path))) offenders.add(`import ${imp.path}`);
  }
}
rmSync(metaPath);
if (offenders.size > 0) {
  console.error(`check-bundle: forbidden modules in Lambda bundle ${outputDir}:\n  ${[...offenders].join('\n  ')}`);
  console.error(
    'ONNX Runtime and llama.cpp run on ECS and in local mode only: import them lazily (await import()) from Lambda-reachable code.',
  );
  process.exit(1);
}

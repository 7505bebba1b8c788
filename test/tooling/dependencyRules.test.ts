/**
 * The import rules of `npm run check:deps` (.dependency-cruiser.cjs) really fail: each rule is run,
 * with the repository's own config, over a scratch tree of the repository's layout (src/core,
 * src/http, src/adapters, src/encoder, lib, test) that holds one planted violation per rule, and must
 * name that rule for that file and no other; compliant files beside them must pass. The scratch
 * tree lives under os.tmpdir() and is deleted afterwards, so the real roots are never touched.
 * Also: src/core reads no process environment (which imports cannot show).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { REPO_ROOT } from '../../src/paths';

/** File (relative to the scratch root) → its content. */
type Tree = Record<string, string>;

/** Every module a planted file imports exists, so nothing fails for being unresolvable but the one meant to. */
const TARGETS: Tree = {
  'src/core/ports.ts': 'export interface Port { x: number }\n',
  'src/core/models.ts': 'export const model = 1;\n',
  'src/core/extraction/types.ts': 'export interface EncoderResult { x: number }\n',
  'src/http/app.ts': 'export const app = 1;\n',
  'src/adapters/store.ts': 'export const store = 1;\n',
  'src/encoder/engine.ts':
    "import type { EncoderResult } from '../core/extraction/types';\nexport type R = EncoderResult;\n",
  'src/runtimes/local/main.ts': 'export const main = 1;\n',
  'src/paths.ts': 'export const ROOT = 1;\n',
  // the other half of the planted cycle (src/core/cycleA.ts): a cycle is reported once, from either end
  'src/core/cycleB.ts': "import type { A } from './cycleA';\nexport interface B { a?: A }\n",
  'test/helpers/stack.ts': 'export const stack = 1;\n',
  // a package as it is installed (a resolved path under node_modules, not just a name)
  'node_modules/@aws-lambda-powertools/metrics/package.json': JSON.stringify({
    name: '@aws-lambda-powertools/metrics',
    version: '0.0.0',
    main: 'index.js',
  }),
  'node_modules/@aws-lambda-powertools/metrics/index.js': 'module.exports = {};\n',
  'node_modules/zod/package.json': JSON.stringify({ name: 'zod', version: '0.0.0', main: 'index.js' }),
  'node_modules/zod/index.js': 'module.exports = {};\n',
};

/** Planted file → its content and the rules it (with the files in `with`) must break: exactly these. */
const PLANTED: Record<string, { source: string; rules: string[]; with?: string[] }> = {
  'src/core/usesAdapter.ts': {
    source: "import { store } from '../adapters/store';\nexport const x = store;\n",
    rules: ['core-imports-no-adapter'],
  },
  'src/core/usesEngine.ts': {
    source: "import { type R } from '../encoder/engine';\nexport type X = R;\n",
    rules: ['core-imports-no-adapter'],
  },
  'src/core/usesRuntimePaths.ts': {
    source: "import { ROOT } from '../paths';\nexport const x = ROOT;\n",
    rules: ['core-imports-no-adapter'],
  },
  'src/core/usesHttp.ts': {
    source: "import { app } from '../http/app';\nexport const x = app;\n",
    rules: ['core-no-http'],
  },
  'src/core/usesOnnx.ts': {
    source: "export const load = () => import('onnxruntime-node');\n",
    rules: ['core-no-technology'],
  },
  'src/core/usesTokenizers.ts': {
    source: "import type { Tokenizer } from 'tokenizers';\nexport type T = Tokenizer;\n",
    rules: ['core-no-technology'],
  },
  'src/core/usesPowertools.ts': {
    source: "import * as m from '@aws-lambda-powertools/metrics';\nexport const x = m;\n",
    rules: ['core-no-technology'],
  },
  'src/core/usesSdk.ts': {
    source: "import { S3Client } from '@aws-sdk/client-s3';\nexport const x = S3Client;\n",
    rules: ['core-no-technology'],
  },
  'src/core/usesFs.ts': {
    source: "import { readFileSync } from 'node:fs';\nexport const x = readFileSync;\n",
    rules: ['core-no-technology'],
  },
  'src/core/datasets/usesOs.ts': {
    source: "import { tmpdir } from 'node:os';\nexport const x = tmpdir;\n",
    rules: ['core-no-technology'],
  },
  'src/core/usesWorkers.ts': {
    source: "import { Worker } from 'node:worker_threads';\nexport const x = Worker;\n",
    rules: ['core-no-technology'],
  },
  'src/core/usesChildProcess.ts': {
    source: "import { spawn } from 'child_process';\nexport const x = spawn;\n",
    rules: ['core-no-technology'],
  },
  'src/core/cycleA.ts': {
    source: "import type { B } from './cycleB';\nexport interface A { b?: B }\n",
    rules: ['no-core-cycles'],
    with: ['src/core/cycleB.ts'],
  },
  'src/encoder/usesCore.ts': {
    source: "import { model } from '../core/models';\nexport const x = model;\n",
    rules: ['engine-imports-only-core-vocabulary'],
  },
  'src/encoder/usesHttp.ts': {
    source: "import { app } from '../http/app';\nexport const x = app;\n",
    rules: ['engine-imports-only-core-vocabulary'],
  },
  'src/http/usesAdapter.ts': {
    source: "import { store } from '../adapters/store';\nexport const x = store;\n",
    rules: ['http-no-adapters'],
  },
  'src/http/usesEngine.ts': {
    source: "import type { R } from '../encoder/engine';\nexport type X = R;\n",
    rules: ['http-no-adapters'],
  },
  'src/adapters/usesLocal.ts': {
    source: "import { main } from '../runtimes/local/main';\nexport const x = main;\n",
    rules: ['adapters-no-runtime'],
  },
  'lib/usesAdapter.ts': {
    source: "import { store } from '../src/adapters/store';\nexport const x = store;\n",
    rules: ['lib-no-runtime-code'],
  },
  'src/adapters/usesTest.ts': {
    source: "import { stack } from '../../test/helpers/stack';\nexport const x = stack;\n",
    rules: ['production-no-tests'],
  },
  'test/usesMissing.test.ts': {
    source: "import { gone } from '../src/core/encoder/engine';\nexport const x = gone;\n",
    rules: ['not-to-unresolvable'],
  },
  // compliant: the core on its ports, a library and pure node; the engine on the core's vocabulary;
  // an adapter on the core and the neutral installation paths
  'src/core/compliant.ts': {
    source:
      "import type { Port } from './ports';\nimport { createHash } from 'node:crypto';\nimport * as z from 'zod';\nexport const x: [Port?, unknown?, unknown?] = [undefined, createHash, z];\n",
    rules: [],
  },
  'src/encoder/compliant.ts': {
    source:
      "import type { EncoderResult } from '../core/extraction/types';\nimport { Worker } from 'node:worker_threads';\nexport const x: [EncoderResult?, unknown?] = [undefined, Worker];\n",
    rules: [],
  },
  'src/adapters/compliant.ts': {
    source:
      "import { ROOT } from '../paths';\nimport type { Port } from '../core/ports';\nexport const x: [number, Port?] = [ROOT];\n",
    rules: [],
  },
};

const RULES_IN_CONFIG = (): string[] =>
  [...readFileSync(join(REPO_ROOT, '.dependency-cruiser.cjs'), 'utf8').matchAll(/^\s*name: '([a-z-]+)'/gm)].map(
    (m) => m[1]!,
  );

interface Violation {
  from: string;
  to: string;
  rule: { name: string };
}

let scratch: string;
let violations: Violation[];

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'sift-deprules-'));
  const tree: Tree = { ...TARGETS, ...Object.fromEntries(Object.entries(PLANTED).map(([f, p]) => [f, p.source])) };
  for (const [file, content] of Object.entries(tree)) {
    mkdirSync(dirname(join(scratch, file)), { recursive: true });
    writeFileSync(join(scratch, file), content);
  }
  writeFileSync(join(scratch, '.dependency-cruiser.cjs'), readFileSync(join(REPO_ROOT, '.dependency-cruiser.cjs')));
  writeFileSync(
    join(scratch, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { module: 'ESNext', moduleResolution: 'bundler', target: 'ES2022', strict: true },
    }),
  );
  const bin = join(REPO_ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');
  const run = spawnSync(
    process.execPath,
    [bin, 'src', 'lib', 'test', '--config', '.dependency-cruiser.cjs', '--output-type', 'json'],
    { cwd: scratch, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 },
  );
  if (!run.stdout) throw new Error(`depcruise printed nothing (exit ${run.status}): ${run.stderr}`);
  violations = (JSON.parse(run.stdout) as { summary: { violations: Violation[] } }).summary.violations;
}, 60_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

it('plants a violation of every rule the config declares', () => {
  const planted = new Set(Object.values(PLANTED).flatMap((p) => p.rules));
  expect([...planted].sort()).toEqual(RULES_IN_CONFIG().sort());
});

it.each(Object.entries(PLANTED))('%s breaks exactly its rules', (file, { rules, with: others = [] }) => {
  const found = [
    ...new Set(violations.filter((v) => v.from === file || others.includes(v.from)).map((v) => v.rule.name)),
  ].sort();
  expect(found).toEqual([...rules].sort());
});

it('reports nothing but the planted files', () => {
  const planted = new Set(Object.entries(PLANTED).flatMap(([file, p]) => [file, ...(p.with ?? [])]));
  expect(violations.filter((v) => !planted.has(v.from))).toEqual([]);
});

/** Files under `dir` whose code (comments aside) reads the process environment. */
function envReaders(root: string, dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(root, dir))) {
    const path = join(root, dir, name);
    if (statSync(path).isDirectory()) out.push(...envReaders(root, join(dir, name)));
    else if (/\.(ts|mts|mjs|js)$/.test(name)) {
      const code = readFileSync(path, 'utf8')
        .replace(/\/\*[\s\S]*?\*\//g, '')
        .replace(/(^|[^:])\/\/.*$/gm, '$1');
      if (/\bprocess\s*\.\s*env\b|\bprocess\s*\[\s*['"]env['"]\s*\]/.test(code)) out.push(relative(root, path));
    }
  }
  return out;
}

it('src/core reads no process environment (configuration is read by the runtime and passed in as svc.config)', () => {
  expect(envReaders(REPO_ROOT, 'src/core')).toEqual([]);
});

it('the environment check finds a planted read', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sift-envcheck-'));
  try {
    mkdirSync(join(dir, 'src/core/deep'), { recursive: true });
    writeFileSync(join(dir, 'src/core/deep/reads.ts'), "export const stage = process.env['SIFT_STAGE'] ?? 'local';\n");
    writeFileSync(
      join(dir, 'src/core/mentions.ts'),
      '/** SIFT_STAGE: process.env is read by the runtime */\nexport const x = 1; // not process.env\n',
    );
    expect(envReaders(dir, 'src/core')).toEqual([join('src/core/deep/reads.ts')]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

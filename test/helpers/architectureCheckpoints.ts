/**
 * Random-initialised GLiNER2 checkpoints at the released models' config shapes (issue #27), built
 * offline by containers/training `sift_trainer.build.architectures` (seeded: the same bytes every
 * run). All the requested architectures are built by one Python process (the imports are most of a
 * build's time), into a directory the caller owns — a test's temp dir, so nothing is cached between runs.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { DEFAULT_PYTHON, REPO_ROOT } from '../../src/paths';

/** `--arch` values of sift_trainer.build.architectures that the service serves, and the catalog model each stands for. */
export const SERVED_ARCHITECTURES = {
  'deberta-v3-count_lstm_v2': 'fastino/gliner2-base-v1',
  'deberta-v3-count_lstm': 'fastino/gliner2-large-v1',
  'mdeberta-v3': 'fastino/gliner2-multi-v1',
} as const;
export type ServedArchitecture = keyof typeof SERVED_ARCHITECTURES;

export interface BuiltCheckpoint {
  arch: string;
  dir: string;
  counting_layer: string | null;
  vocab_size: number;
  parameters: number;
  bytes: number;
  seconds: number;
}

const SCRIPT = `
import json, sys
from pathlib import Path
from sift_trainer.process import configure_process
configure_process()
from sift_trainer.build.architectures import build
for arch in sys.argv[2:]:
    print(json.dumps(build(arch, Path(sys.argv[1]) / arch, "tiny", 0)), flush=True)
`;

/** Builds `archs` (tiny, seed 0) under `dir/<arch>`; resolves with each build's summary. */
export function buildArchitectureCheckpoints(
  dir: string,
  archs: readonly string[],
  python = DEFAULT_PYTHON,
): Promise<Record<string, BuiltCheckpoint>> {
  return new Promise((ok, fail) => {
    const child = spawn(python, ['-c', SCRIPT, dir, ...archs], {
      cwd: join(REPO_ROOT, 'containers', 'training'),
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    child.stderr.on('data', (b: Buffer) => (err = (err + b.toString('utf8')).slice(-4000)));
    child.on('error', fail);
    child.on('close', (code) => {
      if (code !== 0) return fail(new Error(`building ${archs.join(', ')} exited with ${code}: ${err.trim()}`));
      const built: Record<string, BuiltCheckpoint> = {};
      // the tokenizer trainer prints blank progress lines to stdout: a summary is each line that is a JSON object
      for (const line of out.split('\n').filter((l) => l.startsWith('{'))) {
        const s = JSON.parse(line) as BuiltCheckpoint & { out: string };
        built[s.arch] = { ...s, dir: s.out };
      }
      const missing = archs.filter((a) => !built[a]);
      if (missing.length) return fail(new Error(`no build summary for ${missing.join(', ')}: ${out.slice(-2000)}`));
      ok(built);
    });
  });
}

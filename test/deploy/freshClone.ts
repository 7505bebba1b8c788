/**
 * A fresh clone of this checkout, offline: the files git carries (tracked, plus new files git does
 * not ignore), copied from the working tree into a temporary directory, with the installed
 * node_modules linked in as `npm ci` would have left them. What git ignores — web/dist, cdk.out,
 * caches — is absent, as it is after `git clone && npm ci`.
 */
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { REPO_ROOT } from '../../lib/paths';

export function freshClone(): string {
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  if (listed.status !== 0) throw new Error(`git ls-files failed: ${listed.stderr}`);
  const dir = mkdtempSync(join(tmpdir(), 'sift-fresh-clone-'));
  for (const file of listed.stdout.split('\0')) {
    // node_modules is an untracked symlink in helper worktrees; a deleted tracked file is not in a clone
    if (!file || file === 'node_modules' || file.startsWith('web/node_modules')) continue;
    if (!existsSync(join(REPO_ROOT, file))) continue;
    mkdirSync(dirname(join(dir, file)), { recursive: true });
    cpSync(join(REPO_ROOT, file), join(dir, file), { verbatimSymlinks: true });
  }
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

/** The offline synth docs/reference/deploy.md tells a team to run (test/deploy/deployDoc.test.ts checks it is there). */
export const DOC_SYNTH_ARGS = ['synth', '--quiet'] as const;

/** Runs the project's own CDK CLI (what `npx cdk` runs after `npm ci`) in `cwd`, with no network use. */
export function cdk(cwd: string, args: string[]): SpawnSyncReturns<string> {
  return spawnSync(join(REPO_ROOT, 'node_modules', '.bin', 'cdk'), [...args, '--no-notices'], {
    cwd,
    encoding: 'utf8',
    env: { ...process.env, CDK_DISABLE_CLI_TELEMETRY: 'true' },
  });
}

/**
 * Runs one of the Python client checks in test/clients (instructor, the `openai` SDK's fine-tuning
 * calls) in the pinned client venv: scripts/requirements-clients.txt, created once by `npm test`'s
 * set-up, then only a stamp check. Returns what the script printed.
 */
import { execFile, execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../../src/paths';

export async function runPythonClientCheck(script: string, args: string[]): Promise<string> {
  const python = execFileSync('bash', [join(REPO_ROOT, 'scripts', 'setup-test-venv.sh'), 'clients'], {
    encoding: 'utf8',
  }).trim();
  const { stdout } = await promisify(execFile)(python, [join(REPO_ROOT, 'test', 'clients', script), ...args], {
    encoding: 'utf8',
  });
  return stdout;
}

/**
 * Worker-thread sessions (SIFT_ORT_WORKER=1, and always under Jest) and the life of their process:
 * a call in flight keeps the process alive until its answer arrives, and an idle set, released or
 * not, never keeps it from exiting. A set whose worker stayed referenced once held every process
 * that created one open for ever (and had Jest force-exit its workers): this runs a real process.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../../src/paths';
import { identityModel } from '../helpers/tinyOnnx';

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'sift-sessions-life-'));
  await writeFile(join(dir, 'identity.onnx'), identityModel());
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

/** Runs `body` as a top-level ES module with `sessions` created; what it prints comes back. */
async function runScript(body: string) {
  const script = join(dir, `script-${Math.random().toString(36).slice(2)}.mts`);
  await writeFile(
    script,
    `import { createSessions } from ${JSON.stringify(join(REPO_ROOT, 'src', 'encoder', 'sessions.ts'))};
const quiet = { info() {}, warn() {} };
const sessions = await createSessions({ encoder: ${JSON.stringify(join(dir, 'identity.onnx'))} }, { executionProvider: 'cpu', logger: quiet });
const call = (a, b) => sessions.run('encoder', { x: { type: 'float32', data: Float32Array.from([a, b]), dims: [2] } }).then((o) => Array.from(o.y.data));
${body}
`,
  );
  const env: NodeJS.ProcessEnv = { ...process.env, SIFT_ORT_WORKER: '1' };
  delete env.JEST_WORKER_ID;
  // a process that does not exit is killed at the timeout, and the call rejects
  return promisify(execFile)(process.execPath, ['--no-warnings', '--import', 'tsx', script], {
    cwd: REPO_ROOT,
    env,
    encoding: 'utf8',
    timeout: 25_000,
  });
}

describe('worker-thread sessions', () => {
  it('answer calls awaited at the top level, then let the process exit though never released', async () => {
    const { stdout } = await runScript(`console.log(JSON.stringify(await Promise.all([call(1.5, -2), call(3, 4)])));
console.log(JSON.stringify(await call(5, 6)));`);
    expect(stdout.trim().split('\n')).toEqual(['[[1.5,-2],[3,4]]', '[5,6]']);
  });

  it('let the process exit when released', async () => {
    const { stdout } = await runScript(`console.log(JSON.stringify(await call(7, 8)));
await sessions.release();
console.log('released');`);
    expect(stdout.trim().split('\n')).toEqual(['[7,8]', 'released']);
  });
});

/**
 * Issue #29 row 2: `git clone && npm ci && npx cdk deploy --all` — the documented deploy — must get
 * past synth. `npm ci` does not build the console (web/ has its own dependencies, web/dist is
 * gitignored), so synth leaves the Console stack out with a warning naming the command that builds
 * it, and every other stack synthesizes.
 *
 * The whole app is constructed (that is where the console was refused); `--exclusively` on the Data
 * stack keeps CDK from bundling every Lambda (~50 s; test/cdk/bundle.test.ts checks the bundles).
 */
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { consoleSkipped } from '../../lib/sift-app';
import { cdk, DOC_SYNTH_ARGS, freshClone } from './freshClone';

describe('a fresh clone (no web/dist) synthesizes', () => {
  let dir: string;
  let run: ReturnType<typeof cdk>;
  beforeAll(() => {
    dir = freshClone();
    // the documented command, with the Data stack selected
    run = cdk(dir, [...DOC_SYNTH_ARGS, 'SiftDevData', '--exclusively']);
  }, 120_000);
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test('cdk synth succeeds and says how to add the console', () => {
    expect({ status: run.status, stderr: run.status === 0 ? '' : run.stderr }).toEqual({ status: 0, stderr: '' });
    expect(run.stderr).toContain(consoleSkipped('SiftDevConsole'));
    expect(run.stderr).toContain('npm --prefix web ci && npm --prefix web run build');
  });

  test('every stack but the console is in the assembly, and the warning is in it too', () => {
    const manifest = JSON.parse(readFileSync(join(dir, 'cdk.out', 'manifest.json'), 'utf8')) as {
      artifacts: Record<string, { type: string }>;
    };
    const stacks = Object.entries(manifest.artifacts)
      .filter(([, a]) => a.type === 'aws:cloudformation:stack')
      .map(([name]) => name)
      .sort();
    expect(stacks).toEqual([
      'SiftDevApi',
      'SiftDevData',
      'SiftDevInference',
      'SiftDevObservability',
      'SiftDevWorkflows',
    ]);
    const metadata = JSON.parse(readFileSync(join(dir, 'cdk.out', 'SiftDevApi.metadata.json'), 'utf8')) as Record<
      string,
      Array<{ type: string; data: unknown }>
    >;
    const warnings = Object.values(metadata)
      .flat()
      .filter((m) => m.type === 'aws:cdk:warning')
      .map((m) => String(m.data));
    expect(warnings.some((w) => w.includes(consoleSkipped('SiftDevConsole')))).toBe(true);
  });
});

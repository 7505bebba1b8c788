/**
 * Lambda bundles: every entry point the stacks deploy bundles with esbuild
 * (the same options as SiftFunction, no Docker), and the after-bundling guard
 * rejects onnxruntime or native addons in any bundle.
 */
import { build, type Metafile } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUNDLING } from '../../lib/constructs/sift-function';
import { BUNDLE_GUARD, LAMBDAS_DIR } from '../../lib/paths';
import { buildApp, resourcesOfType } from './helpers';

async function bundle(entry: string, external: string[] = []): Promise<string> {
  return (await bundleWithMeta(entry, external)).dir;
}

async function bundleWithMeta(entry: string, external: string[] = []): Promise<{ dir: string; meta: Metafile }> {
  const outdir = mkdtempSync(join(tmpdir(), 'sift-bundle-'));
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: BUNDLING.target,
    mainFields: BUNDLING.mainFields,
    external: [...(BUNDLING.externalModules ?? []), ...external],
    banner: { js: BUNDLING.banner ?? '' },
    metafile: true,
    outfile: join(outdir, 'index.mjs'),
    logLevel: 'silent',
  });
  writeFileSync(join(outdir, 'index.meta.json'), JSON.stringify(result.metafile));
  return { dir: outdir, meta: result.metafile };
}

const guard = (dir: string): { status: number | null; stderr: string } => {
  const r = spawnSync(process.execPath, [BUNDLE_GUARD, dir], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
};

/** Entry files of every NodejsFunction in the app (from the asset metadata CDK records). */
const built = buildApp();
const descriptions = Object.values(built.stacks).flatMap((s) =>
  Object.values(resourcesOfType(built.template(s), 'AWS::Lambda::Function')).map((f) =>
    String(f.Properties?.Description ?? ''),
  ),
);
const ENTRIES = ['api.ts', 'authorizer.ts', 'worker.ts', 'workflow.ts', 'training-events.ts'];

describe('Lambda bundles', () => {
  it('deploys one function per entry point', () => {
    expect(descriptions.filter((d) => d.startsWith('Sift')).length).toBe(ENTRIES.length);
  });

  it.each(ENTRIES)(
    '%s bundles locally without onnxruntime or native addons',
    async (entry) => {
      const dir = await bundle(join(LAMBDAS_DIR, entry));
      expect(guard(dir)).toEqual({ status: 0, stderr: '' });
    },
    60_000,
  );

  it('bundles the AWS SDK version the tests run (nothing under @aws-sdk is left to the runtime)', async () => {
    const { meta } = await bundleWithMeta(join(LAMBDAS_DIR, 'authorizer.ts'));
    const inputs = Object.keys(meta.inputs);
    expect(inputs.some((i) => i.includes('node_modules/@aws-sdk/client-dynamodb/'))).toBe(true);
    expect(inputs.some((i) => i.includes('node_modules/@aws-sdk/client-api-gateway/'))).toBe(true);
    const external = Object.values(meta.outputs).flatMap((o) => o.imports.filter((i) => i.external).map((i) => i.path));
    expect(external.filter((p) => p.startsWith('@aws-sdk/'))).toEqual([]);
    expect(BUNDLING.externalModules ?? []).not.toContain('@aws-sdk/*');
  }, 60_000);

  it.each(['onnxruntime-node', 'node-llama-cpp'])(
    'fails the build when a bundle imports %s statically',
    async (pkg) => {
      const src = mkdtempSync(join(tmpdir(), 'sift-bad-'));
      const entry = join(src, 'bad.ts');
      writeFileSync(
        entry,
        `import * as engine from '${pkg}';\nexport const handler = async () => Object.keys(engine).length;\n`,
      );
      const r = guard(await bundle(entry));
      expect(r.status).toBe(1);
      expect(r.stderr).toContain(pkg);
    },
  );

  it('accepts a lazy import of an engine (never bundled, never run in Lambda)', async () => {
    const src = mkdtempSync(join(tmpdir(), 'sift-lazy-'));
    const entry = join(src, 'lazy.ts');
    writeFileSync(
      entry,
      "export const handler = async (local: boolean) => (local ? (await import('onnxruntime-node')).env : null);\n",
    );
    expect(guard(await bundle(entry))).toEqual({ status: 0, stderr: '' });
  });
});

/**
 * Offline deploy rehearsal of every container image (issue #12): each build context is staged by
 * CDK as `cdk deploy` stages it, each Dockerfile's COPY/WORKDIR/ENV are replayed into a temporary
 * root, and its entry program is started there far enough to load every module it would load —
 * so an image that would crash-loop on ERR_MODULE_NOT_FOUND / ModuleNotFoundError, a COPY of a
 * path its .dockerignore leaves out, or a context that drags in node_modules or a synth output
 * fails `npm test` instead of a deploy.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { IMAGES, type ImageName } from '../../lib/images';
import { CONTAINERS_DIR, REPO_ROOT } from '../../lib/paths';
import { parseDockerfile } from './dockerfile';
import { entryProgram, importPython, nodeImportGraph, runNodeCheck } from './entry';
import { replayImage, stageContext, trainingPython, type ReplayedImage } from './rehearsal';

/** Python packages (modules and distributions of one name) an image's base provides (not built from this repository). */
const BASE_IMAGE_MODULES: Record<string, string[]> = { 'vllm/vllm-openai': ['vllm'] };
/** Deploy-time packages: a runtime image must never load them. */
const DEPLOY_TIME_PACKAGES = ['aws-cdk-lib', 'constructs', 'aws-cdk', 'cdk-nag'];
/** Paths that never belong in a build context. */
const NEVER_IN_CONTEXT =
  /(^|\/)(node_modules|__pycache__|\.git|\.sift|\.venv|\.pytest_cache|coverage|cdk\.out[^/]*)(\/|$)/;

const python = trainingPython();
/** The training venv stands in for every image's `pip install`: without it the check fails, never skips. */
function requirePython(): string {
  if (!python)
    throw new Error(
      'the training venv (~/.cache/sift/venv, or SIFT_VENV) is absent, so the Python images cannot be import-checked: build it with `node scripts/setup.mjs` (npm test does)',
    );
  return python;
}

function listFiles(dir: string, base = dir): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? listFiles(join(dir, e.name), base) : [relative(base, join(dir, e.name))],
  );
}

const baseRepository = (from: string) => from.split(':')[0]!;

/** The Python modules an image runs from its own files, grouped by the WORKDIR they run in. */
function ownPythonModules(image: ReplayedImage): Map<string, string[]> {
  const entry = entryProgram(image);
  const started =
    entry.kind === 'python-module'
      ? [entry.module]
      : entry.kind === 'script'
        ? [...entry.text.matchAll(/\bpython3?\s+-m\s+([\w.]+)/g)].map((m) => m[1]!)
        : [];
  const all = [...started.map((module) => ({ module, workdir: image.workdir })), ...image.buildModules];
  const provided = BASE_IMAGE_MODULES[baseRepository(image.from)] ?? [];
  const byDir = new Map<string, string[]>();
  for (const { module, workdir } of all) {
    if (provided.includes(module.split('.')[0]!)) continue;
    byDir.set(workdir, [...(byDir.get(workdir) ?? []), module]);
  }
  return byDir;
}

describe('the images lib/images.ts builds', () => {
  it('are exactly the containers/*/Dockerfile files', () => {
    const dockerfiles = readdirSync(CONTAINERS_DIR)
      .filter((d) => existsSync(join(CONTAINERS_DIR, d, 'Dockerfile')))
      .map((d) => join(CONTAINERS_DIR, d, 'Dockerfile'))
      .sort();
    expect(
      Object.values(IMAGES)
        .map((i) => join(i.directory, i.file))
        .sort(),
    ).toEqual(dockerfiles);
  });
});

describe('what each image carries that AWS never runs', () => {
  const instructions = (name: ImageName) =>
    parseDockerfile(readFileSync(join(IMAGES[name].directory, IMAGES[name].file), 'utf8'));

  it('the training image bakes no base models by default (SageMaker reads the model channel; ~10 min of CPU per deploy)', () => {
    const arg = instructions('training').find((i) => i.keyword === 'ARG' && i.args.startsWith('BUILD_BASE_MODELS'));
    expect(arg?.args).toBe('BUILD_BASE_MODELS=0');
    // cdk deploy passes no build arguments that would turn it back on
    expect(IMAGES.training).not.toHaveProperty('buildArgs');
  });

  it("the encoder image installs node-llama-cpp's JavaScript only: no llama.cpp download, no prebuilt (CUDA) binaries", () => {
    const install = instructions('encoder').find((i) => i.keyword === 'RUN' && /\bnpm ci\b/.test(i.args))!;
    expect(install.args).toMatch(/\bNODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci\b/);
    expect(install.args).toMatch(/rm -rf node_modules\/@node-llama-cpp\b/);
  });
});

describe('the encoder build context (the repository root)', () => {
  it('leaves out what appears beside the sources, such as a `cdk synth -o <dir>` output', () => {
    const stray = mkdtempSync(join(REPO_ROOT, 'synth-rehearsal-'));
    const outdir = mkdtempSync(join(tmpdir(), 'sift-stage-'));
    try {
      writeFileSync(join(stray, 'manifest.json'), '{}');
      const context = stageContext('encoder', outdir);
      expect(readdirSync(context)).not.toContain(basename(stray));
      expect(readdirSync(context).sort()).toEqual([
        '.dockerignore',
        'bin',
        'containers',
        'package-lock.json',
        'package.json',
        'src',
        'tsconfig.json',
      ]);
    } finally {
      rmSync(stray, { recursive: true, force: true });
      rmSync(outdir, { recursive: true, force: true });
    }
  });
});

describe.each(Object.keys(IMAGES) as ImageName[])('the %s image, replayed from its Dockerfile', (name) => {
  let image: ReplayedImage;
  beforeAll(() => {
    image = replayImage(name);
  }, 60_000);
  afterAll(() => {
    if (image) rmSync(dirname(image.rootfs), { recursive: true, force: true });
  });

  it('has a build context holding only what the Dockerfile copies', () => {
    const files = listFiles(image.context);
    const wanted = (f: string) =>
      f === IMAGES[name].file || f === '.dockerignore' || image.copied.some((c) => f === c || f.startsWith(`${c}/`));
    expect(files.filter((f) => !wanted(f))).toEqual([]);
    expect(files.filter((f) => NEVER_IN_CONTEXT.test(f))).toEqual([]);
  });

  it('starts an entry program that is in the image', async () => {
    const entry = entryProgram(image);
    if (entry.kind === 'node') {
      const packages = await nodeImportGraph(image, entry.script);
      expect(DEPLOY_TIME_PACKAGES.filter((p) => packages.has(p))).toEqual([]);
      const run = runNodeCheck(image, entry);
      expect({ status: run.status, output: run.output }).toEqual({
        status: 0,
        output: expect.stringContaining('modules loaded'),
      });
    } else if (entry.kind === 'script') {
      const syntax = spawnSync('sh', ['-n', entry.path], { encoding: 'utf8' });
      expect({ status: syntax.status, stderr: syntax.stderr }).toEqual({ status: 0, stderr: '' });
    }
  }, 60_000);

  it('imports every Python module it runs from its own files, from the image, with only the third-party packages it installs', () => {
    const python = requirePython();
    const groups = ownPythonModules(image);
    if (groups.size === 0 && image.pipPackages.length === 0) {
      expect(entryProgram(image).kind).toBe('node'); // no Python in this image
      return;
    }
    for (const [workdir, modules] of groups.size > 0 ? groups : new Map([[image.workdir, []]])) {
      const run = importPython(image, python, modules, workdir, BASE_IMAGE_MODULES[baseRepository(image.from)] ?? []);
      expect({ status: run.status, output: run.output.slice(-2000) }).toEqual({
        status: 0,
        output: expect.any(String),
      });
      // the host venv is updated in place and may hold what the image no longer installs
      expect(run.unlisted).toEqual([]);
      expect(run.mismatched).toEqual([]);
      const outside = Object.entries(run.files).filter(([, file]) => !file.startsWith(image.rootfs));
      expect(outside).toEqual([]);
      expect(Object.keys(run.files)).toEqual(expect.arrayContaining(modules));
    }
  }, 120_000);
});

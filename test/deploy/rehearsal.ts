/**
 * Offline deploy rehearsal of one container image: its build context staged by CDK exactly as
 * `cdk deploy` stages it (lib/images.ts, the context's .dockerignore), then the Dockerfile's
 * WORKDIR/COPY/ENV/ENTRYPOINT/CMD replayed into a temporary root file system. What `RUN` would
 * install is stood in for by what this machine has: `npm ci [--omit=dev]` links the lockfile's
 * (production) packages from the shared install; `pip install -r …` is the training venv (which
 * images.test.ts checks against the requirement files: the venv may hold more than they install);
 * `pip install <dir>` puts the copied package on PYTHONPATH.
 * The Dockerfile instructions follow the "Dockerfile reference" (https://docs.docker.com/reference/dockerfile/);
 * what ECS and SageMaker then run is the image's ENTRYPOINT + CMD with the task's environment
 * ("Use Your Own Training Algorithms", https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-training-algo-dockerfile.html:
 * SageMaker runs the image as `docker run <image> train`). Not modelled: the base image's own files
 * and packages (the host's stand in), RUN steps other than the installs above, the architecture
 * (x86_64/arm64), image size and pull time, ECR scanning.
 */
import { App, type AssetStaging, Stack } from 'aws-cdk-lib';
import { DockerImageAsset } from 'aws-cdk-lib/aws-ecr-assets';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, statSync, symlinkSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { basename, dirname, join, posix } from 'node:path';
import { IMAGES, type ImageName } from '../../lib/images';
import { REPO_ROOT } from '../../lib/paths';
import { commandArgv, copySpec, envPairs, parseDockerfile } from './dockerfile';

export interface ReplayedImage {
  readonly name: ImageName;
  /** The staged build context (what `docker build` receives). */
  readonly context: string;
  /** The image's `/`. */
  readonly rootfs: string;
  readonly from: string;
  readonly workdir: string;
  readonly env: Record<string, string>;
  /** ENTRYPOINT followed by CMD. */
  readonly entry: string[];
  /** COPY sources, relative to the context. */
  readonly copied: string[];
  /** Image paths of local directories installed with `pip install <dir>`. */
  readonly pipPackages: string[];
  /** Requirement files installed with `pip install -r <file>` (image paths); `noDeps`: with --no-deps. */
  readonly pipRequirements: Array<{ path: string; noDeps: boolean }>;
  /** Requirements named on a `pip install` line itself (`torch==2.15.0+cu126`). */
  readonly pipPins: Array<{ requirement: string; noDeps: boolean }>;
  /** `python -m <module>` run by RUN at build time, with the WORKDIR they run in. */
  readonly buildModules: Array<{ module: string; workdir: string }>;
}

export function hostPath(image: Pick<ReplayedImage, 'rootfs'>, imagePath: string): string {
  return join(image.rootfs, imagePath);
}

/** Stages the image's build context the way `cdk deploy` does; returns the staged directory. */
export function stageContext(name: ImageName, outdir: string): string {
  const app = new App({ outdir });
  const asset = new DockerImageAsset(new Stack(app, 'Images'), name, IMAGES[name]);
  return (asset.node.findChild('Staging') as AssetStaging).absoluteStagedPath;
}

export function replayImage(name: ImageName): ReplayedImage {
  const tmp = mkdtempSync(join(tmpdir(), `sift-image-${name}-`));
  const context = stageContext(name, join(tmp, 'cdk.out'));
  const rootfs = join(tmp, 'rootfs');
  mkdirSync(rootfs);
  const dockerfilePath = join(context, IMAGES[name].file);
  if (!existsSync(dockerfilePath)) throw new Error(`${IMAGES[name].file} is not in its own build context`);
  const host = (p: string) => join(rootfs, p);

  let from = '';
  let workdir = '/';
  const env: Record<string, string> = {};
  let entrypoint: string[] = [];
  let cmd: string[] = [];
  const copied: string[] = [];
  const pipPackages: string[] = [];
  const pipRequirements: Array<{ path: string; noDeps: boolean }> = [];
  const pipPins: Array<{ requirement: string; noDeps: boolean }> = [];
  const buildModules: Array<{ module: string; workdir: string }> = [];

  for (const { keyword, args } of parseDockerfile(readFileSync(dockerfilePath, 'utf8'))) {
    switch (keyword) {
      case 'FROM':
        from = args.split(/\s+/)[0]!;
        break;
      case 'WORKDIR':
        workdir = posix.resolve(workdir, args);
        mkdirSync(host(workdir), { recursive: true });
        break;
      case 'ENV':
        for (const [k, v] of envPairs(args)) env[k] = v;
        break;
      case 'ADD':
      case 'COPY': {
        const spec = copySpec(args);
        if (spec.from) throw new Error(`${keyword} --from is not rehearsed: ${args}`);
        const dest = posix.resolve(workdir, spec.dest);
        const destIsDir = spec.dest.endsWith('/') || spec.sources.length > 1;
        for (const source of spec.sources) {
          if (/[*?[]/.test(source)) throw new Error(`${keyword} with a wildcard is not rehearsed: ${source}`);
          const src = join(context, source);
          if (!existsSync(src))
            throw new Error(
              `${keyword} ${source}: not in the build context (missing, or left out by its .dockerignore)`,
            );
          const target = statSync(src).isDirectory()
            ? host(dest)
            : destIsDir
              ? join(host(dest), basename(source))
              : host(dest);
          mkdirSync(dirname(target), { recursive: true });
          cpSync(src, target, { recursive: true });
          copied.push(posix.normalize(source).replace(/\/$/, ''));
        }
        break;
      }
      case 'RUN':
        provision(args, workdir);
        break;
      case 'ENTRYPOINT':
        entrypoint = commandArgv(args);
        cmd = [];
        break;
      case 'CMD':
        cmd = commandArgv(args);
        break;
      default: // ARG, USER, EXPOSE, HEALTHCHECK, LABEL: nothing to lay out
    }
  }
  return {
    name,
    context,
    rootfs,
    from,
    workdir,
    env,
    entry: [...entrypoint, ...cmd],
    copied,
    pipPackages,
    pipRequirements,
    pipPins,
    buildModules,
  };

  function provision(run: string, cwd: string): void {
    for (const step of run.split(/&&|;|\|\|/).map((s) => s.trim())) {
      if (/\bnpm ci\b/.test(step)) linkNodeModules(host(cwd), /--omit[= ]dev\b|--production\b/.test(step));
      const pip = /\bpip3? install\s+(.*)$/.exec(step);
      if (pip) {
        const words = pip[1]!.split(/\s+/);
        const noDeps = words.includes('--no-deps');
        for (let i = 0; i < words.length; i++) {
          const w = words[i]!;
          if (w === '-r' || w === '--requirement') {
            const file = posix.resolve(cwd, words[++i]!);
            if (!existsSync(host(file)))
              throw new Error(`RUN pip install -r ${words[i]}: ${file} was not copied before it`);
            pipRequirements.push({ path: file, noDeps });
          } else if (/^--(index-url|extra-index-url|constraint|target)$/.test(w) || w === '-c') i++;
          else if (w.startsWith('/') || w.startsWith('./')) {
            const dir = posix.resolve(cwd, w);
            if (!existsSync(join(host(dir), 'pyproject.toml')))
              throw new Error(`RUN pip install ${w}: no pyproject.toml at ${dir} in the image`);
            pipPackages.push(dir);
          } else if (/^[A-Za-z0-9][\w.-]*(\[[\w,.-]+\])?\s*(==|>=|<=|~=|!=|<|>)/.test(w))
            pipPins.push({ requirement: w, noDeps });
        }
      }
      for (const m of step.matchAll(/\bpython3?\s+-m\s+([\w.]+)/g)) buildModules.push({ module: m[1]!, workdir: cwd });
    }
  }
}

/**
 * `npm ci` in `appDir`: every package of the copied lockfile, or only the non-dev ones with
 * `--omit=dev`, linked from the shared install into appDir/node_modules.
 */
function linkNodeModules(appDir: string, omitDev: boolean): void {
  const lockPath = join(appDir, 'package-lock.json');
  if (!existsSync(lockPath) || !existsSync(join(appDir, 'package.json')))
    throw new Error('RUN npm ci: package.json and package-lock.json were not copied before it');
  const lock = JSON.parse(readFileSync(lockPath, 'utf8')) as {
    packages: Record<string, { dev?: boolean; optional?: boolean }>;
  };
  const installed = realpathSync(join(REPO_ROOT, 'node_modules'));
  for (const [key, meta] of Object.entries(lock.packages)) {
    if (!key.startsWith('node_modules/')) continue;
    const name = key.slice('node_modules/'.length);
    if (name.includes('/node_modules/') || (omitDev && meta.dev)) continue;
    const source = join(installed, name);
    if (!existsSync(source)) {
      if (meta.optional) continue; // another platform's optional binary
      throw new Error(`${name} is in package-lock.json but not installed here (run npm ci)`);
    }
    mkdirSync(dirname(join(appDir, 'node_modules', name)), { recursive: true });
    symlinkSync(source, join(appDir, 'node_modules', name));
  }
}

/** The image's ENV with absolute paths (and `:`-lists of them) moved under the replayed root. */
export function hostEnv(image: ReplayedImage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(image.env)) {
    out[k] = /^\/[^:]*(:\/[^:]*)*$/.test(v)
      ? v
          .split(':')
          .map((p) => hostPath(image, p))
          .join(':')
      : v;
  }
  return out;
}

/** The training venv that scripts/setup.mjs builds (as scripts/test-trainer.sh finds it). */
export function trainingPython(): string | null {
  const cache = process.env.SIFT_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sift');
  const python = join(process.env.SIFT_VENV ?? join(cache, 'venv'), 'bin', 'python');
  return existsSync(python) ? python : null;
}

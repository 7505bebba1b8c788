/**
 * What a replayed image would start, and the checks that it would start: its entry program run
 * with the root file system and ENV of the image (node with `--check`; Python modules imported,
 * never run), and a Node entry's whole import graph resolved against the image's node_modules.
 * Not modelled: the program serving (it is started with `--check`, or imported), the GPU, the
 * task's IAM role and network.
 */
import { build, type Plugin } from 'esbuild';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { dirname, join } from 'node:path';
import { hostEnv, hostPath, type ReplayedImage } from './rehearsal';

export type EntryProgram =
  | { kind: 'node'; nodeArgs: string[]; script: string; args: string[] }
  | { kind: 'python-module'; module: string }
  | { kind: 'script'; path: string; text: string };

export function entryProgram(image: ReplayedImage): EntryProgram {
  const argv = image.entry;
  if (argv.length === 0) throw new Error('the image has neither ENTRYPOINT nor CMD');
  if (argv[0] === 'npx') {
    // npx runs the package's bin from ./node_modules, or downloads it at start-up when it is not there
    const pkg = argv[1]!;
    if (!existsSync(join(hostPath(image, image.workdir), 'node_modules', pkg, 'package.json')))
      throw new Error(`npx ${pkg}: not installed in the image`);
    if (pkg !== 'tsx') throw new Error(`npx ${pkg} is not rehearsed`);
    return nodeProgram(['node', '--import', 'tsx', ...argv.slice(2)]);
  }
  if (argv[0] === 'node') return nodeProgram(argv);
  if ((argv[0] === 'sh' || argv[0] === '/bin/sh' || argv[0] === 'bash') && argv[1] === '-c') {
    const m = /\bpython3?\s+-m\s+([\w.]+)/.exec(argv[2] ?? '');
    if (!m) throw new Error(`shell entry without a python -m module: ${argv[2]}`);
    return { kind: 'python-module', module: m[1]! };
  }
  if (argv[0]!.startsWith('/')) {
    const file = hostPath(image, argv[0]!);
    if (!existsSync(file)) throw new Error(`entry ${argv[0]} is not in the image`);
    return { kind: 'script', path: file, text: readFileSync(file, 'utf8') };
  }
  throw new Error(`entry not rehearsed: ${JSON.stringify(argv)}`);
}

function nodeProgram(argv: string[]): EntryProgram {
  const nodeArgs: string[] = [];
  let i = 1;
  for (; i < argv.length && argv[i]!.startsWith('-'); i++) {
    nodeArgs.push(argv[i]!);
    if (['--import', '--require', '-r', '--loader'].includes(argv[i]!)) nodeArgs.push(argv[++i]!);
  }
  if (i >= argv.length) throw new Error(`node entry without a script: ${argv.join(' ')}`);
  return { kind: 'node', nodeArgs, script: argv[i]!, args: argv.slice(i + 1) };
}

export interface RunResult {
  readonly status: number | null;
  readonly output: string;
}

/** Runs the Node entry in the image's WORKDIR with its ENV and `--check` appended. */
export function runNodeCheck(image: ReplayedImage, entry: Extract<EntryProgram, { kind: 'node' }>): RunResult {
  const r = spawnSync(process.execPath, [...entry.nodeArgs, entry.script, ...entry.args, '--check'], {
    cwd: hostPath(image, image.workdir),
    env: { ...hostEnv(image), PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: hostPath(image, '/root') },
    encoding: 'utf8',
    timeout: 60_000,
  });
  return { status: r.status, output: `${r.stdout}${r.stderr}${r.error ? String(r.error) : ''}` };
}

const packageName = (specifier: string) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

/**
 * Every module the entry can load, static or `import()` of a literal, resolved inside the image:
 * local files must have been copied, packages must be in the image's node_modules. Returns the
 * packages it imports; throws naming each import the image could not satisfy.
 */
export async function nodeImportGraph(image: ReplayedImage, script: string): Promise<Set<string>> {
  const appDir = hostPath(image, image.workdir);
  const packages = new Set<string>();
  const inImage: Plugin = {
    name: 'image-node-modules',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, (args) => {
        if (isBuiltin(args.path)) return { external: true };
        const pkg = packageName(args.path);
        if (!existsSync(join(appDir, 'node_modules', pkg))) {
          return {
            errors: [
              {
                text: `package "${pkg}" is not installed in the image (RUN npm ci there decides: devDependencies are left out by --omit=dev)`,
              },
            ],
          };
        }
        packages.add(pkg);
        return { external: true };
      });
    },
  };
  // files started as workers (`new Worker(new URL('./w.mjs', import.meta.url))`) are entries of their own
  const entries = new Set([script]);
  for (let size = 0; size !== entries.size; ) {
    size = entries.size;
    let inputs: string[];
    try {
      const result = await build({
        entryPoints: [...entries],
        absWorkingDir: appDir,
        bundle: true,
        write: false,
        metafile: true,
        outdir: 'out',
        platform: 'node',
        format: 'esm',
        logLevel: 'silent',
        plugins: [inImage],
      });
      inputs = Object.keys(result.metafile.inputs);
    } catch (e) {
      const errors = (e as { errors?: Array<{ text: string; location?: { file: string } | null }> }).errors ?? [];
      throw new Error(
        `the entry's imports do not resolve inside the image:\n${errors.map((x) => `  ${x.location?.file ?? '?'}: ${x.text}`).join('\n')}`,
      );
    }
    for (const input of inputs) {
      for (const m of readFileSync(join(appDir, input), 'utf8').matchAll(
        /new URL\(\s*['"](\.{1,2}\/[^'"]+)['"]\s*,\s*import\.meta\.url\s*\)/g,
      )) {
        const target = join(dirname(input), m[1]!);
        if (!existsSync(join(appDir, target))) throw new Error(`${input} refers to ${m[1]}, which is not in the image`);
        if (/\.[mc]?[jt]s$/.test(target)) entries.add(target);
      }
    }
  }
  return packages;
}

/** An imported third-party module whose distribution the image's own pip installs would not provide. */
export interface UnlistedDistribution {
  module: string;
  distribution: string | null;
}

/**
 * Imports Python modules (with every module of their package) and the entry points of
 * pip-installed local packages with the image's ENV, PYTHONPATH mapped onto its root; returns
 * module name → the file it was loaded from. The modules come from this machine's training venv,
 * which `setup.sh` updates in place (`pip install -r` never uninstalls), so it may hold packages the
 * image no longer installs: `unlisted` names every third-party module imported (on import, or in the
 * source of the image's own files: imports inside functions run later) whose distribution is
 * not what the image's pip lines install — pinned in a `-r` file or on the line, a dependency of a
 * local package, provided by the base image (`baseDistributions`), or an unconditional requirement of
 * one of those (what pip resolves; not followed under --no-deps) — and `mismatched` every imported
 * pinned distribution whose version here differs from its pin.
 */
export function importPython(
  image: ReplayedImage,
  python: string,
  modules: string[],
  cwd: string,
  baseDistributions: string[] = [],
): RunResult & { files: Record<string, string>; unlisted: UnlistedDistribution[]; mismatched: string[] } {
  const env = hostEnv(image);
  const pythonPath = [env.PYTHONPATH, ...image.pipPackages.map((p) => hostPath(image, p))].filter(Boolean).join(':');
  const request = {
    modules,
    packages: image.pipPackages.map((p) => hostPath(image, p)),
    requirements: image.pipRequirements.map((r) => ({ path: hostPath(image, r.path), noDeps: r.noDeps })),
    pins: image.pipPins,
    base: baseDistributions,
    root: image.rootfs,
  };
  const r = spawnSync(python, ['-c', PYTHON_IMPORTER, JSON.stringify(request)], {
    cwd: hostPath(image, cwd),
    env: {
      ...env,
      PYTHONPATH: pythonPath,
      PYTHONNOUSERSITE: '1',
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: hostPath(image, '/root'),
    },
    encoding: 'utf8',
    timeout: 120_000,
  });
  const last = r.stdout.trim().split('\n').at(-1) ?? '';
  let result: { files: Record<string, string>; unlisted: UnlistedDistribution[]; mismatched: string[] } = {
    files: {},
    unlisted: [],
    mismatched: [],
  };
  if (r.status === 0) result = JSON.parse(last) as typeof result;
  return { status: r.status, output: `${r.stdout}${r.stderr}${r.error ? String(r.error) : ''}`, ...result };
}

const PYTHON_IMPORTER = `
import ast, importlib, importlib.metadata as md, json, pathlib, pkgutil, re, sys, sysconfig, tomllib
req = json.loads(sys.argv[1])
started = set(sys.modules)  # the interpreter's start-up (site, the venv's .pth hooks): not the image's code
loaded = {}
for name in req["modules"]:
    loaded[name] = importlib.import_module(name).__file__
    # the whole package the module belongs to: code it imports lazily must be in the image too
    top = importlib.import_module(name.split(".")[0])
    for info in pkgutil.walk_packages(getattr(top, "__path__", []), top.__name__ + "."):
        if not info.name.endswith(".__main__"):  # running it is what -m does, not importing
            loaded[info.name] = importlib.import_module(info.name).__file__
for pkg in req["packages"]:
    meta = tomllib.loads(pathlib.Path(pkg, "pyproject.toml").read_text())
    for group, points in meta.get("project", {}).get("entry-points", {}).items():
        for point, target in points.items():
            mod, _, attr = target.partition(":")
            module = importlib.import_module(mod)
            obj = module
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
            if not callable(obj):
                sys.exit(f"entry point {group} {point} = {target} is not callable")
            loaded[target] = module.__file__
imported = {m.split(".")[0] for m in set(sys.modules) - started}
# and what the image's own files import inside functions (run later, not on import): found in their source
own = {f for f in loaded.values() if f and f.startswith(req["root"] + "/")}
own_tops = {k.split(":")[0].split(".")[0] for k, f in loaded.items() if f in own}
lazy = set()
for f in own:
    for node in ast.walk(ast.parse(pathlib.Path(f).read_text())):
        if isinstance(node, ast.Import):
            lazy.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            lazy.add(node.module.split(".")[0])
imported |= lazy - own_tops
from packaging.requirements import Requirement  # the check's own imports, after the snapshot
from packaging.utils import canonicalize_name
roots = []  # (requirement, follow its dependencies, pinned by the image)
for pkg in req["packages"]:
    meta = tomllib.loads(pathlib.Path(pkg, "pyproject.toml").read_text())
    roots += [(Requirement(d), True, False) for d in meta.get("project", {}).get("dependencies", [])]
for f in req["requirements"]:
    for line in pathlib.Path(f["path"]).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and not line.startswith("-"):
            roots.append((Requirement(line), not f["noDeps"], True))
roots += [(Requirement(p["requirement"]), not p["noDeps"], True) for p in req["pins"]]
# what pip installs from those: the roots and, transitively, their unconditional requirements
provided = {canonicalize_name(b) for b in req["base"]}
queue = []
for r, deps, _ in roots:
    if r.marker is None or r.marker.evaluate({"extra": ""}):
        provided.add(canonicalize_name(r.name))
        if deps:
            queue.append((r.name, set(r.extras)))
while queue:
    name, extras = queue.pop()
    try:
        requires = md.requires(name) or []
    except md.PackageNotFoundError:
        continue  # not installed here: nothing of it can be imported here either
    for dep in map(Requirement, requires):
        if dep.marker is not None and not any(dep.marker.evaluate({"extra": e}) for e in extras | {""}):
            continue
        key = canonicalize_name(dep.name)
        if key not in provided:
            provided.add(key)
            queue.append((dep.name, set(dep.extras)))
pins = {}
for r, _, pinned in roots:
    if pinned:
        pins.setdefault(canonicalize_name(r.name), []).append(r)
owners = md.packages_distributions()
site = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
unlisted, mismatched = [], []
for top in sorted(imported - set(sys.stdlib_module_names)):
    dists = owners.get(top)
    if not dists:
        if top in sys.modules:  # loaded: from site-packages without metadata, or not third-party at all
            file = getattr(sys.modules[top], "__file__", None) or ""
            if any(file.startswith(p + "/") for p in site):
                unlisted.append({"module": top, "distribution": None})
        elif canonicalize_name(top) not in provided:  # imported lazily, not installed here: by its own name
            unlisted.append({"module": top, "distribution": None})
        continue
    for dist in sorted(set(dists)):
        key = canonicalize_name(dist)
        if key not in provided:
            unlisted.append({"module": top, "distribution": dist})
        version = md.version(dist)
        for r in pins.get(key, []):
            public = Requirement(re.sub(r"\\+[\\w.]+", "", str(r)))  # torch==2.15.0+cu126: this machine's build may differ
            if not public.specifier.contains(version, prereleases=True):
                mismatched.append(f"{dist} {version} here, the image installs {r}")
print(json.dumps({"files": loaded, "unlisted": unlisted, "mismatched": sorted(set(mismatched))}))
`;

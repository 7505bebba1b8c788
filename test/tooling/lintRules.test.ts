/**
 * The habit checks that `npm test` runs (#26) fail on a planted violation: Biome's rules over the
 * TypeScript (`npm run lint`), ruff's over the Python (`npm run lint:py`) and the console's typecheck
 * (`npm run typecheck:web`), and the format check of both (`npm run format:check`). Each case runs the same tool with the repository's own configuration
 * on a small file made to break a rule, and either passes a clean twin or finds nothing but the
 * planted errors, so a failure is the rule's and not the set-up's. The files live in a scratch
 * directory, never in the linted trees.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = process.cwd();
const BIOME = join(ROOT, 'node_modules', '.bin', 'biome');
const WEB_TSC = join(ROOT, 'web', 'node_modules', '.bin', 'tsc');

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'sift-lint-rules-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function run(cmd: string, args: string[], cwd: string) {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', timeout: 170_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe('Biome (npm run lint)', () => {
  /** A project laid out like the repository's (its biome.jsonc, a file under src/), git-initialised for the VCS ignore file. */
  function biomeProject(name: string, source: string): string {
    const dir = join(scratch, name);
    mkdirSync(join(dir, 'src'), { recursive: true });
    copyFileSync(join(ROOT, 'biome.jsonc'), join(dir, 'biome.jsonc'));
    writeFileSync(join(dir, '.gitignore'), '');
    expect(run('git', ['init', '-q'], dir).status).toBe(0);
    writeFileSync(join(dir, 'src', 'planted.ts'), source);
    return dir;
  }

  it('fails on a recommended rule (a forEach callback that returns a value) and passes the clean twin', () => {
    const bad = run(
      BIOME,
      ['lint', '--error-on-warnings'],
      biomeProject('biome-bad', 'export const seen = new Set<number>();\n[1, 2].forEach((x) => seen.add(x));\n'),
    );
    expect(bad.status).not.toBe(0);
    expect(bad.out).toContain('lint/suspicious/useIterableCallbackReturn');
    const good = run(
      BIOME,
      ['lint', '--error-on-warnings'],
      biomeProject('biome-good', 'export const seen = new Set<number>();\nfor (const x of [1, 2]) seen.add(x);\n'),
    );
    expect(good.out).not.toContain('lint/');
    expect(good.status).toBe(0);
  });

  it('fails on a warning-level rule too (--error-on-warnings): an explicit any under src/', () => {
    const bad = run(
      BIOME,
      ['lint', '--error-on-warnings'],
      biomeProject('biome-any', 'export const parse = (s: string): any => JSON.parse(s);\n'),
    );
    expect(bad.status).not.toBe(0);
    expect(bad.out).toContain('lint/suspicious/noExplicitAny');
  });
});

describe('the format check (npm run format:check)', () => {
  it("Biome fails on a file not in the repository's format (double quotes, no semicolon) and passes it formatted", () => {
    const dir = join(scratch, 'format-ts');
    mkdirSync(join(dir, 'src'), { recursive: true });
    copyFileSync(join(ROOT, 'biome.jsonc'), join(dir, 'biome.jsonc'));
    writeFileSync(join(dir, '.gitignore'), '');
    expect(run('git', ['init', '-q'], dir).status).toBe(0);
    writeFileSync(join(dir, 'src', 'planted.ts'), 'export const greeting = "hello"\n');
    const bad = run(BIOME, ['format'], dir);
    expect(bad.status).not.toBe(0);
    expect(bad.out).toContain('Formatter would have printed');
    writeFileSync(join(dir, 'src', 'planted.ts'), "export const greeting = 'hello';\n");
    const good = run(BIOME, ['format'], dir);
    expect(good.status).toBe(0);
  });

  it('ruff fails on Python not in its format (single quotes, cramped call) and passes it formatted', () => {
    const file = join(scratch, 'planted_format.py');
    const check = () =>
      run(
        'bash',
        [
          join(ROOT, 'scripts', 'ruff.sh'),
          'format',
          '--check',
          '--no-cache',
          '--config',
          join(ROOT, 'containers', 'ruff.toml'),
          file,
        ],
        ROOT,
      );
    writeFileSync(file, "print( 'hello' )\n");
    const bad = check();
    expect(bad.status).toBe(1);
    expect(bad.out).toContain('would be reformatted');
    writeFileSync(file, 'print("hello")\n');
    expect(check().status).toBe(0);
  }, 180_000); // the first run on a fresh machine installs ruff into its venv
});

describe('ruff (npm run lint:py)', () => {
  const ruff = (file: string) =>
    run(
      'bash',
      [
        join(ROOT, 'scripts', 'ruff.sh'),
        'check',
        '--no-cache',
        '--config',
        join(ROOT, 'containers', 'ruff.toml'),
        file,
      ],
      ROOT,
    );

  it('fails on a default rule (an unused import, F401) and on unsorted imports (I001), and passes the clean twin', () => {
    const bad = join(scratch, 'planted_bad.py');
    writeFileSync(bad, 'import sys\nimport os\n\nprint(sys.argv)\n');
    const r = ruff(bad);
    expect(r.status).toBe(1);
    expect(r.out).toContain('F401');
    expect(r.out).toContain('I001');
    const good = join(scratch, 'planted_good.py');
    writeFileSync(good, 'import sys\n\nprint(sys.argv)\n');
    const g = ruff(good);
    expect(g.out).toContain('All checks passed');
    expect(g.status).toBe(0);
  }, 180_000); // the first run on a fresh machine installs ruff into its venv
});

describe("the console's typecheck (npm run typecheck:web)", () => {
  /** web/tsconfig.json's options on one scratch file; typeRoots finds `vite/client` from the scratch directory. */
  function tsc(name: string, source: string) {
    const dir = join(scratch, name);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'planted.ts'), source);
    const config = {
      extends: join(ROOT, 'web', 'tsconfig.json'),
      compilerOptions: { typeRoots: [join(ROOT, 'web', 'node_modules')] },
      include: ['planted.ts'],
    };
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(config));
    return run(WEB_TSC, ['-p', join(dir, 'tsconfig.json'), '--noEmit'], dir);
  }

  it('fails on a type error and on an unused local (noUnusedLocals), reporting exactly those two', () => {
    const bad = tsc(
      'tsc-bad',
      "export const n: number = 'planted';\nexport function f(): number {\n  const unused = 1;\n  return 2;\n}\n",
    );
    expect(bad.status).not.toBe(0);
    // only the planted errors: a set-up problem (a missing type library, say) would add its own
    expect([...bad.out.matchAll(/error (TS\d+)/g)].map((m) => m[1]).sort()).toEqual(['TS2322', 'TS6133']);
  }, 60_000);
});

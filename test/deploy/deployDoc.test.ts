/**
 * docs/reference/deploy.md, the commands a team copies in its first week (issue #29 item 4): every
 * `npx cdk`, `sift` (`npx tsx bin/sift.ts`), `npm` and `aws` command in its bash blocks is one that
 * exists, with flags that exist — checked against `cdk <command> --help` and `sift <command> --help`
 * (run here), the packages' scripts, and, for the AWS CLI (no account here), the AWS CLI reference
 * pages below. The offline synth it documents is the one test/deploy/freshSynth.test.ts runs.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { REPO_ROOT } from '../../lib/paths';
import { DOC_SYNTH_ARGS } from './freshClone';

const run = promisify(execFile);
const doc = readFileSync(join(REPO_ROOT, 'docs', 'reference', 'deploy.md'), 'utf8');

/**
 * The AWS CLI operations the document uses and their own options (global ones: --query, --output,
 * --region). "describe-stacks" https://docs.aws.amazon.com/cli/latest/reference/cloudformation/describe-stacks.html,
 * "list-exports" https://docs.aws.amazon.com/cli/latest/reference/cloudformation/list-exports.html
 */
const AWS_CLI: Record<string, string[]> = {
  'cloudformation describe-stacks': ['--stack-name'],
  'cloudformation list-exports': [],
};
const AWS_GLOBAL = ['--query', '--output', '--region'];

/** The bash blocks' logical lines: continuations joined, heredoc bodies and comments dropped. */
function logicalLines(md: string): string[] {
  const blocks = [...md.matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]!);
  const out: string[] = [];
  for (const block of blocks) {
    let heredoc: string | undefined;
    for (const line of block.replace(/\\\n/g, ' ').split('\n')) {
      if (heredoc) {
        if (line.trim() === heredoc) heredoc = undefined;
        continue;
      }
      heredoc = /<<-?'?(\w+)'?/.exec(line)?.[1];
      out.push(line.replace(/(^|\s)#.*$/, '').trim());
    }
  }
  return out.filter(Boolean);
}

/** Splits on spaces outside quotes; quotes are kept out of the words. */
function words(text: string): string[] {
  const out: string[] = [];
  let word = '';
  let quote: string | undefined;
  for (const ch of text) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else word += ch;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if (/\s/.test(ch)) {
      if (word) out.push(word);
      word = '';
    } else word += ch;
  }
  if (word) out.push(word);
  return out;
}

const TOOLS: Record<string, RegExp> = {
  cdk: /\bnpx cdk\s+/,
  sift: /\bnpx tsx bin\/sift\.ts\s+/,
  npm: /(?:^|&&\s*|\|\s*|;\s*)npm\s+/,
  aws: /(?:^|\$\(\s*)aws\s+/,
};

/** Each use of a tool: its arguments, up to the end of its command (`&&`, `|`, `;`, `)`). */
function uses(tool: keyof typeof TOOLS): string[][] {
  const found: string[][] = [];
  for (const line of logicalLines(doc)) {
    const re = new RegExp(TOOLS[tool]!.source, 'g');
    for (const m of line.matchAll(re)) {
      const rest = line.slice(m.index! + m[0].length);
      const end = rest.search(/\s(&&|\||;)\s|\)(\s|$)/);
      found.push(words(end < 0 ? rest : rest.slice(0, end)));
    }
  }
  return found;
}

const flagsOf = (args: string[]) => args.filter((a) => a.startsWith('-')).map((a) => a.split('=')[0]!);
const commandOf = (args: string[]) => args.slice(0, args[0] === 'models' ? 2 : 1).join(' ');

async function helpOf(argv: string[]): Promise<string> {
  const { stdout, stderr } = await run(argv[0]!, [...argv.slice(1), '--help'], {
    cwd: REPO_ROOT,
    env: { ...process.env, CDK_DISABLE_CLI_TELEMETRY: 'true' },
  });
  return stdout + stderr;
}

describe('docs/reference/deploy.md', () => {
  it('lists every stack the app makes', () => {
    const source = readFileSync(join(REPO_ROOT, 'lib', 'sift-app.ts'), 'utf8');
    const parts = [...new Set([...source.matchAll(/stackName\(config, '(\w+)'\)/g)].map((m) => m[1]!))];
    expect(parts).toContain('Console');
    for (const part of parts) expect(doc).toContain(`| \`Sift<Stage>${part}\` |`);
    const count = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight'][parts.length - 1];
    expect(doc).toContain(`Sift deploys as ${count} CloudFormation stacks per stage`);
  });

  it('documents the offline synth that a fresh clone runs (test/deploy/freshSynth.test.ts)', () => {
    expect(uses('cdk').map((a) => a.join(' '))).toContain(DOC_SYNTH_ARGS.join(' '));
  });

  it('uses only cdk commands and flags that `cdk <command> --help` lists', async () => {
    const all = uses('cdk');
    expect(all.length).toBeGreaterThanOrEqual(4);
    const commands = [...new Set(all.map((a) => a[0]!))];
    const helps = new Map(
      await Promise.all(
        commands.map(async (c) => [c, await helpOf([join(REPO_ROOT, 'node_modules', '.bin', 'cdk'), c])] as const),
      ),
    );
    for (const args of all) {
      const help = helps.get(args[0]!)!;
      expect({ args, command: help.includes(`cdk ${args[0]}`) }).toEqual({ args, command: true });
      for (const flag of flagsOf(args))
        expect({ args, flag, listed: new RegExp(`(^|[\\s,])${flag}([\\s,]|$)`, 'm').test(help) }).toEqual({
          args,
          flag,
          listed: true,
        });
    }
  }, 60_000);

  it('uses only sift commands and options that `sift <command> --help` lists', async () => {
    const all = uses('sift');
    expect(all.length).toBeGreaterThanOrEqual(4);
    const commands = [...new Set(all.map(commandOf))];
    const tsx = join(REPO_ROOT, 'node_modules', '.bin', 'tsx');
    const helps = new Map(
      await Promise.all(commands.map(async (c) => [c, await helpOf([tsx, 'bin/sift.ts', ...c.split(' ')])] as const)),
    );
    for (const args of all) {
      const help = helps.get(commandOf(args))!;
      expect({ args, usage: help.includes(`Usage: sift ${commandOf(args)}`) }).toEqual({ args, usage: true });
      for (const flag of flagsOf(args))
        expect({ args, flag, listed: help.includes(flag) }).toEqual({ args, flag, listed: true });
    }
  }, 60_000);

  it('uses only npm commands whose scripts exist', () => {
    const scripts = (dir: string) =>
      Object.keys(
        (JSON.parse(readFileSync(join(REPO_ROOT, dir, 'package.json'), 'utf8')) as { scripts: object }).scripts,
      );
    const all = uses('npm');
    expect(all.map((a) => a.join(' '))).toEqual(
      expect.arrayContaining(['ci', '--prefix web ci', '--prefix web run build']),
    );
    for (const args of all) {
      const [dir, rest] = args[0] === '--prefix' ? [args[1]!, args.slice(2)] : ['.', args];
      if (rest[0] === 'ci') expect(rest).toEqual(['ci']);
      else
        expect({ args, script: rest[0] === 'run' && scripts(dir).includes(rest[1]!) }).toEqual({ args, script: true });
    }
  });

  it('uses only AWS CLI operations and options the AWS CLI reference documents', () => {
    const all = uses('aws');
    expect(all.length).toBeGreaterThanOrEqual(2);
    for (const args of all) {
      const operation = args.slice(0, 2).join(' ');
      expect({ operation, known: operation in AWS_CLI }).toEqual({ operation, known: true });
      for (const flag of flagsOf(args))
        expect({ args, flag, known: [...AWS_CLI[operation]!, ...AWS_GLOBAL].includes(flag) }).toEqual({
          args,
          flag,
          known: true,
        });
    }
  });
});

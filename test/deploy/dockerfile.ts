/**
 * A Dockerfile read the way `docker build` reads it, for the instructions the offline rehearsal
 * replays: line continuations, comments, exec (JSON) and shell forms, ENV pairs, COPY flags.
 */
export interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.replace(/\r$/, '');
    if (/^\s*#/.test(line)) continue; // comments, also inside a continued instruction
    if (!pending && !line.trim()) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `;
      continue;
    }
    const full = (pending + line).trim();
    pending = '';
    if (!full) continue;
    const [, keyword = '', args = ''] = /^(\S+)\s*(.*)$/s.exec(full) ?? [];
    out.push({ keyword: keyword.toUpperCase(), args: args.trim() });
  }
  if (pending.trim()) throw new Error('Dockerfile ends inside a continued line');
  return out;
}

/** ENTRYPOINT/CMD/RUN arguments: the exec form's array, or the shell form as `/bin/sh -c`. */
export function commandArgv(args: string): string[] {
  if (args.startsWith('[')) {
    const parsed: unknown = JSON.parse(args);
    if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string'))
      throw new Error(`not an exec-form array: ${args}`);
    return parsed;
  }
  return ['/bin/sh', '-c', args];
}

/** Whitespace-separated words; double or single quotes group (no variable expansion). */
function words(args: string): string[] {
  return [...args.matchAll(/(?:[^\s"']+|"[^"]*"|'[^']*')+/g)].map((m) => m[0].replace(/"([^"]*)"|'([^']*)'/g, '$1$2'));
}

/** `ENV A=1 B="two words"` or the legacy `ENV A value`. */
export function envPairs(args: string): Array<[string, string]> {
  const parts = words(args);
  if (parts.length > 0 && !parts[0]!.includes('='))
    return [[parts[0]!, args.slice(args.indexOf(parts[0]!) + parts[0]!.length).trim()]];
  return parts.map((p) => {
    const eq = p.indexOf('=');
    if (eq <= 0) throw new Error(`ENV entry without '=': ${p}`);
    return [p.slice(0, eq), p.slice(eq + 1)];
  });
}

export interface CopySpec {
  readonly sources: string[];
  readonly dest: string;
  readonly from?: string;
}

export function copySpec(args: string): CopySpec {
  const parts = args.startsWith('[') ? commandArgv(args) : words(args);
  const flags = parts.filter((p) => p.startsWith('--'));
  const paths = parts.filter((p) => !p.startsWith('--'));
  if (paths.length < 2) throw new Error(`COPY needs a source and a destination: ${args}`);
  const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
  return { sources: paths.slice(0, -1), dest: paths.at(-1)!, ...(from ? { from } : {}) };
}

/** The Dockerfile reader the rehearsal relies on, on the forms Docker accepts. */
import { commandArgv, copySpec, envPairs, parseDockerfile } from './dockerfile';

describe('parseDockerfile', () => {
  it('joins continued lines, drops comments (also inside a continuation) and upper-cases keywords', () => {
    const text = [
      '# top',
      'from python:3.11-slim',
      '',
      'RUN a \\',
      '# inside',
      ' && b',
      'ENV A=1 \\',
      '    B=2',
      'CMD ["x"]',
    ].join('\n');
    expect(parseDockerfile(text)).toEqual([
      { keyword: 'FROM', args: 'python:3.11-slim' },
      { keyword: 'RUN', args: expect.stringMatching(/^a\s+&& b$/) as string },
      { keyword: 'ENV', args: expect.stringMatching(/^A=1\s+B=2$/) as string },
      { keyword: 'CMD', args: '["x"]' },
    ]);
  });

  it('refuses a file that ends inside a continued line', () => {
    expect(() => parseDockerfile('RUN a \\')).toThrow('ends inside a continued line');
  });
});

describe('instruction arguments', () => {
  it('reads exec and shell forms', () => {
    expect(commandArgv('["node", "--import", "tsx", "bin/gateway.ts"]')).toEqual([
      'node',
      '--import',
      'tsx',
      'bin/gateway.ts',
    ]);
    expect(commandArgv('npm start')).toEqual(['/bin/sh', '-c', 'npm start']);
    expect(() => commandArgv('["a", 1]')).toThrow('not an exec-form array');
  });

  it('reads ENV pairs, quoted values and the legacy form', () => {
    expect(envPairs('A=1 B="two words" C=/opt/x')).toEqual([
      ['A', '1'],
      ['B', 'two words'],
      ['C', '/opt/x'],
    ]);
    expect(envPairs('PATH_PREFIX /opt/sift bin')).toEqual([['PATH_PREFIX', '/opt/sift bin']]);
  });

  it('reads COPY sources, destination and --from', () => {
    expect(copySpec('package.json package-lock.json ./')).toEqual({
      sources: ['package.json', 'package-lock.json'],
      dest: './',
    });
    expect(copySpec('--chown=sift src ./src')).toEqual({ sources: ['src'], dest: './src' });
    expect(copySpec('--from=build /out /app')).toEqual({ sources: ['/out'], dest: '/app', from: 'build' });
    expect(() => copySpec('onlyone')).toThrow('COPY needs a source and a destination');
  });
});

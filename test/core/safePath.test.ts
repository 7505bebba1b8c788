/**
 * Paths named by data become keys or files only inside the place meant for them (security review
 * F12: tar entry names, and blob keys after a model's prefix, were joined as they came).
 */
import { join, resolve, sep } from 'node:path';
import fc from 'fast-check';
import { containedPath, safeRelativePath, UnsafePathError } from '../../src/core/safePath';

const ROOT = resolve('/srv/cache/model');

describe('safeRelativePath', () => {
  it.each([
    ['metrics.json', 'metrics.json'],
    ['./metrics.json', 'metrics.json'],
    ['onnx/encoder.onnx', 'onnx/encoder.onnx'],
    ['./onnx//./encoder.onnx', 'onnx/encoder.onnx'],
    ['a..b/c..', 'a..b/c..'],
  ])('keeps the plain path %j as %j', (rel, plain) => {
    expect(safeRelativePath(rel, 'test')).toBe(plain);
  });

  it.each([
    ['../x', /climbs out/],
    ['onnx/../../x', /climbs out/],
    ['onnx/..', /climbs out/],
    ['..\\x', /climbs out/],
    ['onnx\\..\\..\\x', /climbs out/],
    ['/etc/passwd', /absolute/],
    ['\\\\server\\share\\x', /absolute/],
    ['C:\\Windows\\x', /absolute/],
    ['c:x', /absolute/],
    ['a\0b', /NUL/],
    ['', /names no file/],
    ['./', /names no file/],
  ])('refuses %j, naming the path and where it came from', (rel, why) => {
    expect(() => safeRelativePath(rel, 'the model archive jobs/t/j/model.tar.gz')).toThrow(UnsafePathError);
    expect(() => safeRelativePath(rel, 'the model archive jobs/t/j/model.tar.gz')).toThrow(why);
    expect(() => safeRelativePath(rel, 'the model archive jobs/t/j/model.tar.gz')).toThrow(
      `the model archive jobs/t/j/model.tar.gz names an unsafe path ${JSON.stringify(rel)}`,
    );
  });
});

describe('containedPath', () => {
  it('joins a plain key suffix under the directory', () => {
    expect(containedPath(ROOT, 'onnx/encoder.onnx', 'key')).toBe(join(ROOT, 'onnx', 'encoder.onnx'));
  });

  it('refuses a suffix that passes a prefix filter but climbs out (onnx/../../x)', () => {
    expect(() => containedPath(ROOT, 'onnx/../../x', 'model store key models/m/onnx/../../x')).toThrow(
      /model store key models\/m\/onnx\/\.\.\/\.\.\/x names an unsafe path/,
    );
  });

  it('never answers a path outside the directory, whatever the name (fast-check)', () => {
    const segment = fc.constantFrom('..', '.', '', 'onnx', 'a', '..a', 'b..', '/', '\\', 'C:', '\0', '~');
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 8 }), fc.constantFrom('/', '\\', ''), (parts, joiner) => {
        const rel = parts.join(joiner === '' ? '/' : joiner);
        let file: string;
        try {
          file = containedPath(ROOT, rel, 'generated');
        } catch (err) {
          expect(err).toBeInstanceOf(UnsafePathError);
          return;
        }
        expect(file.startsWith(ROOT + sep)).toBe(true);
        expect(file.split(sep)).not.toContain('..');
      }),
      { seed: 25_012, numRuns: 3000 },
    );
  });
});

/**
 * The console's typed client (web/src/api/schema.d.ts) is generated from the API document: this
 * fails when a route changed and the committed types were not regenerated
 * (`npm run gen:api --prefix web`, see README "Web console").
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildOpenApi } from '../../src/http/openapi';
import { API_VERSION, allRoutes } from '../../src/http/routes';
import { REPO_ROOT } from '../../src/paths';

const generator = join(REPO_ROOT, 'web', 'node_modules', '.bin', 'openapi-typescript');

it('web/src/api/schema.d.ts matches the types generated from the current GET /openapi.json', () => {
  if (!existsSync(generator))
    throw new Error(
      `${generator} is missing: run \`node scripts/setup.mjs --for-tests\` (it installs web/'s dependencies)`,
    );
  const dir = mkdtempSync(join(tmpdir(), 'sift-api-types-'));
  try {
    const doc = join(dir, 'openapi.json');
    writeFileSync(doc, JSON.stringify(buildOpenApi(allRoutes(), API_VERSION), null, 2));
    execFileSync(generator, [doc, '-o', join(dir, 'schema.d.ts')], { stdio: 'ignore' });
    const fresh = readFileSync(join(dir, 'schema.d.ts'), 'utf8');
    const committed = readFileSync(join(REPO_ROOT, 'web', 'src', 'api', 'schema.d.ts'), 'utf8');
    expect(committed === fresh ? 'up to date' : 'stale: run `npm run gen:api --prefix web`').toBe('up to date');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

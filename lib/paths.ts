/** Absolute paths used by the CDK app (independent of the working directory). */
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
export const LAMBDAS_DIR = join(REPO_ROOT, 'lambdas');
export const CONTAINERS_DIR = join(REPO_ROOT, 'containers');
export const LOCK_FILE = join(REPO_ROOT, 'package-lock.json');
export const BUNDLE_GUARD = join(REPO_ROOT, 'lib', 'bundling', 'check-bundle.mjs');

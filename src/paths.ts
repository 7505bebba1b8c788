import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * Where an installation keeps its files on this machine: read by local mode, the CLI and the local
 * decoder adapter alike (so it is in none of them), never by the core.
 */

/** The repository root (this file is src/paths.ts). */
export const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));

/**
 * Heavy, rebuildable things (the training venv, built model weights) live in a per-user cache, not
 * in the checkout, so a fresh clone (CI) reuses them. scripts/setup.mjs computes the same paths.
 */
export const CACHE_DIR =
  process.env.SIFT_CACHE_DIR ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'sift');
export const DEFAULT_PYTHON =
  process.env.SIFT_PYTHON ?? join(process.env.SIFT_VENV ?? join(CACHE_DIR, 'venv'), 'bin', 'python');
export const DEFAULT_MODELS_DIR = process.env.SIFT_MODELS_DIR ?? join(CACHE_DIR, 'models');

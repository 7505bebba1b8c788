/**
 * The three container images, defined once: the stacks build their assets from this table and
 * test/deploy/images.test.ts stages the very same assets to rehearse each image offline.
 *
 * What enters a build context is decided by the `.dockerignore` at the context's root (CDK reads
 * it and copies only what it lets through; `docker build` applies it again). Those files are
 * allowlists, so a synth output directory (`cdk synth -o <dir>`), node_modules, .sift, .git or
 * caches can never be copied into the context of the repository-root encoder image.
 */
import { IgnoreMode } from 'aws-cdk-lib';
import * as ecrAssets from 'aws-cdk-lib/aws-ecr-assets';
import { join } from 'node:path';
import { CONTAINERS_DIR, REPO_ROOT } from './paths';

export type ImageName = 'encoder' | 'decoder' | 'training';

interface ImageDefinition {
  /** Build context (holds the `.dockerignore` that applies). */
  readonly directory: string;
  /** Dockerfile, relative to the context. */
  readonly file: string;
  readonly ignoreMode: IgnoreMode;
  readonly platform: ecrAssets.Platform;
}

// GPU hosts (ECS g5/g6, SageMaker ml.g5/g6) are x86_64, whatever machine runs `cdk deploy`.
const common = { ignoreMode: IgnoreMode.DOCKER, platform: ecrAssets.Platform.LINUX_AMD64 } as const;

export const IMAGES: Record<ImageName, ImageDefinition> = {
  // the gateway runs the same src/ as local mode, so its context is the repository root (.dockerignore there)
  encoder: { directory: REPO_ROOT, file: join('containers', 'encoder', 'Dockerfile'), ...common },
  decoder: { directory: join(CONTAINERS_DIR, 'decoder'), file: 'Dockerfile', ...common },
  training: { directory: join(CONTAINERS_DIR, 'training'), file: 'Dockerfile', ...common },
};

/**
 * The settings an operator may change through the environment, read in one place for every runtime
 * (local mode, Lambda, the ECS gateway: `createServices` merges them over the core's `defaultConfig`)
 * and passed to the core as `svc.config`; the core reads no environment.
 */
import { z } from 'zod';
import type { SiftConfig } from '../core/context';
import { parseOrigins } from '../http/cors';
import { EXECUTION_PROVIDERS } from '../core/extraction/types';

const REQUIRE_PROVIDER_ENV = 'SIFT_REQUIRE_EXECUTION_PROVIDER';
const requiredProvider = z.enum(EXECUTION_PROVIDERS);

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): Partial<SiftConfig> {
  const out: Partial<SiftConfig> = {};
  const min = Number(env.SIFT_ADAPTIVE_MIN_EXAMPLES);
  if (Number.isInteger(min) && min >= 2) out.adaptiveMinExamples = min;
  const encoder = env.SIFT_DEFAULT_ENCODER;
  if (encoder !== undefined) out.defaultEncoder = encoder;
  // lib/workflow-stack.ts sets the stage's SageMaker type on the functions that bill training
  const instanceType = env.SIFT_TRAINING_INSTANCE_TYPE;
  if (instanceType !== undefined) out.trainingInstanceType = instanceType;
  const generation = env.SIFT_GENERATION_MODEL;
  if (generation !== undefined) out.generationModel = generation;
  // lib/inference-stack.ts sets it on the encoder service
  const preload = env.SIFT_PRELOAD_MODELS;
  if (preload !== undefined)
    out.preloadModels = preload
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  // lib/constructs/api-functions.ts and lib/inference-stack.ts set it from cdk.json's consoleOrigins;
  // a malformed entry stops the start (parseOrigins) rather than a console that cannot call the API
  const origins = env.SIFT_CONSOLE_ORIGINS;
  if (origins !== undefined) out.consoleOrigins = parseOrigins(origins);
  // lib/inference-stack.ts sets `cuda` on the GPU gateway task: a CPU fallback fails /ready there
  const required = env[REQUIRE_PROVIDER_ENV]?.trim().toLowerCase();
  if (required) {
    const parsed = requiredProvider.safeParse(required);
    if (!parsed.success)
      throw new Error(
        `${REQUIRE_PROVIDER_ENV} must be one of ${EXECUTION_PROVIDERS.join(', ')}; got '${env[REQUIRE_PROVIDER_ENV]}'`,
      );
    out.requireExecutionProvider = parsed.data;
  }
  // Test-only (see SiftConfig.testSwitches): test/helpers/localStack.ts sets it.
  if (env.SIFT_TEST_SWITCHES === '1') out.testSwitches = true;
  return out;
}

/**
 * Which onnxruntime execution provider the encoder sessions use. The one place
 * `SIFT_ENCODER_EXECUTION_PROVIDER` is read: `cpu` (default; local mode, tests) or `cuda` (the
 * ECS gateway task, which reserves a GPU).
 *
 * onnxruntime-node 1.30 bundles only the CPU provider for linux/x64; the CUDA provider's libraries
 * (`libonnxruntime_providers_{shared,cuda}.so`) are fetched by its install script and need CUDA 12 +
 * cuDNN 9 at run time. Where they can't load (no GPU, no driver, a dev install that skipped them),
 * session creation fails — so `cuda` falls back to CPU, with a warning naming the reason.
 *
 * onnxruntime-node does not fall back by itself: with `executionProviders: ['cuda', …]`, appending the
 * CUDA provider whose libraries don't load throws at session creation ("OrtSessionOptionsAppend
 * ExecutionProvider_Cuda: Failed to load shared library" — seen on this CPU machine, and what
 * test/http/readiness.test.ts runs). A CUDA provider that loads but finds no usable device is
 * assumed to throw the same way (the CUDA error patterns below; not run here, no GPU). Requirements:
 * "CUDA Execution Provider", https://onnxruntime.ai/docs/execution-providers/CUDA-ExecutionProvider.html.
 * The fallback is ours, and the outcome it returns lets readiness refuse it where a GPU is required.
 */
import { EXECUTION_PROVIDERS, type ExecutionProvider, type ExecutionProviderOutcome } from '../core/extraction/types';

export type { ExecutionProvider, ExecutionProviderOutcome } from '../core/extraction/types';
export const EXECUTION_PROVIDER_ENV = 'SIFT_ENCODER_EXECUTION_PROVIDER';

export function executionProviderFromEnv(env: NodeJS.ProcessEnv = process.env): ExecutionProvider {
  const raw = (env[EXECUTION_PROVIDER_ENV] ?? '').trim().toLowerCase();
  if (raw === '') return 'cpu';
  if ((EXECUTION_PROVIDERS as readonly string[]).includes(raw)) return raw as ExecutionProvider;
  throw new Error(
    `${EXECUTION_PROVIDER_ENV} must be one of ${EXECUTION_PROVIDERS.join(', ')}; got '${env[EXECUTION_PROVIDER_ENV]}'`,
  );
}

/** onnxruntime's provider list: with CUDA, CPU stays listed for the operators CUDA lacks. */
export const ortProviders = (p: ExecutionProvider): string[] => (p === 'cuda' ? ['cuda', 'cpu'] : ['cpu']);

/** Errors that mean "this provider can't run here" (libraries, driver, device), not "this model is bad". */
const PROVIDER_UNAVAILABLE = [
  /AppendExecutionProvider/i,
  /Failed to load (shared )?library/i,
  /no CUDA-capable device/i,
  /CUDA driver version is insufficient/i,
  /CUDA failure \d+/i,
  /cudaErrorNoDevice|cudaErrorInsufficientDriver/,
];

export function isProviderUnavailable(err: unknown): boolean {
  const text = err instanceof Error ? `${err.message}\n${err.stack ?? ''}` : String(err);
  return PROVIDER_UNAVAILABLE.some((re) => re.test(text));
}

export interface ProviderLog {
  info(message: string, extra?: Record<string, unknown>): void;
  warn(message: string, extra?: Record<string, unknown>): void;
}

/**
 * Creates something with the wanted provider; if that provider can't load, warns and creates it on
 * CPU instead. Logs the provider actually in use either way, and returns it with the value.
 */
export async function withProviderFallback<T>(
  wanted: ExecutionProvider,
  create: (p: ExecutionProvider) => Promise<T>,
  log: ProviderLog,
  context: Record<string, unknown> = {},
): Promise<{ value: T; provider: ExecutionProviderOutcome }> {
  let reason: string | undefined;
  if (wanted !== 'cpu') {
    try {
      const value = await create(wanted);
      log.info('encoder sessions created', { ...context, execution_provider: wanted, requested: wanted });
      return { value, provider: { requested: wanted, used: wanted } };
    } catch (err) {
      if (!isProviderUnavailable(err)) throw err;
      reason = (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);
      log.warn(`the ${wanted} execution provider could not be loaded; encoder sessions run on CPU`, {
        ...context,
        requested: wanted,
        execution_provider: 'cpu',
        reason,
      });
    }
  }
  const value = await create('cpu');
  log.info('encoder sessions created', { ...context, execution_provider: 'cpu', requested: wanted });
  return { value, provider: { requested: wanted, used: 'cpu', ...(reason === undefined ? {} : { reason }) } };
}

/**
 * The workflow Lambda's side of engine-bound tasks: it forwards them to the encoder service over
 * the VPC (`SIFT_ENCODER_URL`, the internal ALB) with the internal token. A 503 without
 * Retry-After is `Sift.ServiceWaking` (see `isWaking`); connection failures and other 5xx/429 are
 * `Sift.TransientError`; the state machine retries each with its own patience
 * (lib/workflows/definitions.ts). A 4xx is a real failure.
 */
import { INTERNAL_TOKEN_HEADER } from '../http/internalAuth';

export type RemoteTaskErrorName = 'Sift.ServiceWaking' | 'Sift.TransientError' | 'Sift.TaskFailed';

export class RemoteTaskError extends Error {
  constructor(name: RemoteTaskErrorName, message: string) {
    super(message);
    this.name = name;
  }
}

let tokenFromSecret: Promise<string | undefined> | undefined;

/** The token: `SIFT_INTERNAL_TOKEN`, else read once from Secrets Manager (`SIFT_INTERNAL_TOKEN_SECRET_ARN`, as the CDK stack sets). */
async function internalToken(): Promise<string | undefined> {
  if (process.env.SIFT_INTERNAL_TOKEN) return process.env.SIFT_INTERNAL_TOKEN;
  const arn = process.env.SIFT_INTERNAL_TOKEN_SECRET_ARN;
  if (!arn) return undefined;
  tokenFromSecret ??= (async () => {
    const { SecretsManagerClient, GetSecretValueCommand } = await import('@aws-sdk/client-secrets-manager');
    return (await new SecretsManagerClient({}).send(new GetSecretValueCommand({ SecretId: arn }))).SecretString;
  })().catch((err: unknown) => {
    tokenFromSecret = undefined; // try again on the next task
    throw new RemoteTaskError(
      'Sift.TransientError',
      `could not read the internal token secret: ${(err as Error).message}`,
    );
  });
  return tokenFromSecret;
}

/** The encoder service's base URL: `SIFT_ENCODER_URL`, else the gateway URL the workflow stack sets. */
export const encoderServiceUrl = (env: NodeJS.ProcessEnv = process.env) =>
  env.SIFT_ENCODER_URL ?? env.SIFT_INFERENCE_URL;

export async function runOnEncoderService(
  task: string,
  input: unknown,
  opts: { baseUrl?: string | undefined; token?: string | undefined; timeoutMs?: number; fetchImpl?: typeof fetch } = {},
): Promise<unknown> {
  const baseUrl = opts.baseUrl ?? encoderServiceUrl();
  const token = opts.token ?? (await internalToken());
  if (!baseUrl || !token)
    throw new RemoteTaskError(
      'Sift.TaskFailed',
      `task '${task}' needs the encoder service: SIFT_ENCODER_URL (or SIFT_INFERENCE_URL) and SIFT_INTERNAL_TOKEN (or SIFT_INTERNAL_TOKEN_SECRET_ARN)`,
    );
  let res: Response;
  try {
    res = await (opts.fetchImpl ?? fetch)(`${baseUrl.replace(/\/$/, '')}/internal/tasks/${task}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [INTERNAL_TOKEN_HEADER]: token },
      body: JSON.stringify(input),
      signal: AbortSignal.timeout(opts.timeoutMs ?? 14 * 60_000),
    });
  } catch (err) {
    throw new RemoteTaskError(
      'Sift.TransientError',
      `encoder service unreachable for '${task}': ${(err as Error).message}`,
    );
  }
  const text = await res.text();
  if (res.ok) return JSON.parse(text) as unknown;
  let detail = text.slice(0, 500);
  try {
    detail = String((JSON.parse(text) as { detail?: unknown }).detail ?? detail);
  } catch {
    /* not JSON */
  }
  throw new RemoteTaskError(failureName(res), `encoder service answered ${res.status} for '${task}': ${detail}`);
}

/**
 * A service scaled to zero, or one whose task is still booting: the ALB answers 503 itself (an HTML
 * page, no Retry-After) while its target group has no healthy target ("HTTP 503: Service
 * unavailable", https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-troubleshooting.html),
 * and the gateway relays a cold decoder the same way (a 503 without Retry-After,
 * src/adapters/decoder/openAiUpstream.ts). The gateway's own 503s (a store down, a model still
 * building) carry Retry-After and clear in seconds: those stay transient.
 */
const isWaking = (res: Response): boolean => res.status === 503 && !res.headers.has('retry-after');

function failureName(res: Response): RemoteTaskErrorName {
  if (isWaking(res)) return 'Sift.ServiceWaking';
  return res.status >= 500 || res.status === 429 ? 'Sift.TransientError' : 'Sift.TaskFailed';
}

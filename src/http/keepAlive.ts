/**
 * Connection timeouts of everything behind the inference ALB, in one place: the CDK stacks set the
 * ALB's idle timeout and the decoder's keep-alive from here, and the gateway's node:http server
 * reads it directly (this file ships in the encoder image; lib/ does not).
 *
 * The ALB reuses its connections to a target for up to its idle timeout; a target that closes an
 * idle connection sooner races the ALB's next request on it (a 502). So every target's keep-alive
 * is longer than the ALB's idle timeout.
 * https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-load-balancer-attributes.html#connection-idle-timeout
 * node's headersTimeout stays above keepAliveTimeout, and requestTimeout ≥ headersTimeout (node
 * refuses the opposite in createServer options): https://nodejs.org/api/http.html#serverheaderstimeout
 */
import { createServer, type RequestListener, type Server } from 'node:http';

export const KEEP_ALIVE = {
  /** ALB idle timeout: a streamed response may run to API Gateway's 15-minute integration cap. */
  albIdleTimeoutSeconds: 900,
  /** Every target behind the ALB (node gateway, vLLM/uvicorn) keeps idle connections this long. */
  backendKeepAliveSeconds: 910,
  /** node:http headersTimeout and requestTimeout, above the keep-alive. */
  nodeHeadersTimeoutSeconds: 915,
} as const;

/** A node:http server whose timeouts keep it behind the ALB's idle timeout (local mode uses it too). */
export function createKeepAliveServer(handler: RequestListener): Server {
  const headersTimeout = KEEP_ALIVE.nodeHeadersTimeoutSeconds * 1000;
  return createServer(
    { headersTimeout, requestTimeout: headersTimeout, keepAliveTimeout: KEEP_ALIVE.backendKeepAliveSeconds * 1000 },
    handler,
  );
}

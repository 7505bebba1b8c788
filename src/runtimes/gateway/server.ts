/**
 * The ECS gateway (encoder service): the HTTP API served from AWS resources (SIFT_TABLE,
 * SIFT_BUCKET, SIFT_QUEUE_URL) plus the internal routes the workflow Lambdas call.
 *
 * Its imports are static and reach only runtime code (src/, production dependencies): the image
 * carries src/ and bin/gateway.ts, never lib/ (CDK) or local-mode code, and `--check` proves it
 * by loading this module graph (test/deploy/images.test.ts runs it against the replayed image).
 */
import type { Server } from 'node:http';
import { type AwsServices, servicesFromEnv } from '../../adapters/aws';
import { createHotPath } from '../../core/hotPath';
import type { Logger } from '../../core/logger';
import { SiftApp } from '../../http/app';
import { createLogger } from '../../http/logger';
import { allRoutes } from '../../http/routes';
import { internalRoutes } from '../../http/routes/internal';
import { createApiServer } from '../node/httpAdapter';

export interface Gateway {
  server: Server;
  logger: Logger;
  /** Stops accepting requests, lets those in flight finish, then writes what was buffered (inferences, usage). */
  shutdown(): Promise<void>;
}

/**
 * The gateway's composition: one long-lived process per task, so limits and usage are kept in memory
 * (flushed each second) and the hot path caches keys and writes inferences after the response. The
 * graph is finished here and read-only.
 */
export function composeGateway(logger: Logger): Readonly<AwsServices> {
  return servicesFromEnv('memory', {
    hotPath: createHotPath((id, error) =>
      logger.error('could not store an inference after its response', { inference_id: id, error: error as Error }),
    ),
  });
}

export function serveGateway(port: number): Gateway {
  const logger = createLogger();
  const svc = composeGateway(logger);
  // internal routes (engine-bound workflow tasks) answer only callers holding SIFT_INTERNAL_TOKEN
  const app = new SiftApp(svc, [...allRoutes(), ...internalRoutes()], logger);
  // keep-alive above the ALB's idle timeout (src/http/keepAlive.ts); no request can throw out of its listener
  const server = createApiServer(app, svc.config.maxBodyBytes, { logger });
  server.listen(port, '0.0.0.0', () => process.stdout.write(`Sift gateway listening on :${port}\n`));
  const shutdown = async () => {
    await new Promise<void>((ok) => server.close(() => ok()));
    await svc.hotPath?.writes.drain();
    await svc.usage.flush();
  };
  // ECS stops a task with SIGTERM: finish the writes made after responses and the buffered usage first
  process.once('SIGTERM', () => {
    void shutdown().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error('shutdown on SIGTERM failed', { error });
        process.exit(1);
      },
    );
  });
  return { server, logger, shutdown };
}

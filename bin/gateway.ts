/**
 * Entry program of the encoder image (containers/encoder/Dockerfile): the ECS gateway.
 *
 *   node --import tsx bin/gateway.ts            serve on $PORT (default 8080)
 *   node --import tsx bin/gateway.ts --check    load every module the server loads, then exit 0
 *
 * Separate from bin/sift.ts on purpose: the CLI also reaches local-mode code (emulators, the
 * local Step Functions runner, lib/ ASL) and devDependencies that `npm ci --omit=dev` leaves out.
 */
import { exitCleanlyOnFatalErrors } from '../src/http/fatalErrors';
import { serveGateway } from '../src/runtimes/gateway/server';

if (process.argv.includes('--check')) {
  process.stdout.write('gateway modules loaded\n');
} else {
  const gateway = serveGateway(Number(process.env.PORT ?? '8080'));
  // An error nobody caught: log it, drain and flush, exit 1; ECS replaces the task
  // (the policy and why: src/http/fatalErrors.ts).
  exitCleanlyOnFatalErrors({ logger: gateway.logger, shutdown: gateway.shutdown });
}

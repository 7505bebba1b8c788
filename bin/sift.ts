#!/usr/bin/env -S npx tsx
/** The `sift` command: run the local service, print the OpenAPI document. */
import { Command } from 'commander';
import { buildOpenApi } from '../src/http/openapi';
import { API_VERSION, allRoutes } from '../src/http/routes';
import { startLocal } from '../src/local/main';

const program = new Command().name('sift').description('Sift: training and inference for GLiNER2 encoders and small decoder LLMs');

program
  .command('serve')
  .description('Start the whole service locally on embedded stores (PORT, SIFT_DATA_DIR, SIFT_ADMIN_KEY)')
  .option('-p, --port <port>', 'port to listen on', process.env['PORT'] ?? '8080')
  .option('--host <host>', 'address to bind', process.env['SIFT_HOST'] ?? '127.0.0.1')
  .option('-d, --data-dir <dir>', 'where state is kept', process.env['SIFT_DATA_DIR'] ?? '.sift')
  .action(async (opts: { port: string; host: string; dataDir: string }) => {
    const port = Number(opts.port);
    const s3Port = process.env['SIFT_S3_PORT'] ? Number(process.env['SIFT_S3_PORT']) : port === 0 ? 0 : port + 1;
    const service = await startLocal({
      port,
      host: opts.host,
      dataDir: opts.dataDir,
      s3Port,
      ...(process.env['SIFT_ADMIN_KEY'] ? { adminKey: process.env['SIFT_ADMIN_KEY'] } : {}),
    });
    const lines = [`Sift is listening on ${service.url}  (state in ${opts.dataDir})`, `OpenAPI: ${service.url}/openapi.json`];
    if (service.createdAdminKey) {
      lines.push('', 'Created the operator API key (shown only this once; keep it):', `  ${service.createdAdminKey}`);
    }
    process.stdout.write(lines.join('\n') + '\n');
    const shutdown = async () => {
      await service.close();
      process.exit(0);
    };
    process.once('SIGINT', shutdown);
    process.once('SIGTERM', shutdown);
  });

program
  .command('openapi')
  .description('Print the OpenAPI 3.1 document')
  .action(() => {
    process.stdout.write(JSON.stringify(buildOpenApi(allRoutes(), API_VERSION), null, 2) + '\n');
  });

await program.parseAsync(process.argv);

/**
 * A Lambda entry point as it is deployed: bundled by esbuild with the stack's own options
 * (lib/constructs/sift-function.ts BUNDLING: ESM, minified, `@aws-sdk/*` left to the runtime), then
 * invoked the way the Node.js runtime does — a fresh process whose environment is the function's,
 * importing `index.mjs` and calling `handler(event, context)` ("Define Lambda function handler in
 * Node.js", https://docs.aws.amazon.com/lambda/latest/dg/nodejs-handler.html; "Using Lambda
 * environment variables", https://docs.aws.amazon.com/lambda/latest/dg/configuration-envvars.html).
 * Not modelled: the memory limit and timeout (a 30 s cap, not the function's), warm starts (each
 * invocation is cold), /tmp size, the runtime's own copy of the AWS SDK (node_modules' is used),
 * retries of a failed asynchronous invocation (a test invokes again for that).
 */
import { build } from 'esbuild';
import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BUNDLING } from '../../lib/constructs/sift-function';
import { LAMBDAS_DIR, REPO_ROOT } from '../../lib/paths';

// inside the checkout (git-ignored), so `@aws-sdk/*` resolves from node_modules as the runtime's copy would
const BUNDLES = join(REPO_ROOT, 'test', '.cache', 'lambda-bundles');

export async function bundleLambda(entry: string): Promise<string> {
  const outfile = join(BUNDLES, entry.replace(/\.ts$/, ''), 'index.mjs');
  await build({
    entryPoints: [join(LAMBDAS_DIR, entry)],
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: BUNDLING.target,
    mainFields: BUNDLING.mainFields,
    minify: BUNDLING.minify,
    sourcemap: true,
    external: BUNDLING.externalModules ?? [],
    banner: { js: BUNDLING.banner ?? '' },
    outfile,
    logLevel: 'silent',
  });
  return outfile;
}

const RUNNER = `
const [bundle, eventFile, outFile] = process.argv.slice(1);
const { readFileSync, writeFileSync } = await import('node:fs');
const context = { functionName: process.env.AWS_LAMBDA_FUNCTION_NAME, functionVersion: '$LATEST', invokedFunctionArn: 'arn:aws:lambda:us-east-1:123456789012:function:' + process.env.AWS_LAMBDA_FUNCTION_NAME, memoryLimitInMB: '512', awsRequestId: 'req-1', logGroupName: '/aws/lambda/x', logStreamName: 's', callbackWaitsForEmptyEventLoop: true, getRemainingTimeInMillis: () => 30000 };
let result;
try {
  const { handler } = await import(bundle);
  result = { ok: true, value: await handler(JSON.parse(readFileSync(eventFile, 'utf8')), context) };
} catch (error) {
  result = { ok: false, name: error?.name, message: error?.message };
}
writeFileSync(outFile, JSON.stringify(result ?? { ok: true }));
`;

export type Invocation = { ok: true; value: any } | { ok: false; name: string; message: string };

/** One cold invocation of `bundle` with exactly `env` (plus PATH), in its own process. */
export async function invokeBundle(bundle: string, env: Record<string, string>, event: unknown): Promise<Invocation> {
  const dir = join(BUNDLES, 'invocations', `${Date.now()}-${Math.random().toString(36).slice(2)}`);
  await mkdir(dir, { recursive: true });
  try {
    await writeFile(join(dir, 'event.json'), JSON.stringify(event));
    await promisify(execFile)(
      process.execPath,
      ['--input-type=module', '-e', RUNNER, bundle, join(dir, 'event.json'), join(dir, 'out.json')],
      {
        env: { PATH: process.env.PATH ?? '', ...env },
        timeout: 30_000,
      },
    );
    return JSON.parse(await readFile(join(dir, 'out.json'), 'utf8')) as Invocation;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

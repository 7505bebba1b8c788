/**
 * The import rules `npm run check:deps` (the first step of `npm test`) holds the code to
 * (ARCHITECTURE.md "Dependencies"), over every root: src, lambdas, bin, lib, test, bench.
 *
 *   src/core      the domain: its own modules, its ports, plain libraries (zod, ulid, csv-parse) and
 *                 the pure parts of node (crypto, path, stream, readline). No HTTP, no runtime, no
 *                 engine, no cloud SDK, no process environment (test/tooling/dependencyRules.test.ts
 *                 checks that one, which imports cannot show).
 *   src/encoder   the GLiNER2 engine (onnxruntime-node, tokenizers, worker threads): the service's
 *                 only import is the core's vocabulary for it, src/core/extraction/types.ts.
 *   src/http      the request pipeline and routes: the core, through Services; never an adapter.
 *   src/adapters  the ports' implementations: never a runtime (src/runtimes, src/local).
 *   runtimes      src/runtimes (node, lambda, gateway, local), src/local, src/aws, lambdas/, bin/: compose the rest.
 *   lib/          CDK: the route table and the limit numbers, nothing that runs.
 *
 * Every rule here fails on a planted violation: test/tooling/dependencyRules.test.ts.
 */

/** Node built-ins and packages that are technology: the core reaches them only through a port. */
const TECHNOLOGY = [
  '(node:)?(fs|fs/promises|child_process|worker_threads|net|http|https|http2|dgram|cluster|os|process|v8|vm)$',
  'onnxruntime-(node|common|web)',
  'tokenizers',
  'node-llama-cpp',
  '@aws-lambda-powertools/',
  '@aws-sdk/',
  '@smithy/',
  '@middy/',
  'aws-cdk-lib',
  'constructs',
  'dynalite',
  's3rver',
  'find-my-way',
  'aws-local-stepfunctions',
];
const technology = `^(${TECHNOLOGY.join('|')})`;
const inNodeModules = (names) => `(^|/)node_modules/(${names.join('|')})`;

module.exports = {
  forbidden: [
    {
      name: 'core-imports-no-adapter',
      severity: 'error',
      comment:
        'src/core is the domain: it reaches storage, queues, engines and runtimes through its ports (src/core/ports.ts); implementations live in src/adapters and src/encoder, the runtimes in src/aws, src/runtimes, src/local, src/cli, and installation paths in src/paths.ts.',
      from: { path: '^src/core/' },
      to: { path: '^(src/(adapters|aws|local|runtimes|cli|encoder)/|src/paths\\.ts$|lambdas/|bin/|lib/)' },
    },
    {
      name: 'core-no-http',
      severity: 'error',
      comment: 'The core knows no HTTP: src/http calls the core, never the other way round (errors are the core\'s own, errors.ts; the HTTP layer maps them).',
      from: { path: '^src/core/' },
      to: { path: '^src/http/' },
    },
    {
      name: 'core-no-technology',
      severity: 'error',
      comment:
        'The core imports no engine, cloud SDK, logging/metrics library or process-level node module: each sits behind a port (EncoderRuntime, DecoderRuntime, UsageMetrics, Logger, RecordStore, …) whose implementation the runtime passes in.',
      from: { path: '^src/core/' },
      to: { path: [technology, inNodeModules(TECHNOLOGY.slice(1))] },
    },
    {
      name: 'no-core-cycles',
      severity: 'error',
      comment:
        'An import cycle in the core, type-only imports included, means two modules own one concept: move the shared part into one module (as recordKeys.ts holds every record key, identity.ts the principal and team types, ports.ts the interfaces Services names).',
      from: { path: '^src/core/' },
      to: { path: '^src/core/', circular: true },
    },
    {
      name: 'engine-imports-only-core-vocabulary',
      severity: 'error',
      comment:
        'src/encoder is the GLiNER2 engine, a module of its own (as gliner2 keeps gliner2/inference/): it implements the core\'s vocabulary (src/core/extraction/types.ts) and imports nothing else of the service — no core logic, no HTTP, no adapter, no runtime. Whoever loads it passes in its logger and settings.',
      from: { path: '^src/encoder/' },
      to: { path: '^(src/|lambdas/|bin/|lib/)', pathNot: '^(src/encoder/|src/core/extraction/types\\.ts$)' },
    },
    {
      name: 'http-no-adapters',
      severity: 'error',
      comment:
        'src/http gets everything through Services (svc.encoder, svc.decoder, svc.records, …); the runtime that builds Services chooses the adapters. A route that needs a new capability needs a port.',
      from: { path: '^src/http/' },
      to: { path: '^(src/(adapters|encoder|aws|local|runtimes|cli)/|src/paths\\.ts$)' },
    },
    {
      name: 'adapters-no-runtime',
      severity: 'error',
      comment:
        'An adapter implements a port for any runtime: it never imports one (src/runtimes, src/local, src/cli, lambdas/, bin/). What several runtimes share (installation paths) lives in a neutral module (src/paths.ts).',
      from: { path: '^src/adapters/' },
      to: { path: '^(src/(local|runtimes|cli)/|lambdas/|bin/)' },
    },
    {
      name: 'lib-no-runtime-code',
      severity: 'error',
      comment:
        'lib/ (CDK) synthesizes templates from data: the route table (src/http/routeTable.ts), the limit numbers and metric names (src/core); it never loads an adapter, engine or runtime (a synth must not need onnxruntime or the AWS SDK clients).',
      from: { path: '^lib/' },
      to: { path: '^(src/(adapters|encoder|aws|local|runtimes|cli)/|lambdas/|bin/)' },
    },
    {
      name: 'production-no-tests',
      severity: 'error',
      comment: 'Shipped code (src, lambdas, bin, lib) never imports test helpers or benchmarks.',
      from: { path: '^(src|lambdas|bin|lib)/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'A relative import that does not resolve (a path left behind by a move): fix the path. (Type-only packages such as aws-lambda and export-map subpaths are left out: they resolve for tsc, not here.)',
      from: { path: '^(src|lambdas|bin|lib|test|bench)/' },
      to: { couldNotResolve: true, path: '^\\.' },
    },
  ],
  options: {
    // node_modules and node's built-ins stay in the graph (core-no-technology names them); only our
    // roots are followed
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(web|cdk\\.out|containers|\\.sift)/' },
    tsConfig: { fileName: 'tsconfig.json' },
    // type-only imports count too: a port typed as an adapter class is still a dependency on it
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.mjs', '.js', '.json'] },
  },
};

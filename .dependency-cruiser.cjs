/**
 * The import rules `npm run check:deps` (part of `npm test`) holds the code to (ARCHITECTURE.md):
 * the domain core depends on its ports (src/core/ports.ts), never on the adapters or runtimes that
 * implement them, and has no import cycles.
 */
module.exports = {
  forbidden: [
    {
      name: 'core-imports-no-adapter',
      severity: 'error',
      comment: 'src/core is the domain: it reaches storage, queues and runtimes through src/core/ports.ts; implementations live in src/adapters (and the runtimes in src/aws, src/local, src/lambda).',
      from: { path: '^src/core/' },
      to: { path: '^src/(adapters|aws|local|lambda)/' },
    },
    {
      name: 'no-core-cycles',
      severity: 'error',
      comment: 'An import cycle in the core, type-only imports included, means two modules own one concept: move the shared part into one module (as recordKeys.ts holds every record key, identity.ts the principal and team types, ports.ts the interfaces Services names).',
      from: { path: '^src/core/' },
      to: { path: '^src/core/', circular: true },
    },
  ],
  options: {
    includeOnly: '^src/',
    tsConfig: { fileName: 'tsconfig.json' },
    // type-only imports count too: a port typed as an adapter class is still a dependency on it
    tsPreCompilationDeps: true,
    enhancedResolveOptions: { extensions: ['.ts', '.mjs', '.js', '.json'] },
  },
};

/** Jest in ESM mode: @middy/core 7 is ESM-only (see ARCHITECTURE.md). */
export default {
  // the node environment; with SIFT_TEST_CPU_LOG set it also logs each file's CPU seconds
  testEnvironment: '<rootDir>/test/cpuAccountingEnvironment.cjs',
  extensionsToTreatAsEsm: ['.ts'],
  transform: {
    '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: 'tsconfig.json', diagnostics: false }],
  },
  testMatch: ['<rootDir>/test/**/*.test.ts'],
  setupFiles: ['<rootDir>/test/setup-env.js'],
  testTimeout: 30000,
  maxWorkers: 2,
  // How long a test worker may take to exit after its last suite before Jest kills it and reports
  // "failed to exit gracefully" (default 500 ms). Every worker reaches its 'exit' event within 1 ms;
  // the rest is native teardown (each suite's onnxruntime worker thread). On this 2-core machine
  // under load that took 455 and 533 ms, and 263 ms for Jest's own idle file-map workers. A real
  // open handle still never exits, and is still reported after this limit.
  workerGracefulExitTimeout: 5000,
};

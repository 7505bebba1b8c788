/**
 * Jest's node environment, plus one measurement: with SIFT_TEST_CPU_LOG set, each test file appends
 * the CPU seconds its worker spent on it — the worker itself (jest, the in-process local stack,
 * onnxruntime, llama.cpp) and the child processes it waited for (the Python trainers) — as one JSON
 * line. test:unit is CPU-bound on 2 cores, so CPU seconds, not wall time beside another suite, say
 * which file costs the run what (`node scripts/test-cpu-report.mjs <log>` sums them).
 * Unset (the default), it is the plain node environment.
 */
const { appendFileSync, readFileSync } = require('node:fs');
const { relative } = require('node:path');
const { TestEnvironment } = require('jest-environment-node');

const TICKS_PER_SECOND = 100; // USER_HZ on Linux: /proc/<pid>/stat counts CPU time in these

/** This process's CPU seconds and its waited-for children's, from /proc/self/stat (Linux only). */
function cpuSeconds() {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  // fields after the command name, which may hold spaces: state is field 3, utime..cstime 14..17
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const [utime, stime, cutime, cstime] = fields.slice(11, 15).map(Number);
  return { self: (utime + stime) / TICKS_PER_SECOND, children: (cutime + cstime) / TICKS_PER_SECOND };
}

class CpuAccountingEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.logFile = process.env.SIFT_TEST_CPU_LOG;
    this.testPath = relative(config.globalConfig.rootDir, context.testPath);
  }

  async setup() {
    await super.setup();
    if (this.logFile) {
      this.started = Date.now();
      this.before = cpuSeconds();
    }
  }

  async teardown() {
    await super.teardown();
    if (!this.logFile || !this.before) return;
    const after = cpuSeconds();
    const line = {
      file: this.testPath,
      wall_s: (Date.now() - this.started) / 1000,
      cpu_s: +(after.self - this.before.self).toFixed(2),
      children_cpu_s: +(after.children - this.before.children).toFixed(2),
    };
    appendFileSync(this.logFile, `${JSON.stringify(line)}\n`);
  }
}

module.exports = CpuAccountingEnvironment;

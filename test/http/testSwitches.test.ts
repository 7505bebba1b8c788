/**
 * The test-only switch that drops a generation's output constraint (`x-sift-test-unconstrained: 1`),
 * so each client test can show it fails without constrained decoding. It exists only on a server
 * started with `SIFT_TEST_SWITCHES=1`; a deployment never sets it, and there the header does nothing.
 */
import { configFromEnv } from '../../src/adapters/config';
import { defaultConfig } from '../../src/core/context';
import type { OutputConstraint } from '../../src/core/decoder/types';
import { effectiveConstraint } from '../../src/http/routes/generation';

const constraint: OutputConstraint = { kind: 'json_object' };
const ctx = (testSwitches: boolean, header?: string) =>
  ({
    svc: { config: { ...defaultConfig, testSwitches } },
    req: { headers: header === undefined ? {} : { 'x-sift-test-unconstrained': header } },
  }) as unknown as Parameters<typeof effectiveConstraint>[0];

describe('x-sift-test-unconstrained', () => {
  it('drops the constraint only with the switch on and the header set to 1', () => {
    expect(effectiveConstraint(ctx(true, '1'), constraint)).toBeUndefined();
    expect(effectiveConstraint(ctx(true, '0'), constraint)).toBe(constraint);
    expect(effectiveConstraint(ctx(true), constraint)).toBe(constraint);
    expect(effectiveConstraint(ctx(false, '1'), constraint)).toBe(constraint);
  });

  it('is on only where SIFT_TEST_SWITCHES=1, and off by default', () => {
    expect(defaultConfig.testSwitches).toBe(false);
    expect(configFromEnv({ SIFT_TEST_SWITCHES: '1' }).testSwitches).toBe(true);
    expect(configFromEnv({ SIFT_TEST_SWITCHES: 'true' })).not.toHaveProperty('testSwitches');
    expect(configFromEnv({})).not.toHaveProperty('testSwitches');
  });
});

/**
 * cdk-nag AwsSolutions: the app synthesizes with zero unacknowledged findings,
 * and every acknowledgement is specific and matches a finding that really
 * occurs (no stale or speculative acknowledgements).
 */
import { ACKNOWLEDGEMENTS } from '../../lib/nag';
import { buildApp, nagViolations } from './helpers';

describe('cdk-nag AwsSolutions', () => {
  const before = ACKNOWLEDGEMENTS.length;
  const built = buildApp({}, { nag: true });
  const acks = ACKNOWLEDGEMENTS.slice(before);

  it('reports no unacknowledged findings', () => {
    expect(nagViolations(built)).toEqual([]);
  });

  it('gives every acknowledgement a specific reason', () => {
    expect(acks.length).toBeGreaterThan(0);
    for (const ack of acks) {
      expect(ack.reason.length).toBeGreaterThanOrEqual(40);
      expect(ack.reason).not.toMatch(/^(n\/a|todo|ok|suppressed)/i);
    }
  });

  it('only acknowledges findings that actually occur', () => {
    process.env.SIFT_NAG_IGNORE_ACKS = '1';
    let raw: ReturnType<typeof nagViolations>;
    try {
      raw = nagViolations(buildApp({}, { nag: true }));
    } finally {
      delete process.env.SIFT_NAG_IGNORE_ACKS;
    }
    const unused = acks.filter(
      (ack) =>
        !raw.some((v) => v.rule === ack.id && v.paths.some((p) => p === ack.path || p.startsWith(`${ack.path}/`))),
    );
    expect(unused.map((a) => `${a.path} ${a.id}`)).toEqual([]);
  });
});

/**
 * The one place that talks to cdk-nag's acknowledgement API (cdk-nag 3 uses
 * CDK's `Validations` plugins; a future API change touches only this file).
 */
import { Validations } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';

export interface NagAck {
  /** Rule id, optionally with a finding: `AwsSolutions-IAM5[Resource::*]`. */
  readonly id: string;
  /** Why this finding is acceptable here; must be specific (checked by a test). */
  readonly reason: string;
}

/** Every acknowledgement made in this process, for the audit test and report. */
export const ACKNOWLEDGEMENTS: Array<NagAck & { path: string }> = [];

/**
 * Acknowledge cdk-nag findings on a construct (and its children).
 * `SIFT_NAG_IGNORE_ACKS=1` records but does not apply them (used by the test
 * that proves each acknowledgement matches a real finding).
 */
export function acknowledge(scope: IConstruct, ...acks: NagAck[]): void {
  for (const ack of acks) {
    if (ack.reason.trim().length < 20) {
      throw new Error(`nag acknowledgement ${ack.id} on ${scope.node.path} needs a specific reason`);
    }
    ACKNOWLEDGEMENTS.push({ ...ack, path: scope.node.path });
    if (process.env.SIFT_NAG_IGNORE_ACKS !== '1') {
      Validations.of(scope).acknowledge({ id: ack.id, reason: ack.reason });
    }
  }
}

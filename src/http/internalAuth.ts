/**
 * Service-to-service calls inside the VPC (the workflow Lambda → the encoder service): a shared
 * secret in `SIFT_INTERNAL_TOKEN` (from Secrets Manager on ECS and Lambda). Without the variable no
 * internal call is accepted at all.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export const INTERNAL_TOKEN_HEADER = 'x-sift-internal-token';

const digest = (s: string) => createHash('sha256').update(s).digest();

export function internalTokenMatches(sent: string | undefined, expected = process.env.SIFT_INTERNAL_TOKEN): boolean {
  if (!expected || expected.length < 32 || !sent) return false;
  // compare digests: equal length, constant time
  return timingSafeEqual(digest(sent), digest(expected));
}

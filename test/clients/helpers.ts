/**
 * What the client suites share (issue #28 item 4): each runs a real client library, unchanged but for
 * its base URL and key, against one local stack, and runs the same request once more with the
 * test-only switch that drops the grammar constraint (`x-sift-test-unconstrained: 1`, honoured only
 * when the server runs with SIFT_TEST_SWITCHES=1), to show the same test then fails.
 */
import { z } from 'zod';

export { MODEL } from '../compat/helpers';
export { OPERATOR_KEY } from '../helpers/localStack';

export const ENCODER = 'sift/gliner2-mini-v1';

/** The header a client sends (as its default headers) to be generated without the constraint. */
export const unconstrainedHeaders = (off: boolean): Record<string, string> =>
  off ? { 'x-sift-test-unconstrained': '1' } : {};

/**
 * The object every client asks for. Enums and a boolean keep the constrained answer short (it always
 * ends well inside MAX_TOKENS); the free answer of the tiny catalog decoder does not fit it (it writes
 * prose, fences or the schema back), which is what the unconstrained runs show.
 */
export const Landmark = z.object({
  city: z.enum(['Paris', 'Rome', 'Tokyo']),
  country: z.enum(['FR', 'IT', 'JP']),
  unesco_site: z.boolean(),
});
export type Landmark = z.infer<typeof Landmark>;

export const QUESTION = 'Where is the Eiffel Tower?';
export const TOOL = { name: 'record_landmark', description: 'Record where a landmark is.' };
/** Greedy decoding, seeded: the same answer on every run. */
export const SAMPLING = { temperature: 0, seed: 7, max_tokens: 100 };

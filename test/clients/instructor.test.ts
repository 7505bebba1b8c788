/**
 * instructor (Python, pinned in scripts/requirements-clients.txt) as users write it:
 * `instructor.from_openai(OpenAI(base_url=…, api_key=…))` in its default Mode.TOOLS (one tool, an
 * object tool_choice) with a pydantic model. test/clients/instructor_check.py asks twice, the second
 * time with the constraint switched off, where instructor raises its validation error.
 */
import { TestStack } from '../helpers/localStack';
import { Landmark, MODEL, OPERATOR_KEY } from './helpers';
import { runPythonClientCheck } from './pythonClient';

type Run = { ok: true; object: unknown } | { ok: false; error: string; message: string };

let stack: TestStack;
let constrained: Run;
let unconstrained: Run;
beforeAll(async () => {
  stack = await TestStack.start();
  const stdout = await runPythonClientCheck('instructor_check.py', [`${stack.url}/v1`, OPERATOR_KEY, MODEL]);
  [constrained, unconstrained] = stdout
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Run) as [Run, Run];
}, 180_000);
afterAll(async () => stack?.stop());

describe('instructor (Mode.TOOLS)', () => {
  it('returns a pydantic object that validates (and matches the same schema in zod)', () => {
    expect(constrained).toMatchObject({ ok: true });
    expect(Landmark.safeParse((constrained as { object: unknown }).object).success).toBe(true);
  });

  it('without the constraint instructor raises its validation error', () => {
    expect(unconstrained).toMatchObject({ ok: false, error: 'InstructorRetryException' });
    expect((unconstrained as { message: string }).message).toMatch(/No tool calls or function call found/);
  });
});

/**
 * What the Step Functions task runners share: the task table shape (ASL task name → function),
 * and the reason text a failure branch records from the state's `$.error`.
 */

/** Task name (`evaluation.prepare`, …) → the function that runs it on the state's input. */
export type TaskTable = Record<string, (input: never) => Promise<unknown>>;

/** The `{Error, Cause}` a Catch puts at `$.error`: Lambda errors carry a JSON Cause, local handlers plain text. */
export interface WorkflowError {
  Error?: string;
  Cause?: string;
}

export function failureReason(error: WorkflowError | undefined, fallback: string): string {
  let cause = error?.Cause ?? '';
  try {
    const parsed = JSON.parse(cause) as { errorMessage?: string; message?: string };
    cause = parsed.errorMessage ?? parsed.message ?? cause;
  } catch {
    /* plain text */
  }
  return (cause || error?.Error || fallback).slice(0, 2000);
}

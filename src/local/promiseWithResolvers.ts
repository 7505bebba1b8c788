/**
 * aws-local-stepfunctions uses Promise.withResolvers (Node >= 22); local mode and the tests also
 * run on Node 20. Import this module for its effect before running a state machine.
 */
const P = Promise as unknown as { withResolvers?: unknown };
if (typeof P.withResolvers !== 'function') {
  P.withResolvers = <T>() => {
    let resolve!: (v: T) => void;
    let reject!: (e: unknown) => void;
    const promise = new Promise<T>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}
export {};

/** InProcessWorkQueue: the local stand-in for SQS. Deferred promises drive the handler: no timers. */
import { InProcessWorkQueue } from '../../src/adapters/memory/workQueue';
import type { WorkMessage } from '../../src/core/ports';

/** These tests send dataset messages only; the version tells them apart. */
const versionOf = (m: WorkMessage) => (m.type === 'dataset.process' ? m.version : -1);

const msg = (version: number): WorkMessage => ({ type: 'dataset.process', team_id: 't', dataset_name: 'd', version });

function deferred() {
  let resolve!: () => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Lets queued microtasks and promise callbacks run (the queue pumps in a microtask). */
const flush = async () => {
  for (let i = 0; i < 10; i += 1) await Promise.resolve();
  await new Promise((r) => setImmediate(r));
};

/** A handler whose every call waits until the test releases it. */
function gatedHandler() {
  const gates = new Map<number, ReturnType<typeof deferred>>();
  const started: number[] = [];
  const finished: number[] = [];
  let running = 0;
  let maxRunning = 0;
  const handler = async (m: WorkMessage) => {
    running += 1;
    maxRunning = Math.max(maxRunning, running);
    started.push(versionOf(m));
    const gate = deferred();
    gates.set(versionOf(m), gate);
    try {
      await gate.promise;
      finished.push(versionOf(m));
    } finally {
      running -= 1;
    }
  };
  return {
    handler,
    gates,
    started,
    finished,
    get running() {
      return running;
    },
    get maxRunning() {
      return maxRunning;
    },
  };
}

describe('InProcessWorkQueue', () => {
  it('never runs more than `concurrency` handlers at once, and starts messages in order', async () => {
    const h = gatedHandler();
    const queue = new InProcessWorkQueue(h.handler, 2);
    for (let v = 1; v <= 5; v += 1) await queue.send(msg(v));
    await flush();
    expect(h.started).toEqual([1, 2]);
    expect(h.running).toBe(2);
    h.gates.get(2)!.resolve();
    await flush();
    expect(h.started).toEqual([1, 2, 3]);
    h.gates.get(1)!.resolve();
    h.gates.get(3)!.resolve();
    await flush();
    expect(h.started).toEqual([1, 2, 3, 4, 5]);
    h.gates.get(4)!.resolve();
    h.gates.get(5)!.resolve();
    await queue.idle();
    expect(h.maxRunning).toBe(2);
    expect(h.finished.sort()).toEqual([1, 2, 3, 4, 5]);
  });

  it('honours a concurrency of 1 and of more than the backlog', async () => {
    for (const [concurrency, expected] of [
      [1, 1],
      [10, 4],
    ] as const) {
      const h = gatedHandler();
      const queue = new InProcessWorkQueue(h.handler, concurrency);
      for (let v = 1; v <= 4; v += 1) await queue.send(msg(v));
      await flush();
      expect(h.running).toBe(expected);
      for (let v = 1; v <= 4; v += 1) {
        await flush();
        h.gates.get(v)!.resolve();
      }
      await queue.idle();
      expect(h.maxRunning).toBe(expected);
      expect(h.finished).toHaveLength(4);
    }
  });

  it('idle() resolves at once when nothing is queued, and only after queued and running work ends', async () => {
    const h = gatedHandler();
    const queue = new InProcessWorkQueue(h.handler, 1);
    await queue.idle();
    await queue.send(msg(1));
    await queue.send(msg(2));
    let idle = false;
    const waiters = [queue.idle(), queue.idle()];
    void Promise.all(waiters).then(() => {
      idle = true;
    });
    await flush();
    h.gates.get(1)!.resolve();
    await flush();
    expect(idle).toBe(false); // message 2 is now running
    expect(h.started).toEqual([1, 2]);
    h.gates.get(2)!.resolve();
    await Promise.all(waiters);
    expect(idle).toBe(true);
    // Usable again after going idle.
    await queue.send(msg(3));
    await flush();
    h.gates.get(3)!.resolve();
    await queue.idle();
    expect(h.finished).toEqual([1, 2, 3]);
  });

  it('reports a failing message to onError with the message, and keeps going', async () => {
    const errors: [unknown, WorkMessage][] = [];
    const done: number[] = [];
    const queue = new InProcessWorkQueue(
      async (m) => {
        if (versionOf(m) % 2 === 0) throw new Error(`boom ${versionOf(m)}`);
        done.push(versionOf(m));
      },
      2,
      (err, m) => errors.push([err, m]),
    );
    for (let v = 1; v <= 6; v += 1) await queue.send(msg(v));
    await queue.idle();
    expect(done.sort()).toEqual([1, 3, 5]);
    expect(errors.map(([e, m]) => [(e as Error).message, versionOf(m)])).toEqual([
      ['boom 2', 2],
      ['boom 4', 4],
      ['boom 6', 6],
    ]);
    await queue.send(msg(7));
    await queue.idle();
    expect(done).toContain(7);
  });

  it('treats a handler that throws before returning a promise like one that rejects', async () => {
    const errors: string[] = [];
    const done: number[] = [];
    const handler = ((m: WorkMessage) => {
      if (versionOf(m) === 1) throw new Error('sync boom');
      done.push(versionOf(m));
      return Promise.resolve();
    }) as (m: WorkMessage) => Promise<void>;
    const queue = new InProcessWorkQueue(handler, 1, (err) => errors.push((err as Error).message));
    await queue.send(msg(1));
    await queue.send(msg(2));
    await queue.idle();
    expect(errors).toEqual(['sync boom']);
    expect(done).toEqual([2]);
  });

  it('without onError, failures are swallowed and the queue still drains', async () => {
    const done: number[] = [];
    const queue = new InProcessWorkQueue(async (m) => {
      if (versionOf(m) === 1) throw new Error('ignored');
      done.push(versionOf(m));
    }, 1);
    await queue.send(msg(1));
    await queue.send(msg(2));
    await queue.idle();
    expect(done).toEqual([2]);
  });
});

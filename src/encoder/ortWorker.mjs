// onnxruntime-node sessions in a worker thread (used where the main thread runs in a separate JS
// realm, e.g. Jest's VM modules, whose typed arrays onnxruntime-common rejects). Plain JS so the
// worker loads without a TypeScript loader.
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';

const sessions = {};
try {
  for (const [name, file] of Object.entries(workerData.files))
    sessions[name] = await ort.InferenceSession.create(file, workerData.options);
  parentPort.postMessage({ ready: true });
} catch (e) {
  parentPort.postMessage({ ready: false, error: String(e?.stack || e) });
}
parentPort.on('message', async (msg) => {
  if (msg.release) {
    await Promise.all(Object.values(sessions).map((s) => s.release()));
    parentPort.postMessage({ id: msg.id, res: {} });
    return;
  }
  try {
    const feeds = {};
    for (const [k, v] of Object.entries(msg.feeds)) feeds[k] = new ort.Tensor(v.type, v.data, v.dims);
    const out = await sessions[msg.name].run(feeds);
    const res = {};
    const transfer = [];
    for (const [k, t] of Object.entries(out)) {
      const data = t.data.slice();
      res[k] = { data, dims: [...t.dims] };
      transfer.push(data.buffer);
    }
    parentPort.postMessage({ id: msg.id, res }, transfer);
  } catch (e) {
    parentPort.postMessage({ id: msg.id, error: String(e?.stack || e) });
  }
});

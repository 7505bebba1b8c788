/**
 * The child process of src/local/validationProcess.ts: validates dataset files, one at a time, each
 * already copied to a local file, and sends each outcome back over IPC. Plain JS, so it starts the
 * same under tsx (`npm start`) and under Jest; the validator itself is TypeScript, loaded once
 * through tsx's API.
 */
import { createReadStream } from 'node:fs';
import { tsImport } from 'tsx/esm/api';

// the server went away (or closed the pool): nothing is left to answer
process.on('disconnect', () => process.exit(0));
const { validateDataset } = await tsImport('../adapters/fs/datasetFiles.ts', import.meta.url);
process.on('message', async ({ sourceFile, job }) => {
  try {
    process.send({ outcome: await validateDataset(createReadStream(sourceFile), job) });
  } catch (err) {
    process.send({ error: err instanceof Error ? err.message : String(err) });
  }
});

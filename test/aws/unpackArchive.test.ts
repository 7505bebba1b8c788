/**
 * `training.complete` unpacks SageMaker's model.tar.gz into the job's model prefix. Entry names come
 * from the archive, and node-tar's Parser passes `..` and absolute names through as they are (security
 * review F12): an unsafe one fails the step, naming it, and no key is written from it or after it.
 * The archives are written byte by byte (tar headers), as a hostile trainer could write them.
 */
import { gzipSync } from 'node:zlib';
import { Header } from 'tar';
import { completeTraining } from '../../src/aws/trainingWorkflow';
import { modelPrefix } from '../../src/core/training/artifacts';
import { getTrainingJob } from '../../src/core/trainingJobs';
import { newJob, teamWithDataset } from '../helpers/memoryDomain';

/** A gzipped tar of these regular files, their names written into the headers exactly as given. */
function tarGz(files: [name: string, content: string][]): Buffer {
  const blocks: Buffer[] = [];
  for (const [name, content] of files) {
    const body = Buffer.from(content);
    const header = Buffer.alloc(512);
    new Header({ path: name, type: 'File', size: body.length, mode: 0o644, mtime: new Date(0) }).encode(header, 0);
    blocks.push(header, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024)); // the end-of-archive marker
  return gzipSync(Buffer.concat(blocks));
}

async function complete(files: [string, string][]) {
  const { svc, teamId } = await teamWithDataset();
  const job = await newJob(svc, teamId);
  const artifactKey = `jobs/${teamId}/${job.id}/sagemaker/output/model.tar.gz`;
  await svc.blobs.put(artifactKey, tarGz(files));
  const outcome = await completeTraining(svc, {
    teamId,
    jobId: job.id,
    trainingResult: { modelArtifacts: svc.blobs.uri(artifactKey) },
  }).then(
    (done) => ({ done }),
    (error: Error) => ({ error }),
  );
  const written = (await svc.blobs.list('')).filter((k) => k !== artifactKey && !k.startsWith('datasets/'));
  return { outcome, written, prefix: modelPrefix(teamId, job.id), job: await getTrainingJob(svc, teamId, job.id) };
}

const METRICS = JSON.stringify({ metrics: { f1: 0.5 } });

describe('training.complete: unpacking the model archive', () => {
  it('writes every plain entry under the job model prefix and completes the job', async () => {
    const { outcome, written, prefix, job } = await complete([
      ['./metrics.json', METRICS],
      ['onnx/encoder.onnx', 'onnx'],
    ]);
    expect(outcome).toEqual({ done: { status: 'complete' } });
    expect(written).toEqual(expect.arrayContaining([`${prefix}metrics.json`, `${prefix}onnx/encoder.onnx`]));
    expect(job.status).toBe('complete');
  });

  it.each([
    ['../../escaped.txt', /climbs out/],
    ['onnx/../../../../models/sift/gliner2-mini-v1/onnx/encoder.onnx', /climbs out/],
    ['/etc/cron.d/x', /absolute/],
  ])('refuses the entry %j, naming it, and writes nothing from it on', async (name, why) => {
    const { outcome, written, prefix, job } = await complete([
      ['metrics.json', METRICS],
      [name, 'hostile'],
      ['onnx/after.onnx', 'never written'],
    ]);
    expect('error' in outcome && outcome.error.message).toMatch(why);
    expect('error' in outcome && outcome.error.message).toContain(`names an unsafe path ${JSON.stringify(name)}`);
    expect(written.filter((k) => !k.startsWith(prefix) || k.includes('..') || k.includes('//'))).toEqual([]);
    expect(written).not.toContain(`${prefix}onnx/after.onnx`);
    // the step failed: Step Functions' catch records it (training.failed), the job never completes here
    expect(job.status).not.toBe('complete');
  });
});

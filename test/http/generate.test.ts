/**
 * POST /generate on the real local decoder (SmolLM2-135M) and the mini encoder: the generation
 * state machine (the deployed ASL, run in-process) writes a dataset version that went through the
 * ordinary row validation; bad requests are 422; a failing generator fails the job with the reason.
 */
import { jest } from '@jest/globals';
import { TestStack } from '../helpers/localStack';

jest.setTimeout(10 * 60_000);
let stack: TestStack;

beforeAll(async () => {
  stack = await TestStack.start({ withModels: true });
}, 120_000);
afterAll(async () => stack?.stop());

async function finished(jobId: string): Promise<any> {
  for (;;) {
    const job = (await stack.call('GET', `/generate/jobs/${jobId}`)).body;
    if (job.status === 'complete' || job.status === 'failed') return job;
    await new Promise((r) => setTimeout(r, 500));
  }
}

async function rowsOf(name: string, version: number): Promise<any[]> {
  const teamId = (await stack.call('GET', '/billing/usage/requests')).body.team_id;
  const text = await stack.svc.blobs.getText(`datasets/${teamId}/${name}/v${version}/rows.jsonl`);
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
}

it('generates a classification dataset: queued, then complete with a ready dataset version', async () => {
  const res = await stack.call('POST', '/generate', {
    body: {
      task_type: 'classification',
      dataset_name: 'gen-sentiment',
      num_examples: 4,
      labels: ['positive review', 'negative review'],
      domain_description: 'online shop',
    },
  });
  expect(res.status).toBe(202);
  expect(res.body.status).toBe('queued');
  const job = await finished(res.body.job_id);
  expect(job.error).toBeNull();
  expect(job.status).toBe('complete');
  expect(job.generated).toBeGreaterThan(0);
  expect(job.generated).toBeLessThanOrEqual(4);
  const version = (await stack.call('GET', `/core/datasets/gen-sentiment/${job.dataset_version}`)).body;
  expect(version.status).toBe('ready');
  expect(version.row_count).toBe(job.generated);
  const rows = await rowsOf('gen-sentiment', job.dataset_version);
  for (const r of rows) {
    expect(['positive review', 'negative review']).toContain(r.label);
    expect(r.text.length).toBeGreaterThanOrEqual(8);
  }
  expect(new Set(rows.map((r) => r.text)).size).toBe(rows.length);
  expect((await stack.call('GET', '/generate/jobs')).body.data.map((j: any) => j.job_id)).toContain(res.body.job_id);
});

it('generates NER rows whose entities the encoder labelled with valid code-point offsets', async () => {
  const res = await stack.call('POST', '/generate', {
    body: {
      task_type: 'ner',
      dataset_name: 'gen-people',
      num_examples: 6,
      labels: ['person', 'city'],
      domain_description: 'short news sentences naming a person and the city they visited',
    },
  });
  expect(res.status).toBe(202);
  const job = await finished(res.body.job_id);
  // a job that fails (e.g. "no usable example") is a failure of this test, not a pass
  expect(job.error).toBeNull();
  expect(job.status).toBe('complete');
  const rows = await rowsOf('gen-people', job.dataset_version);
  expect(rows.length).toBe(job.generated);
  expect(rows.length).toBeGreaterThan(0);
  for (const r of rows) {
    expect(r.entities.length).toBeGreaterThan(0);
    for (const e of r.entities) {
      expect(['person', 'city']).toContain(e.label);
      expect(
        Array.from(r.text as string)
          .slice(e.start, e.end)
          .join(''),
      ).toBe(e.text);
    }
  }
});

it.each([
  ['labels missing for ner', { task_type: 'ner', dataset_name: 'x', num_examples: 2 }, ['body', 'labels']],
  [
    'unsupported task_type',
    { task_type: 'structures', dataset_name: 'x', num_examples: 2, labels: ['a'] },
    ['body', 'task_type'],
  ],
  [
    'num_examples 0',
    { task_type: 'classification', dataset_name: 'x', num_examples: 0, labels: ['a'] },
    ['body', 'num_examples'],
  ],
  [
    'num_examples over the cap',
    { task_type: 'classification', dataset_name: 'x', num_examples: 10_001, labels: ['a'] },
    ['body', 'num_examples'],
  ],
  [
    'a seed example with an unknown label',
    {
      task_type: 'classification',
      dataset_name: 'x',
      num_examples: 2,
      labels: ['a'],
      classified_examples: [{ text: 'hi there', label: 'b' }],
    },
    ['body', 'classified_examples', 0, 'label'],
  ],
  [
    'seed examples on ner',
    {
      task_type: 'ner',
      dataset_name: 'x',
      num_examples: 2,
      labels: ['a'],
      classified_examples: [{ text: 'hi there', label: 'a' }],
    },
    ['body', 'classified_examples'],
  ],
])('422 for %s', async (_name, body, loc) => {
  const res = await stack.call('POST', '/generate', { body });
  expect(res.status).toBe(422);
  expect(res.body.errors[0].loc).toEqual(loc);
});

it('a generator that cannot run fails the job with the reason', async () => {
  // as the service would have read SIFT_GENERATION_MODEL at start (configuration is read once per process)
  const saved = stack.svc.config.generationModel;
  stack.svc.config.generationModel = 'acme/not-installed';
  try {
    const res = await stack.call('POST', '/generate', {
      body: { task_type: 'decoder', dataset_name: 'gen-chat', num_examples: 2 },
    });
    const job = await finished(res.body.job_id);
    expect(job.status).toBe('failed');
    expect(job.error).toMatch(/acme\/not-installed.*not installed/);
    expect(job.finished_at).toEqual(expect.any(String));
  } finally {
    stack.svc.config.generationModel = saved;
  }
});

/**
 * Real training through the HTTP API: the Python trainer (gliner2, PEFT, TRL) on the offline base
 * models that `npm test`'s set-up builds. Nothing here is simulated.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jest } from '@jest/globals';
import OpenAI, { toFile } from 'openai7';
import { list as listTar } from 'tar';
import { getCheckpoint, modelPrefix } from '../../src/core/training/artifacts';
import { runPythonClientCheck } from '../clients/pythonClient';
import { OPERATOR_KEY, TestStack, jsonl } from '../helpers/localStack';

jest.setTimeout(15 * 60_000);

let stack: TestStack;
const TERMINAL = ['complete', 'failed', 'stopped'];

const people = [
  'Tim Cook',
  'Satya Nadella',
  'Sundar Pichai',
  'Jensen Huang',
  'Lisa Su',
  'Andy Jassy',
  'Mary Barra',
  'Arvind Krishna',
];
const companies = ['Apple', 'Microsoft', 'Google', 'Nvidia', 'AMD', 'Amazon', 'General Motors', 'IBM'];
const cities = ['Paris', 'Berlin', 'Tokyo', 'Austin', 'Toronto', 'Madrid'];
const nerRows = Array.from({ length: 40 }, (_, i) => {
  const p = people[i % people.length] as string;
  const c = companies[(i * 3) % companies.length] as string;
  const city = cities[i % cities.length] as string;
  return {
    text: `${p} visited the ${c} office in ${city} last week.`,
    entities: [
      [p, 'person'],
      [c, 'company'],
      [city, 'city'],
    ],
  };
});
const clsRows = Array.from({ length: 30 }, (_, i) =>
  i % 2 === 0
    ? { text: `I love this product, it works great (${i}).`, label: 'positive' }
    : { text: `Terrible, it broke after a day (${i}).`, label: 'negative' },
);
const chatRows = Array.from({ length: 12 }, (_, i) => ({
  messages: [
    { role: 'user', content: `What is ${i} plus ${i}?` },
    { role: 'assistant', content: `${i} plus ${i} is ${i + i}.` },
  ],
}));

async function waitForJob(id: string, until: (job: any) => boolean = (j) => TERMINAL.includes(j.status)): Promise<any> {
  for (;;) {
    const job = (await stack.call('GET', `/core/training-jobs/${id}`)).body;
    if (until(job)) return job;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

beforeAll(async () => {
  stack = await TestStack.start({ maxTrainingJobs: 1, withModels: true });
  const models = (await stack.call('GET', '/base-models')).body.data;
  const mini = models.find((m: any) => m.id === 'sift/gliner2-mini-v1');
  if (!mini.available)
    throw new Error(
      'sift/gliner2-mini-v1 is not in the model store: run `node scripts/setup.mjs` (npm test does) first',
    );
  expect((await stack.uploadDataset('people', jsonl(nerRows))).status).toBe('ready');
  expect((await stack.uploadDataset('sentiment', jsonl(clsRows))).status).toBe('ready');
  expect((await stack.uploadDataset('chat', jsonl(chatRows))).status).toBe('ready');
});
afterAll(async () => stack.stop());

describe('encoder training', () => {
  let fullJobId: string;

  it('trains a full fine-tune to complete with metrics, checkpoints, logs and an archive', async () => {
    const created = await stack.call('POST', '/core/training-jobs', {
      body: {
        model_name: 'people-full',
        base_model: 'sift/gliner2-mini-v1',
        datasets: [{ name: 'people' }],
        training_type: 'full',
        nr_epochs: 2,
      },
    });
    expect(created.status).toBe(201);
    fullJobId = created.body.id;
    const job = await waitForJob(fullJobId);
    expect(job.error).toBeNull();
    expect(job.status).toBe('complete');
    for (const k of ['f1', 'precision', 'recall']) {
      expect(job.metrics[k]).toBeGreaterThanOrEqual(0);
      expect(job.metrics[k]).toBeLessThanOrEqual(1);
    }
    expect(job.progress.total_steps).toBeGreaterThan(0);
    expect(job.started_at <= job.finished_at).toBe(true);

    const ckpts = (await stack.call('GET', `/core/training-jobs/${fullJobId}/checkpoints`)).body.checkpoints;
    expect(ckpts.length).toBeGreaterThanOrEqual(1);
    expect(ckpts.filter((c: any) => c.is_final)).toHaveLength(1);
    expect(ckpts.every((c: any) => /^[0-9a-f-]{36}$/.test(c.id))).toBe(true);

    const logs = (await stack.call('GET', `/core/training-jobs/${fullJobId}/logs?limit=5000`)).body;
    expect(logs.complete).toBe(true);
    expect(
      logs.lines.some((l: any) => l.line.includes('"event": "completed"') || l.line.includes('"event":"completed"')),
    ).toBe(true);

    const link = await stack.call('GET', `/core/training-jobs/${fullJobId}/download`, {
      headers: { accept: 'application/json' },
    });
    expect(link.status).toBe(200);
    const archive = Buffer.from(await (await fetch(link.body.url)).arrayBuffer());
    expect(archive.length).toBe(link.body.size_bytes);
    const dir = await mkdtemp(join(tmpdir(), 'sift-archive-'));
    await writeFile(join(dir, 'm.tar.gz'), archive);
    const entries: string[] = [];
    await listTar({ file: join(dir, 'm.tar.gz'), onReadEntry: (e) => entries.push(e.path) });
    await rm(dir, { recursive: true, force: true });
    for (const f of ['model.safetensors', 'tokenizer.json', 'manifest.json', 'onnx/encoder.onnx', 'metrics.json']) {
      expect(entries.some((e) => e.replace(/^\.\//, '') === f)).toBe(true);
    }
    const redirect = await fetch(`${stack.url}/core/training-jobs/${fullJobId}/download`, {
      headers: { 'x-api-key': (await import('../helpers/localStack')).OPERATOR_KEY },
      redirect: 'manual',
    });
    expect(redirect.status).toBe(302);
  });

  it('trains LoRA, continuing from the full job’s final checkpoint', async () => {
    const ckpts = (await stack.call('GET', `/core/training-jobs/${fullJobId}/checkpoints`)).body.checkpoints;
    const final = ckpts.find((c: any) => c.is_final);
    const created = await stack.call('POST', '/core/training-jobs', {
      body: {
        model_name: 'sentiment-lora',
        base_model: final.id,
        datasets: [{ name: 'sentiment' }],
        training_type: 'lora',
        nr_epochs: 1,
      },
    });
    expect(created.status).toBe(201);
    const job = await waitForJob(created.body.id);
    expect(job.error).toBeNull();
    expect(job.status).toBe('complete');
    expect(job.root_model).toBe('sift/gliner2-mini-v1');
    expect(job.task_types).toEqual(['classification']);
  });

  it('streams logs over SSE until the job ends', async () => {
    const created = await stack.call('POST', '/core/training-jobs', {
      body: { model_name: 'sse', base_model: 'sift/gliner2-mini-v1', datasets: [{ name: 'sentiment' }], nr_epochs: 1 },
    });
    const res = await fetch(`${stack.url}/core/training-jobs/${created.body.id}/logs`, {
      headers: { 'x-api-key': (await import('../helpers/localStack')).OPERATOR_KEY, accept: 'text/event-stream' },
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const text = await res.text(); // the stream ends by itself after `event: end`
    const events = text.split('\n\n').filter((b) => b.startsWith('event:'));
    expect(events.some((e) => e.startsWith('event: log'))).toBe(true);
    const end = events[events.length - 1] as string;
    expect(end.startsWith('event: end')).toBe(true);
    expect(JSON.parse(end.split('data: ')[1] as string).status).toBe('complete');
    const offsets = events
      .filter((e) => e.startsWith('event: log'))
      .map((e) => JSON.parse(e.split('data: ')[1] as string).offset);
    expect(offsets).toEqual(offsets.map((_: number, i: number) => i));
  });

  it('stops a running job: it ends stopped, and the trainer saves a checkpoint first', async () => {
    const created = await stack.call('POST', '/core/training-jobs', {
      body: {
        model_name: 'to-stop',
        base_model: 'sift/gliner2-mini-v1',
        datasets: [{ name: 'people' }],
        training_type: 'full',
        nr_epochs: 50,
      },
    });
    await waitForJob(created.body.id, (j) => j.status === 'running' && (j.progress?.step ?? 0) >= 1);
    const stopped = await stack.call('POST', `/core/training-jobs/${created.body.id}/stop`);
    expect(stopped.status).toBe(200);
    expect(stopped.body.status).toBe('stopped');
    await stack.service.idle();
    const job = (await stack.call('GET', `/core/training-jobs/${created.body.id}`)).body;
    expect(job.status).toBe('stopped');
    const ckpts = (await stack.call('GET', `/core/training-jobs/${created.body.id}/checkpoints`)).body.checkpoints;
    expect(ckpts.length).toBeGreaterThanOrEqual(1);
    expect((await stack.call('GET', `/core/training-jobs/${created.body.id}/download`)).status).toBe(409);
  });

  it('fails a job whose trainer raises, with the failure file’s reason and the logs kept', async () => {
    // Break the runner's cached copy of the base model: the real trainer then fails to load it.
    const cached = join(stack.dataDir, 'work', 'cache', 'models', 'sift', 'gliner2-mini-v1', 'config.json');
    const original = await readFile(cached, 'utf8');
    await writeFile(cached, '{ this is not json');
    try {
      const created = await stack.call('POST', '/core/training-jobs', {
        body: {
          model_name: 'doomed',
          base_model: 'sift/gliner2-mini-v1',
          datasets: [{ name: 'people' }],
          nr_epochs: 1,
        },
      });
      const job = await waitForJob(created.body.id);
      expect(job.status).toBe('failed');
      expect(job.error).toMatch(/config|json|JSON|Expecting/);
      const logs = (await stack.call('GET', `/core/training-jobs/${created.body.id}/logs?limit=5000`)).body;
      expect(logs.lines.length).toBeGreaterThan(0);
    } finally {
      await writeFile(cached, original);
    }
  });
});

describe('the OpenAI fine-tuning API, through the unchanged openai SDKs (#31)', () => {
  let sftJob: OpenAI.FineTuning.FineTuningJob | undefined;
  /** A file's status once its processing ended (as a script polls files.retrieve), within a minute. */
  const processed = async (openai: OpenAI, id: string) => {
    let status = (await openai.files.retrieve(id)).status;
    for (let i = 0; status !== 'processed' && status !== 'error' && i < 120; i++) {
      await new Promise((r) => setTimeout(r, 500));
      status = (await openai.files.retrieve(id)).status;
    }
    return status;
  };

  it('uploads a chat file, trains it to succeeded, and answers chat as the ft: model', async () => {
    const openai = new OpenAI({ baseURL: `${stack.url}/v1`, apiKey: OPERATOR_KEY, maxRetries: 0 });
    const team = (await stack.call('GET', '/billing/usage/requests')).body.team_id as string;
    const file = await openai.files.create({
      file: await toFile(Buffer.from(jsonl(chatRows)), 'sums.jsonl'),
      purpose: 'fine-tune',
    });
    expect(await processed(openai, file.id)).toBe('processed');
    // a validation file of its own: the trainer validates on it instead of holding out 10% of the training file
    const validationFile = await openai.files.create({
      file: await toFile(Buffer.from(jsonl(chatRows.slice(0, 3))), 'sums-validation.jsonl'),
      purpose: 'fine-tune',
    });
    expect(await processed(openai, validationFile.id)).toBe('processed');

    const created = await openai.fineTuning.jobs.create({
      model: 'HuggingFaceTB/SmolLM2-135M-Instruct',
      training_file: file.id,
      validation_file: validationFile.id,
      suffix: 'sums',
      method: { type: 'supervised', supervised: { hyperparameters: { n_epochs: 1 } } },
    });
    let job = created;
    while (!['succeeded', 'failed', 'cancelled'].includes(job.status)) {
      await new Promise((r) => setTimeout(r, 1000));
      job = await openai.fineTuning.jobs.retrieve(created.id);
    }
    expect(job.error).toBeNull();
    expect(job.status).toBe('succeeded');
    expect(job.fine_tuned_model).toBe(`ft:HuggingFaceTB/SmolLM2-135M-Instruct:${team}:sums:${created.id}`);
    // the chat rows' tokens, one epoch (each row is a templated exchange of a few dozen tokens)
    expect(Number.isInteger(job.trained_tokens) && (job.trained_tokens as number) > chatRows.length * 10).toBe(true);
    const events = [];
    for await (const e of openai.fineTuning.jobs.listEvents(created.id, { limit: 50 })) events.push(e);
    expect(events.length).toBeGreaterThan(0);
    const checkpoints = await openai.fineTuning.jobs.checkpoints.list(created.id);
    expect(checkpoints.data.length).toBeGreaterThan(0);

    // deployed as it succeeded: the name answers chat (OpenAI's fine-tuned models need no deploy step)
    const chat = await openai.chat.completions.create({
      model: job.fine_tuned_model!,
      max_tokens: 8,
      temperature: 0,
      messages: [{ role: 'user', content: 'What is 3 plus 3?' }],
    });
    expect(chat.model).toBe(job.fine_tuned_model);
    expect(chat.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect(chat.usage?.completion_tokens).toBeGreaterThan(0);
    // the native record is the same job: a LoRA SFT job of SmolLM2-135M-Instruct, trained on CPU
    const nativeId = created.id.replace(/^ftjob-/, '');
    const native = (await stack.call('GET', `/core/training-jobs/${nativeId}`)).body;
    expect(native).toMatchObject({
      status: 'complete',
      training_algorithm: 'sft',
      training_type: 'lora',
      suffix: 'sums',
    });
    const ckpts = (await stack.call('GET', `/core/training-jobs/${nativeId}/checkpoints`)).body.checkpoints;
    const final = ckpts.filter((c: any) => c.is_final);
    expect(final).toHaveLength(1);
    // the stored copy of the final checkpoint says so too (the trainer wrote it before announcing the checkpoint)
    const finalCkpt = await getCheckpoint(stack.svc, team, final[0].id);
    const meta = JSON.parse(await stack.svc.blobs.getText(`${finalCkpt.blob_prefix}sift_checkpoint.json`));
    expect(meta).toMatchObject({ id: final[0].id, is_final: true, family: 'decoder' });
    // the trainer read the validation channel: every training row trained, the validation file's 3 validated
    const manifest = JSON.parse(await stack.svc.blobs.getText(`${modelPrefix(team, nativeId)}manifest.json`));
    expect(manifest).toMatchObject({ train_rows: chatRows.length, validation_rows: 3 });
    expect(job.validation_file).toBe(validationFile.id);
    // its deployment is an ordinary one: the native job id answers too, through its LoRA on llama.cpp,
    // and both calls are stored against the job
    const byJobId = await stack.call('POST', '/v1/chat/completions', {
      body: {
        model: nativeId,
        max_tokens: 8,
        temperature: 0,
        messages: [{ role: 'user', content: 'What is 3 plus 3?' }],
      },
    });
    expect(byJobId.status).toBe(200);
    expect(byJobId.body.model).toBe(nativeId);
    expect(byJobId.body.choices[0].message.content).toBe(chat.choices[0]?.message.content);
    expect((await stack.call('GET', `/inferences?training_job_id=${nativeId}`)).body.data).toHaveLength(2);
    expect((await openai.models.list()).data.map((m) => m.id)).toContain(job.fine_tuned_model);
    sftJob = job;
  });

  it('the Python openai SDK reads the same job, chats as its ft: model and gets OpenAI errors', async () => {
    if (!sftJob) throw new Error('needs the job the test above trains');
    const stdout = await runPythonClientCheck('openai_fine_tuning_check.py', [
      'follow',
      `${stack.url}/v1`,
      OPERATOR_KEY,
      sftJob.id,
    ]);
    const run = JSON.parse(stdout.trim());
    expect(run).toMatchObject({
      status: 'succeeded',
      fine_tuned_model: sftJob.fine_tuned_model,
      trained_tokens: sftJob.trained_tokens,
      training_file: { status: 'processed', purpose: 'fine-tune', lines: chatRows.length },
      in_models: true,
      chat: { model: sftJob.fine_tuned_model },
    });
    // one job per page, followed by the SDK's cursor: every job of the team, this one among them
    expect(run.listed).toContain(sftJob.id);
    expect(new Set(run.listed).size).toBe(run.listed.length);
    expect(run.events.length).toBeGreaterThan(0);
    expect(run.checkpoints.length).toBeGreaterThan(0);
    expect(run.chat.content.length).toBeGreaterThan(0);
    expect(run.chat.completion_tokens).toBeGreaterThan(0);
    expect(run.errors).toEqual({
      unknown_job: { error: 'NotFoundError', status: 404, param: 'fine_tuning_job_id', code: 'not_found' },
      cancel_ended: expect.objectContaining({ error: 'ConflictError', status: 409 }),
      unknown_model: { error: 'BadRequestError', status: 400, param: 'model', code: 'model_not_available' },
      validation_file: { error: 'NotFoundError', status: 404, param: 'validation_file', code: 'file_not_found' },
      unknown_file: { error: 'NotFoundError', status: 404, param: 'training_file', code: 'file_not_found' },
      bad_key: expect.objectContaining({ error: 'AuthenticationError', status: 401 }),
    });
  });
});

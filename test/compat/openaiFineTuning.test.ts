/**
 * OpenAI's Files and Fine-tuning APIs through the official Node SDK, unchanged (issue #31): no job
 * trains here (the stack runs none: jobs stay queued); what training writes (log lines, checkpoint
 * records) is put in place directly where a test reads it.
 */
import OpenAI6 from 'openai6';
import OpenAI7, { toFile } from 'openai7';
import { resolveServingTarget } from '../../src/core/deployments';
import { datasetVersionItem, jobCheckpointsPrefix, teamPartition } from '../../src/core/recordKeys';
import type { Logger } from '../../src/core/logger';
import { logChunkKey, modelPrefix } from '../../src/core/training/artifacts';
import { completeTraining } from '../../src/core/training/lifecycle';
import { getTrainingJob, transitionJob } from '../../src/core/trainingJobs';
import { OPERATOR_KEY, TestStack, jsonl } from '../helpers/localStack';
import { MODEL } from './helpers';

let stack: TestStack;
let team: string;
beforeAll(async () => {
  stack = await TestStack.start();
  team = (await stack.call('GET', '/billing/usage/requests')).body.team_id as string;
});
afterAll(async () => stack.stop());

const client = (key = OPERATOR_KEY, SDK: typeof OpenAI7 = OpenAI7) =>
  new SDK({ baseURL: `${stack.url}/v1`, apiKey: key, maxRetries: 0 });

const chatRows = jsonl([
  {
    messages: [
      { role: 'system', content: 'Answer briefly.' },
      { role: 'user', content: 'Capital of France?' },
      { role: 'assistant', content: 'Paris.' },
    ],
  },
  {
    messages: [
      { role: 'user', content: 'Capital of Italy?' },
      { role: 'assistant', content: 'Rome.' },
    ],
  },
]);
const preferenceRows = jsonl([
  {
    input: { messages: [{ role: 'user', content: 'Greet me.' }] },
    preferred_output: [{ role: 'assistant', content: 'Hello!' }],
    non_preferred_output: [{ role: 'assistant', content: 'No.' }],
  },
]);

/** Uploads through the SDK and waits until the local worker has processed the file. */
async function upload(content: string, name = 'train.jsonl', key = OPERATOR_KEY, SDK: typeof OpenAI7 = OpenAI7) {
  const created = await client(key, SDK).files.create({
    file: await toFile(Buffer.from(content), name),
    purpose: 'fine-tune',
  });
  await stack.service.idle();
  return { created, file: await client(key, SDK).files.retrieve(created.id) };
}

/** The error an SDK call throws, for its status and OpenAI error fields. */
async function failure(call: Promise<unknown>) {
  const err: unknown = await call.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof OpenAI7.APIError || err instanceof OpenAI6.APIError))
    throw new Error(`expected an API error, got ${String(err)}`);
  return { status: err.status, param: err.param, code: err.code, type: err.type, message: err.message };
}

describe('/v1/files', () => {
  it.each([
    ['openai 6.x', OpenAI6 as unknown as typeof OpenAI7],
    ['openai 7.x', OpenAI7],
  ])('%s: a chat file uploads, is processed as a dataset version, lists, reads back and deletes', async (_n, SDK) => {
    const { created, file } = await upload(chatRows, 'train.jsonl', OPERATOR_KEY, SDK);
    expect(created).toMatchObject({
      object: 'file',
      purpose: 'fine-tune',
      filename: 'train.jsonl',
      status: 'uploaded',
    });
    expect(created.id).toMatch(/^file-[0-9a-f]{32}$/);
    expect(file).toMatchObject({ id: created.id, status: 'processed', bytes: Buffer.byteLength(chatRows) });
    // the same thing natively: a dataset named by the file id
    expect((await stack.call('GET', `/core/datasets/${created.id}/1`)).body).toMatchObject({
      status: 'ready',
      task_types: ['sft'],
      row_count: 2,
    });
    const ids = [];
    for await (const f of client(OPERATOR_KEY, SDK).files.list()) ids.push(f.id);
    expect(ids).toContain(created.id);
    expect(await (await client(OPERATOR_KEY, SDK).files.content(created.id)).text()).toBe(chatRows);
    expect(await client(OPERATOR_KEY, SDK).files.delete(created.id)).toEqual({
      id: created.id,
      object: 'file',
      deleted: true,
    });
    expect(await failure(client(OPERATOR_KEY, SDK).files.retrieve(created.id))).toMatchObject({
      status: 404,
      code: 'file_not_found',
    });
    expect((await stack.call('GET', `/core/datasets/${created.id}`)).status).toBe(404);
  });

  it('a preference file is processed as dpo rows; a bad file ends in error naming the row and field', async () => {
    const { file } = await upload(preferenceRows, 'prefs.jsonl');
    expect(file.status).toBe('processed');
    expect((await stack.call('GET', `/core/datasets/${file.id}/1`)).body.task_types).toEqual(['dpo']);
    const bad = await upload(jsonl([{ messages: [{ role: 'user', content: 'no answer' }] }]), 'bad.jsonl');
    expect(bad.file.status).toBe('error');
    expect(bad.file.status_details).toMatch(/row 1 messages needs at least one assistant message/);
  });

  it('pages newest first with after/limit and has_more', async () => {
    const other = await stack.newTeam('pager');
    const a = (await upload(chatRows, 'a.jsonl', other.key)).file.id;
    const b = (await upload(chatRows, 'b.jsonl', other.key)).file.id;
    const first = await client(other.key).files.list({ limit: 1 });
    expect(first.data.map((f) => f.id)).toEqual([b]);
    expect(first.has_more).toBe(true);
    const second = await client(other.key).files.list({ limit: 1, after: b });
    expect(second.data.map((f) => f.id)).toEqual([a]);
    expect(second.has_more).toBe(false);
    expect((await client(other.key).files.list({ order: 'asc' })).data.map((f) => f.id)).toEqual([a, b]);
    // an unknown cursor is an empty last page, never the first page again
    expect(await client(other.key).files.list({ after: 'file-nope' })).toMatchObject({ data: [], has_more: false });
    const all = [];
    for await (const f of client(other.key).files.list({ limit: 1 })) all.push(f.id);
    expect(all).toHaveLength(2);
  });

  it('refuses other purposes, other file types, non-multipart bodies and unknown ids, as OpenAI errors', async () => {
    const c = client();
    const file = await toFile(Buffer.from(chatRows), 'train.jsonl');
    expect(await failure(c.files.create({ file, purpose: 'assistants' }))).toMatchObject({
      status: 400,
      param: 'purpose',
      type: 'invalid_request_error',
    });
    expect(
      await failure(c.files.create({ file: await toFile(Buffer.from(chatRows), 'train.csv'), purpose: 'fine-tune' })),
    ).toMatchObject({ status: 400, param: 'file' });
    const json = await stack.call('POST', '/v1/files', { body: { purpose: 'fine-tune' } });
    expect(json.status).toBe(415);
    expect(json.body.error).toMatchObject({
      type: 'invalid_request_error',
      message: expect.stringMatching(/multipart/),
    });
    const garbage = await stack.call('POST', '/v1/files', {
      rawBody: 'not multipart',
      headers: { 'content-type': 'multipart/form-data; boundary=x' },
    });
    expect(garbage.status).toBe(400);
    expect(garbage.body.error.param).toBeNull();
    for (const id of ['file-0123456789abcdef0123456789abcdef', 'train.jsonl']) {
      expect(await failure(c.files.retrieve(id))).toMatchObject({
        status: 404,
        param: 'file_id',
        code: 'file_not_found',
      });
      expect(await failure(c.files.delete(id))).toMatchObject({ status: 404 });
    }
  });

  it("keeps teams apart: another team's file is not found", async () => {
    const { file } = await upload(chatRows);
    const other = await stack.newTeam('outsider');
    expect(await failure(client(other.key).files.retrieve(file.id))).toMatchObject({ status: 404 });
    expect(await failure(client(other.key).files.content(file.id))).toMatchObject({ status: 404 });
    expect(await failure(client(other.key).files.delete(file.id))).toMatchObject({ status: 404 });
    expect((await client(other.key).files.list()).data.map((f) => f.id)).not.toContain(file.id);
    expect((await client().files.retrieve(file.id)).status).toBe('processed');
  });
});

describe('/v1/fine_tuning/jobs', () => {
  let chatFile: string;
  let prefFile: string;
  beforeAll(async () => {
    chatFile = (await upload(chatRows)).file.id;
    prefFile = (await upload(preferenceRows, 'prefs.jsonl')).file.id;
  });

  it('creates a supervised job that is a native job too, with the hyperparameters mapped', async () => {
    const job = await client().fineTuning.jobs.create({
      model: MODEL,
      training_file: chatFile,
      suffix: 'capitals',
      seed: 7,
      method: { type: 'supervised', supervised: { hyperparameters: { n_epochs: 3, learning_rate_multiplier: 2 } } },
    });
    expect(job).toMatchObject({
      object: 'fine_tuning.job',
      status: 'queued',
      model: MODEL,
      training_file: chatFile,
      validation_file: null,
      fine_tuned_model: null,
      organization_id: team,
      seed: 7,
      user_provided_suffix: 'capitals',
      hyperparameters: { n_epochs: 3, learning_rate_multiplier: 2, batch_size: 'auto' },
      method: { type: 'supervised' },
    });
    const uuid = job.id.replace(/^ftjob-/, '');
    const native = (await stack.call('GET', `/core/training-jobs/${uuid}`)).body;
    const plain = await client().fineTuning.jobs.create({ model: MODEL, training_file: chatFile });
    const plainNative = (await stack.call('GET', `/core/training-jobs/${plain.id.replace(/^ftjob-/, '')}`)).body;
    expect(native).toMatchObject({
      status: 'requested',
      base_model: MODEL,
      training_algorithm: 'sft',
      nr_epochs: 3,
      seed: 7,
      suffix: 'capitals',
      datasets: [{ name: chatFile, version: 1 }],
    });
    expect(native.learning_rate).toBeCloseTo(2 * plainNative.learning_rate, 12);
    expect(plain).toMatchObject({
      seed: 42,
      user_provided_suffix: null,
      hyperparameters: { learning_rate_multiplier: 'auto' },
    });
    expect((await client().fineTuning.jobs.retrieve(job.id)).id).toBe(job.id);
    expect(native).not.toHaveProperty('validation_datasets');

    // a validation file: the trainer validates on it instead of holding out part of the training file
    const validated = await client().fineTuning.jobs.create({
      model: MODEL,
      training_file: chatFile,
      validation_file: chatFile,
    });
    expect(validated.validation_file).toBe(chatFile);
    const record = await getTrainingJob(stack.svc, team, validated.id.replace(/^ftjob-/, ''));
    expect(record.validation_datasets).toEqual([{ name: chatFile, version: 1 }]);
  });

  it('creates a dpo job from a preference file (beta to rl_config.beta, "auto" = 0.1); legacy hyperparameters are supervised', async () => {
    const job = await client().fineTuning.jobs.create({
      model: MODEL,
      training_file: prefFile,
      method: { type: 'dpo', dpo: { hyperparameters: { beta: 0.3 } } },
    });
    expect(job.method).toMatchObject({ type: 'dpo', dpo: { hyperparameters: { beta: 0.3 } } });
    const native = (await stack.call('GET', `/core/training-jobs/${job.id.replace(/^ftjob-/, '')}`)).body;
    expect(native).toMatchObject({ training_algorithm: 'dpo', rl_config: { beta: 0.3 } });
    const auto = await client().fineTuning.jobs.create({
      model: MODEL,
      training_file: prefFile,
      method: { type: 'dpo' },
    });
    expect(auto.hyperparameters).toMatchObject({ beta: 0.1 });
    const legacy = await client().fineTuning.jobs.create({
      model: MODEL,
      training_file: chatFile,
      hyperparameters: { n_epochs: 2 },
    });
    expect(legacy).toMatchObject({ method: { type: 'supervised' }, hyperparameters: { n_epochs: 2 } });
  });

  it('lists decoder jobs newest first with cursor pages, native ones included; an encoder job is not one', async () => {
    const other = await stack.newTeam('lister');
    const file = (await upload(chatRows, 'train.jsonl', other.key)).file.id;
    const first = await client(other.key).fineTuning.jobs.create({ model: MODEL, training_file: file });
    const native = await stack.call('POST', '/core/training-jobs', {
      key: other.key,
      body: { model_name: 'native', base_model: MODEL, datasets: [{ name: file }] },
    });
    expect(native.status).toBe(201);
    const page = await client(other.key).fineTuning.jobs.list({ limit: 1 });
    expect(page.data.map((j) => j.id)).toEqual([`ftjob-${native.body.id}`]);
    expect((page.data[0] as unknown as { user_provided_suffix: unknown }).user_provided_suffix).toBeNull();
    expect(page.has_more).toBe(true);
    const next = await client(other.key).fineTuning.jobs.list({ limit: 1, after: page.data[0]!.id });
    expect(next.data.map((j) => j.id)).toEqual([first.id]);
    expect(next.has_more).toBe(false);
    await stack.uploadDataset('ner', jsonl([{ text: 'Tim Cook leads Apple.', entities: [['Apple', 'company']] }]), {
      key: other.key,
    });
    const encoder = await stack.call('POST', '/core/training-jobs', {
      key: other.key,
      body: {
        model_name: 'enc',
        base_model: 'sift/gliner2-mini-v1',
        datasets: [{ name: 'ner' }],
        training_type: 'full',
      },
    });
    expect(encoder.status).toBe(201);
    expect((await client(other.key).fineTuning.jobs.list()).data).toHaveLength(2);
    expect(await failure(client(other.key).fineTuning.jobs.retrieve(`ftjob-${encoder.body.id}`))).toMatchObject({
      status: 404,
    });
  });

  it("cancels (the native stop), reads the job's log as events and its checkpoints", async () => {
    const job = await client().fineTuning.jobs.create({ model: MODEL, training_file: chatFile, suffix: 'ev' });
    const uuid = job.id.replace(/^ftjob-/, '');
    expect(await client().fineTuning.jobs.listEvents(job.id)).toMatchObject({ data: [], has_more: false });
    const lines = ['starting', 'step 1 loss 2.5', 'done'].map((line, offset) =>
      JSON.stringify({
        offset,
        ts: `2026-01-01T00:00:0${offset}.000Z`,
        stream: offset === 1 ? 'stderr' : 'stdout',
        line,
      }),
    );
    await stack.svc.blobs.put(logChunkKey(team, uuid, 0), `${lines.join('\n')}\n`);
    const events = await client().fineTuning.jobs.listEvents(job.id, { limit: 2 });
    expect(events.data).toEqual([
      {
        id: 'ftevent-2',
        object: 'fine_tuning.job.event',
        created_at: 1767225602,
        level: 'info',
        message: 'done',
        type: 'message',
      },
      expect.objectContaining({ id: 'ftevent-1', level: 'warn', message: 'step 1 loss 2.5' }),
    ]);
    expect(events.has_more).toBe(true);
    const older = await client().fineTuning.jobs.listEvents(job.id, { after: 'ftevent-1' });
    expect(older.data.map((e) => e.message)).toEqual(['starting']);

    const ckpt = 'aaaaaaaa-bbbb-4ccc-8ddd-000000000001';
    await stack.svc.records.put(
      { pk: teamPartition(team), sk: `${jobCheckpointsPrefix(uuid)}${ckpt}` },
      {
        id: ckpt,
        job_id: uuid,
        root_model: MODEL,
        blob_prefix: 'x/',
        step: 4,
        epoch: 1,
        metrics: { loss: 1.25 },
        is_best: true,
        is_final: true,
        created_at: '2026-01-01T00:00:10.000Z',
      },
    );
    const checkpoints = await client().fineTuning.jobs.checkpoints.list(job.id);
    expect(checkpoints.data).toEqual([
      {
        id: `ftckpt-${ckpt}`,
        object: 'fine_tuning.job.checkpoint',
        created_at: 1767225610,
        fine_tuned_model_checkpoint: `ft:${MODEL}:${team}:ev:${job.id}:ckpt-step-4`,
        fine_tuning_job_id: job.id,
        step_number: 4,
        metrics: { loss: 1.25, step: 4 },
      },
    ]);

    const cancelled = await client().fineTuning.jobs.cancel(job.id);
    expect(cancelled.status).toBe('cancelled');
    expect((await stack.call('GET', `/core/training-jobs/${uuid}`)).body.status).toBe('stopped');
    expect(await failure(client().fineTuning.jobs.cancel(job.id))).toMatchObject({ status: 409 });
  });

  it('names the fine-tuned model ft:<base>:<team id>:<suffix>:<job id> and deploys it once the job succeeded', async () => {
    const job = await client().fineTuning.jobs.create({ model: MODEL, training_file: chatFile, suffix: 'done' });
    const uuid = job.id.replace(/^ftjob-/, '');
    await transitionJob(stack.svc, team, uuid, 'running');
    expect((await client().fineTuning.jobs.retrieve(job.id)).status).toBe('running');
    const logger = { info: () => undefined, warn: () => undefined, error: () => undefined } as unknown as Logger;
    // what the runner's publishing leaves: the job's model with its LoRA adapter
    const publishModel = () =>
      stack.svc.blobs.put(
        `${modelPrefix(team, uuid)}manifest.json`,
        JSON.stringify({ files: { adapter: 'adapter/' } }),
      );
    expect(await completeTraining(stack.svc, team, uuid, { publishModel, report: { logger } })).toEqual({
      status: 'complete',
    });
    expect(await client().fineTuning.jobs.retrieve(job.id)).toMatchObject({
      status: 'succeeded',
      fine_tuned_model: `ft:${MODEL}:${team}:done:${job.id}`,
      finished_at: expect.any(Number),
    });
    expect((await stack.call('GET', `/core/training-jobs/${uuid}`)).body.deployment).toMatchObject({
      status: 'active',
    });
    // the ft: name is a model id of its own, resolving to the job's deployment, for this team only
    const name = `ft:${MODEL}:${team}:done:${job.id}`;
    expect(await resolveServingTarget(stack.svc, team, name)).toMatchObject({ kind: 'deployment', job: { id: uuid } });
    const outsider = await stack.newTeam('ft-outsider');
    // GET /v1/models lists it, and retrieves it, for a caller of this team only (without a key: the catalog)
    expect((await client().models.list()).data.find((m) => m.id === name)).toMatchObject({ owned_by: team });
    expect(await client().models.retrieve(name)).toMatchObject({ id: name, owned_by: team });
    expect((await client(outsider.key).models.list()).data.map((m) => m.id)).not.toContain(name);
    await expect(client(outsider.key).models.retrieve(name)).rejects.toMatchObject({ status: 404 });
    const anonymous = (await stack.call('GET', '/v1/models', { key: null })).body;
    expect(anonymous.data.map((m: { id: string }) => m.id)).not.toContain(name);
    for (const [t, m] of [
      [outsider.teamId, name],
      [outsider.teamId, `ft:${MODEL}:${outsider.teamId}:done:${job.id}`],
      [team, `ft:${MODEL}:${team}:other:${job.id}`],
      [team, `ft:${MODEL}:${team}:done:ftjob-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee`],
    ] as const)
      await expect(resolveServingTarget(stack.svc, t, m)).rejects.toMatchObject({ status: 404 });
    // a native job is deployed only when asked (SPEC)
    const native = await stack.call('POST', '/core/training-jobs', {
      body: { model_name: 'native-done', base_model: MODEL, datasets: [{ name: chatFile }] },
    });
    const publishNative = () =>
      stack.svc.blobs.put(
        `${modelPrefix(team, native.body.id)}manifest.json`,
        JSON.stringify({ files: { adapter: 'adapter/' } }),
      );
    await completeTraining(stack.svc, team, native.body.id, { publishModel: publishNative, report: { logger } });
    expect((await stack.call('GET', `/core/training-jobs/${native.body.id}`)).body).toMatchObject({
      status: 'complete',
      deployment: null,
    });
  });

  it('refuses what it cannot honour, naming the OpenAI field', async () => {
    // a team of its own: each refusal counts against the 20 creates a minute
    const own = await stack.newTeam('refused');
    const c = client(own.key);
    const chatFile = (await upload(chatRows, 'train.jsonl', own.key)).file.id;
    const prefFile = (await upload(preferenceRows, 'prefs.jsonl', own.key)).file.id;
    const base = { model: MODEL, training_file: chatFile };
    const cases: [Record<string, unknown>, number, string][] = [
      [{ ...base, model: 'sift/gliner2-mini-v1' }, 400, 'model'],
      [{ ...base, model: 'gpt-4o-mini' }, 400, 'model'],
      [{ ...base, training_file: 'file-0123456789abcdef0123456789abcdef' }, 404, 'training_file'],
      [{ ...base, method: { type: 'dpo' } }, 400, 'training_file'],
      [{ ...base, training_file: prefFile }, 400, 'training_file'],
      [{ ...base, validation_file: prefFile }, 400, 'validation_file'],
      [{ ...base, validation_file: 'file-0123456789abcdef0123456789abcdef' }, 404, 'validation_file'],
      [{ ...base, method: { type: 'reinforcement' } }, 400, 'method.type'],
      [{ ...base, hyperparameters: { batch_size: 8 } }, 400, 'hyperparameters.batch_size'],
      [
        { ...base, method: { type: 'supervised', supervised: { hyperparameters: { batch_size: 4 } } } },
        400,
        'method.supervised.hyperparameters.batch_size',
      ],
      [
        { ...base, training_file: prefFile, method: { type: 'dpo' }, hyperparameters: { n_epochs: 1 } },
        400,
        'hyperparameters',
      ],
      [{ ...base, integrations: [{ type: 'wandb', wandb: { project: 'x' } }] }, 400, 'integrations'],
      [{ ...base, hyperparameters: { n_epochs: 0 } }, 400, 'hyperparameters.n_epochs'],
      [{ ...base, suffix: 'a:b' }, 400, 'suffix'],
    ];
    for (const [body, status, param] of cases) {
      expect({ body, error: await failure(c.fineTuning.jobs.create(body as never)) }).toMatchObject({
        body,
        error: { status, param, type: status === 404 ? 'invalid_request_error' : 'invalid_request_error' },
      });
    }
    // a file still being processed
    const pending = (await upload(chatRows, 'train.jsonl', own.key)).file.id;
    const item = datasetVersionItem(own.teamId, pending, 1);
    await stack.svc.records.update(item.pk, item.sk, { set: { status: 'processing' } });
    expect(await failure(c.fineTuning.jobs.create({ ...base, training_file: pending }))).toMatchObject({
      status: 400,
      param: 'training_file',
      code: 'invalid_file_status',
    });
    expect(await failure(c.fineTuning.jobs.retrieve('ftjob-nope'))).toMatchObject({ status: 404 });
    expect(await failure(c.fineTuning.jobs.retrieve('ftjob-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee'))).toMatchObject({
      status: 404,
    });
  });

  it("keeps teams apart and shares POST /core/training-jobs' 20/min limit", async () => {
    const other = await stack.newTeam('limited');
    const job = await client().fineTuning.jobs.create({ model: MODEL, training_file: chatFile });
    expect(await failure(client(other.key).fineTuning.jobs.retrieve(job.id))).toMatchObject({ status: 404 });
    expect(await failure(client(other.key).fineTuning.jobs.cancel(job.id))).toMatchObject({ status: 404 });
    expect(
      await failure(client(other.key).fineTuning.jobs.create({ model: MODEL, training_file: chatFile })),
    ).toMatchObject({
      status: 404,
      param: 'training_file',
    });
    // 19 more native creates (invalid ones count too) use up the minute's 20
    for (let i = 0; i < 19; i++) {
      const res = await stack.call('POST', '/core/training-jobs', { key: other.key, body: {} });
      expect(res.status).toBe(422);
    }
    const limited = await failure(client(other.key).fineTuning.jobs.create({ model: MODEL, training_file: chatFile }));
    expect(limited).toMatchObject({ status: 429, type: 'rate_limit_error' });
  });
});

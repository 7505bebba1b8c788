/**
 * DPO and GRPO through the public API of the local service, end to end: the Python trainer (TRL +
 * PEFT, LoRA) on SmolLM2-135M-Instruct, on small data this test writes. Each job must show that it
 * learns in the per-step `signal` events of its own logs (DPO: the chosen-vs-rejected reward margin;
 * GRPO: the mean exact-match reward), complete without warnings, deploy and serve a chat completion
 * through the official `openai` SDK. The DPO job is a #31 client run too: the Python `openai` SDK uploads
 * the rows as an OpenAI preference file, creates the job through /v1/fine_tuning/jobs, cancels a second
 * one, follows the events and chats as the `ft:` model (test/clients/openai_fine_tuning_check.py), so one
 * job checks both. Nothing here is simulated.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { jest } from '@jest/globals';
import OpenAI from 'openai7';
import { runPythonClientCheck } from '../clients/pythonClient';
import { OPERATOR_KEY, TestStack, jsonl } from '../helpers/localStack';

jest.setTimeout(15 * 60_000);

const BASE = 'HuggingFaceTB/SmolLM2-135M-Instruct';
const TERMINAL = ['complete', 'failed', 'stopped'];
let stack: TestStack;

// DPO: a polite greeting is preferred over a rude one.
const NAMES = ['Ana', 'Ben', 'Chloe', 'Dev', 'Emma', 'Farid', 'Grace', 'Hugo', 'Ines', 'Jack', 'Kira', 'Liam'];
const preferenceRows = NAMES.flatMap((n) => [
  { prompt: `Greet ${n}.`, chosen: `Hello, ${n}! It is nice to meet you.`, rejected: `Go away, ${n}.` },
  { prompt: `Say hi to ${n}.`, chosen: `Hi ${n}! It is nice to meet you.`, rejected: `Go away, ${n}.` },
]);

// GRPO: repeat a word, shown once how (the base model gets about half of these exactly right when
// sampling at temperature 1, so exact-match rewards vary within a group and GRPO has a signal).
const WORDS = [
  'elephant',
  'mountain',
  'violet',
  'quickly',
  'lantern',
  'harbor',
  'apple',
  'river',
  'green',
  'table',
  'music',
  'stone',
  'pencil',
  'garden',
  'window',
  'silver',
  'candle',
  'forest',
  'planet',
  'rocket',
  'bridge',
  'copper',
  'summer',
  'yellow',
];
const echoRows = WORDS.map((w) => ({
  prompt: [
    { role: 'user', content: 'Repeat the word: house' },
    { role: 'assistant', content: 'house' },
    { role: 'user', content: `Repeat the word: ${w}` },
  ],
  answer: w,
}));

interface Signal {
  algorithm: string;
  step: number;
  reward_margin?: number;
  reward_accuracy?: number;
  mean_reward?: number;
  reward_std?: number;
}

async function waitForJob(id: string): Promise<any> {
  for (;;) {
    const job = (await stack.call('GET', `/core/training-jobs/${id}`)).body;
    if (TERMINAL.includes(job.status)) return job;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** The job's per-step learning signal, as a user reads it: JSON `signal` events in the job's logs. */
async function signals(id: string): Promise<Signal[]> {
  const logs = (await stack.call('GET', `/core/training-jobs/${id}/logs?limit=5000`)).body;
  expect(logs.complete).toBe(true);
  const out: Signal[] = [];
  for (const { line } of logs.lines as { line: string }[]) {
    // the trainer's events are JSON lines; transformers also prints Python dicts (`{'loss': ...}`)
    if (!line.startsWith('{"event"')) continue;
    const event = JSON.parse(line);
    if (event.event === 'signal') out.push(event);
  }
  return out;
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/** Deploys a finished job and asks it for a chat completion through the OpenAI SDK, by job id. */
async function deployAndChat(jobId: string, content: string) {
  const openai = new OpenAI({ apiKey: OPERATOR_KEY, baseURL: `${stack.url}/v1`, maxRetries: 0 });
  const request = { model: jobId, max_tokens: 12, temperature: 0, messages: [{ role: 'user' as const, content }] };
  const undeployed = await openai.chat.completions.create(request).catch((e: unknown) => e);
  expect(undeployed).toBeInstanceOf(OpenAI.ConflictError);
  expect((await stack.call('POST', `/core/training-jobs/${jobId}/deploy`)).status).toBe(200);
  const chat = await openai.chat.completions.create(request);
  expect(chat.model).toBe(jobId);
  expect(chat.usage?.completion_tokens).toBeGreaterThan(0);
  return chat.choices[0]?.message.content ?? '';
}

beforeAll(async () => {
  stack = await TestStack.start({ maxTrainingJobs: 1, withModels: true });
  const models = (await stack.call('GET', '/base-models')).body.data;
  if (!models.find((m: any) => m.id === BASE)?.available)
    throw new Error(`${BASE} is not in the model store: run \`node scripts/setup.mjs\` (npm test does) first`);
  expect((await stack.uploadDataset('echo', jsonl(echoRows))).status).toBe('ready');
});
afterAll(async () => stack.stop());

describe('DPO, through the unchanged Python openai SDK (#31)', () => {
  it('learns the preference: the chosen-vs-rejected reward margin grows step by step; it serves chat as its ft: name', async () => {
    // the same preference rows in OpenAI's preference format, as a team moving from OpenAI has them
    const dir = await mkdtemp(join(tmpdir(), 'sift-dpo-'));
    const file = join(dir, 'greetings.jsonl');
    await writeFile(
      file,
      jsonl(
        preferenceRows.map((r) => ({
          input: { messages: [{ role: 'user', content: r.prompt }] },
          preferred_output: [{ role: 'assistant', content: r.chosen }],
          non_preferred_output: [{ role: 'assistant', content: r.rejected }],
        })),
      ),
    );
    const stdout = await runPythonClientCheck('openai_fine_tuning_check.py', [
      'dpo',
      `${stack.url}/v1`,
      OPERATOR_KEY,
      BASE,
      file,
    ]);
    await rm(dir, { recursive: true, force: true });
    const run = JSON.parse(stdout.trim());
    const team = (await stack.call('GET', '/billing/usage/requests')).body.team_id as string;
    expect(run).toMatchObject({
      file_status: 'processed',
      created_status: 'queued',
      status: 'succeeded',
      error: null,
      method: { type: 'dpo', dpo: { hyperparameters: { beta: 0.1, n_epochs: 2 } } },
      fine_tuned_model: `ft:${BASE}:${team}:greeter:${run.job_id}`,
      // the job created behind it and cancelled at once: the native stop, no model
      cancelled: { status: 'cancelled', fine_tuned_model: null },
    });
    expect(run.events).toBeGreaterThan(0);
    // 24 rows' prompt, chosen and rejected tokens, twice
    expect(Number.isInteger(run.trained_tokens) && run.trained_tokens > 24 * 2 * 10).toBe(true);
    expect(run.chat).toMatchObject({ model: run.fine_tuned_model });
    expect(run.chat.content.length).toBeGreaterThan(0);
    expect(run.chat.completion_tokens).toBeGreaterThan(0);

    // the native record of the same job, and its learning curve
    const job = (await stack.call('GET', `/core/training-jobs/${run.job_id.replace(/^ftjob-/, '')}`)).body;
    expect(job).toMatchObject({ status: 'complete', training_algorithm: 'dpo', warnings: [] });
    expect(job.deployment).not.toBeNull();
    const cancelled = (await stack.call('GET', `/core/training-jobs/${run.cancelled.id.replace(/^ftjob-/, '')}`)).body;
    expect(cancelled.status).toBe('stopped');
    const curve = await signals(job.id);
    expect(curve.length).toBe(job.progress.total_steps);
    expect(
      curve.every(
        (s) => s.algorithm === 'dpo' && typeof s.reward_margin === 'number' && typeof s.reward_accuracy === 'number',
      ),
    ).toBe(true);
    const margins = curve.map((s) => s.reward_margin as number);
    console.log(`DPO reward margin per step: ${margins.map((m) => m.toFixed(2)).join(' ')}`);
    const half = Math.floor(margins.length / 2);
    // before the first update the policy is the reference: margin 0
    expect(Math.abs(margins[0] as number)).toBeLessThan(1e-3);
    expect(mean(margins.slice(half))).toBeGreaterThan(mean(margins.slice(0, half)) + 1);
    expect(margins.at(-1)).toBeGreaterThan(1);
    expect(curve.at(-1)?.reward_accuracy).toBe(1);
  });
});

describe('GRPO', () => {
  it('learns from an exact-match reward: the mean reward rises over training; deployed, it serves chat', async () => {
    const created = await stack.call('POST', '/core/training-jobs', {
      body: {
        model_name: 'echo-grpo',
        base_model: BASE,
        datasets: [{ name: 'echo' }],
        training_algorithm: 'grpo',
        rl_config: { num_generations: 8, reward: 'exact_match', max_completion_length: 8 },
        nr_epochs: 1,
      },
    });
    expect(created.status).toBe(201);
    const job = await waitForJob(created.body.id);
    expect(job.error).toBeNull();
    expect(job.status).toBe('complete');
    expect(job.warnings).toEqual([]);

    const curve = await signals(job.id);
    expect(curve.length).toBe(job.progress.total_steps);
    const rewards = curve.map((s) => s.mean_reward as number);
    console.log(`GRPO mean reward per step: ${rewards.map((r) => r.toFixed(3)).join(' ')}`);
    expect(rewards.every((r) => r >= 0 && r <= 1)).toBe(true);
    // each step scores a group of 8 generations of one prompt: compare thirds, not single steps
    const third = Math.floor(rewards.length / 3);
    const first = mean(rewards.slice(0, third));
    const last = mean(rewards.slice(-third));
    expect(first).toBeGreaterThan(0); // the base model gets some right: there is a signal to learn from
    expect(last).toBeGreaterThan(first + 0.15);

    const reply = await deployAndChat(job.id, 'Repeat the word: orange');
    expect(reply.length).toBeGreaterThan(0);
  });
});

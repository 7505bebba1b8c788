/**
 * Compute is money (issue #25 item 2), on the in-memory service graph: training jobs, evaluations,
 * generation jobs and adaptive cycles are refused for a team out of credit (402) or past its daily
 * cap (429, spend-cap reason) before anything is written; what runs is billed once into the usage
 * ledger by the transition that ends it; each plan caps what runs at once, exactly.
 */
import { createMemoryServices, type MemoryServices } from '../../../src/adapters/memory/services';
import { claimCycle, getCycle, listCycles, startCycle, updateCycle } from '../../../src/core/adaptive/cycles';
import { selectProjects, startCandidate } from '../../../src/core/adaptive/workflow';
import { updateTeam } from '../../../src/core/billing/credits';
import {
  trainingCostMicros,
  trainingMicrosPerMinute,
  encoderTokensCostMicros,
  decoderTokensCostMicros,
} from '../../../src/core/billing/prices';
import fc from 'fast-check';
import { computeInUse, ORPHAN_SLOT_GRACE_MS, usableSlots } from '../../../src/core/computeSlots';
import type { WorkflowLauncher } from '../../../src/core/context';
import { promoteToProject } from '../../../src/core/deployments';
import { PaymentRequiredError, RateLimitError } from '../../../src/core/errors';
import { createEvaluation, deleteEvaluation, getEvaluation, listEvaluations } from '../../../src/core/evaluations';
import {
  aggregateEvaluation,
  evaluateShard,
  prepareEvaluation,
  recordEvaluationFailure,
  type EvaluationPredictor,
} from '../../../src/core/evaluation/workflow';
import {
  createSyntheticDataJob,
  getSyntheticDataJob,
  listSyntheticDataJobs,
} from '../../../src/core/syntheticData/jobs';
import {
  assembleSyntheticData,
  generateSyntheticDataShard,
  planSyntheticData,
  recordSyntheticDataFailure,
  type TextGenerator,
} from '../../../src/core/syntheticData/workflow';
import { baseModelManifestKey } from '../../../src/core/modelLayout';
import { createProject, getProject } from '../../../src/core/projects';
import { newUuid } from '../../../src/core/ids';
import { logChunkKey, modelPrefix, registerCheckpoint } from '../../../src/core/training/artifacts';
import { computeSlotItem, jobItem } from '../../../src/core/recordKeys';
import { createTeam, getTeam } from '../../../src/core/teams';
import { getTrainingJob, listTrainingJobs, stopTrainingJob, transitionJob } from '../../../src/core/trainingJobs';
import { getUsage, listUsageRequests } from '../../../src/core/usage';
import { recoverInterruptedWork } from '../../../src/core/bootstrap';
import { handleWorkMessage } from '../../../src/core/worker';
import { completeJob, ENCODER, newJob, readyDataset } from '../../helpers/memoryDomain';

const T0 = Date.parse('2026-03-10T12:00:00Z');

/** A team on `plan` with a ready NER dataset, a clock the test moves, and a workflow launcher that records starts. */
async function setup(
  opts: {
    credit_balance_usd?: number;
    daily_spend_cap_usd?: number;
    plan?: 'free' | 'pro' | 'research' | 'custom';
  } = {},
) {
  let t = T0;
  const svc = createMemoryServices({ now: () => new Date(t) });
  const started: { kind: string; input: Record<string, unknown> }[] = [];
  svc.workflows = {
    start: async (kind, _name, input) => void started.push({ kind, input }),
  } satisfies WorkflowLauncher;
  const team = await createTeam(svc, {
    name: 'acme',
    plan: opts.plan ?? 'pro',
    ...(opts.credit_balance_usd !== undefined ? { credit_balance_usd: opts.credit_balance_usd } : {}),
    ...(opts.daily_spend_cap_usd !== undefined ? { daily_spend_cap_usd: opts.daily_spend_cap_usd } : {}),
  });
  await readyDataset(svc, team.id, 'ner-set');
  for (const model of [ENCODER, 'sift/gliner2-mini-v1']) await svc.blobs.put(baseModelManifestKey(model), '{}');
  return { svc, teamId: team.id, started, advance: (ms: number) => (t += ms) };
}

const evaluationOf = (svc: MemoryServices, teamId: string) =>
  createEvaluation(svc, teamId, { base_model: ENCODER, dataset_name: 'ner-set' });
const generationOf = (
  svc: MemoryServices,
  teamId: string,
  task: 'ner' | 'classification' = 'classification',
  num_examples = 30,
) =>
  createSyntheticDataJob(svc, teamId, {
    task_type: task,
    dataset_name: 'gen-set',
    num_examples,
    labels: task === 'ner' ? ['person'] : ['billing', 'shipping'],
  });

/** A project serving a complete job, so adaptive cycles have something to improve. */
async function deployedProject(svc: MemoryServices, teamId: string) {
  const job = await completeJob(svc, teamId);
  const project = await createProject(svc, teamId, { name: 'support' });
  await promoteToProject(svc, teamId, project.id, { training_job_id: job.id });
  return project;
}

/** Every way a team starts compute; each must be refused the same way. */
const everyKind = (svc: MemoryServices, teamId: string, projectId: string) => ({
  training: () => newJob(svc, teamId, 'refused'),
  evaluation: () => evaluationOf(svc, teamId),
  generation: () => generationOf(svc, teamId),
  adaptive: () => startCycle(svc, teamId, projectId),
});

/** Nothing of a refused create may exist afterwards: no record, no held slot. */
async function nothingCreated(svc: MemoryServices, teamId: string, before: { jobs: number; evaluations: number }) {
  expect(await listTrainingJobs(svc, teamId)).toHaveLength(before.jobs);
  expect(await listEvaluations(svc, teamId, {})).toHaveLength(before.evaluations);
  expect(await listSyntheticDataJobs(svc, teamId)).toHaveLength(0);
  for (const kind of ['training', 'evaluation', 'generation'] as const)
    expect(await computeInUse(svc, teamId, kind)).toBe(0);
}

describe('compute is refused before anything is written', () => {
  it('a team out of credit gets 402 (x-should-retry: false) for a training job, an evaluation, a generation and an adaptive cycle', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 5 });
    const project = await deployedProject(svc, teamId);
    await updateTeam(svc, teamId, { credit_balance_usd: 0 });
    for (const [kind, start] of Object.entries(everyKind(svc, teamId, project.id))) {
      const refused = await start().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect({ kind, refused }).toEqual({ kind, refused: expect.any(PaymentRequiredError) });
      expect((refused as PaymentRequiredError).headers['x-should-retry']).toBe('false');
    }
    await nothingCreated(svc, teamId, { jobs: 1, evaluations: 0 });
    expect((await listCycles(svc, teamId, project.id)).cycles).toEqual([]);
  });

  it('a team past its daily spending cap gets 429 with the spend-cap reason and Retry-After to 00:00 UTC, for each kind', async () => {
    const { svc, teamId, advance } = await setup({ credit_balance_usd: 100, daily_spend_cap_usd: 0.001 });
    const project = await deployedProject(svc, teamId);
    // one billed job spends past the cap: 10 minutes of local training
    const job = await newJob(svc, teamId, 'spender');
    await transitionJob(svc, teamId, job.id, 'running', { instance_type: 'local' });
    advance(10 * 60_000);
    await transitionJob(svc, teamId, job.id, 'complete');
    for (const [kind, start] of Object.entries(everyKind(svc, teamId, project.id))) {
      const refused = (await start().catch((e: unknown) => e)) as RateLimitError;
      expect({ kind, status: refused.status, reason: refused.headers['x-ratelimit-reason'] }).toEqual({
        kind,
        status: 429,
        reason: 'daily_spend_cap_exceeded',
      });
      expect(Number(refused.headers['retry-after'])).toBe(12 * 3600 - 10 * 60);
    }
    await nothingCreated(svc, teamId, { jobs: 2, evaluations: 0 });
  });
});

describe('a training job is billed once, by the transition that ends it', () => {
  it('its minutes at the instance price land in the usage list, the balance, the daily total and the EMF lines — once, however often completion is delivered', async () => {
    const { svc, teamId, advance } = await setup({ credit_balance_usd: 10 });
    const job = await newJob(svc, teamId);
    await transitionJob(svc, teamId, job.id, 'running', { instance_type: 'local' });
    advance(90_000);
    await transitionJob(svc, teamId, job.id, 'complete');
    // the completion delivered again (a retried task, a late event): the conditional write refuses it
    await expect(transitionJob(svc, teamId, job.id, 'complete')).rejects.toThrow(/is complete/);
    await expect(transitionJob(svc, teamId, job.id, 'failed')).rejects.toThrow(/is complete/);
    const cost = trainingCostMicros('local', 90);
    expect(cost).toBe(Math.ceil((90 * trainingMicrosPerMinute('local')) / 60));
    expect(cost).toBeGreaterThan(0);

    const rows = (await listUsageRequests(svc, teamId, { limit: 10 })).data;
    expect(rows).toEqual([
      expect.objectContaining({
        inference_id: job.id,
        endpoint: '/core/training-jobs',
        model: job.id,
        cost_usd: cost / 1e6,
      }),
    ]);
    const usage = await getUsage(svc, teamId);
    expect(Math.round(usage.today.cost_usd * 1e6)).toBe(cost);
    expect(usage.today.by_endpoint).toEqual([
      expect.objectContaining({ endpoint: '/core/training-jobs', requests: 1 }),
    ]);
    expect(Math.round((await getTeam(svc, teamId)).credit_balance_usd! * 1e6)).toBe(10_000_000 - cost);
    const lines = svc.emf
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((l) => l.endpoint === '/core/training-jobs');
    expect(lines).toEqual([
      expect.objectContaining({ model: ENCODER, Requests: 1, CostUsd: cost / 1e6 }),
      expect.objectContaining({ model: ENCODER, GpuMinutes: 0 }),
    ]);
  });

  it('a stopped job pays for the time it ran; a job stopped before it ran pays nothing', async () => {
    const { svc, teamId, advance } = await setup({ credit_balance_usd: 10 });
    const ran = await newJob(svc, teamId, 'ran');
    const never = await newJob(svc, teamId, 'never');
    await transitionJob(svc, teamId, ran.id, 'running', { instance_type: 'ml.g5.xlarge' });
    advance(3600_000);
    await stopTrainingJob(svc, teamId, ran.id);
    await stopTrainingJob(svc, teamId, never.id);
    const rows = (await listUsageRequests(svc, teamId, { limit: 10 })).data;
    // an hour of ml.g5.xlarge: AWS's 1.408 USD × the 1.25 markup
    expect(rows).toEqual([
      expect.objectContaining({ inference_id: ran.id, cost_usd: trainingCostMicros('ml.g5.xlarge', 3600) / 1e6 }),
    ]);
    expect(trainingCostMicros('ml.g5.xlarge', 3600)).toBe(60 * Math.ceil((1.408 * 1.25 * 1e6) / 60));
  });

  it('a job whose process died with the service is billed, at the next start, up to its last log line — not to the restart', async () => {
    const { svc, teamId, advance } = await setup({ credit_balance_usd: 10 });
    const job = await newJob(svc, teamId);
    await transitionJob(svc, teamId, job.id, 'running', { instance_type: 'local' });
    const started = Date.parse((await getTrainingJob(svc, teamId, job.id)).started_at!);
    const line = (offset: number, ms: number) =>
      JSON.stringify({ offset, ts: new Date(started + ms).toISOString(), stream: 'stdout', line: `step ${offset}` });
    await svc.blobs.put(logChunkKey(teamId, job.id, 0), `${line(0, 1_000)}\n${line(1, 30_000)}\n`);
    await svc.blobs.put(logChunkKey(teamId, job.id, 2), `${line(2, 300_000)}\n`);
    advance(8 * 3600_000); // the service came back eight hours later
    await recoverInterruptedWork(svc);
    expect(await getTrainingJob(svc, teamId, job.id)).toMatchObject({ status: 'failed' });
    expect((await listUsageRequests(svc, teamId, { limit: 10 })).data).toEqual([
      expect.objectContaining({ inference_id: job.id, cost_usd: trainingCostMicros('local', 300) / 1e6 }),
    ]);
  });

  it("SageMaker's trained seconds, when the completion carries them, are what is billed (not the record's wall time)", async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 10 });
    const job = await newJob(svc, teamId);
    await transitionJob(svc, teamId, job.id, 'running', { instance_type: 'ml.g6.xlarge' });
    await transitionJob(svc, teamId, job.id, 'complete', { compute_seconds: 600 });
    expect((await listUsageRequests(svc, teamId, { limit: 10 })).data[0]).toMatchObject({
      cost_usd: trainingCostMicros('ml.g6.xlarge', 600) / 1e6,
    });
  });
});

/** The engine stand-in: 7 input tokens per text, nothing found. */
const predictor: EvaluationPredictor = {
  predict: async (_model, texts) => ({
    predictions: texts.map(() => ({ entities: [] })),
    inputTokens: texts.length * 7,
    routes: {},
  }),
};

describe('evaluations are billed once, by their input tokens at the encoder price', () => {
  it('the tokens of every scored shard, once, however often the aggregate or failure step runs', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const evaluation = await evaluationOf(svc, teamId);
    const input = { evaluationId: evaluation.id, teamId };
    const { shards } = await prepareEvaluation(svc, input);
    const results = [];
    for (const shard of shards) results.push(await evaluateShard(svc, predictor, { ...input, shard }));
    await evaluateShard(svc, predictor, { ...input, shard: shards[0]! }); // a retried shard
    await aggregateEvaluation(svc, { ...input, shardResults: results });
    await aggregateEvaluation(svc, { ...input, shardResults: results });
    await recordEvaluationFailure(svc, { ...input, error: { Error: 'late' } });
    expect(await getEvaluation(svc, teamId, evaluation.id)).toMatchObject({ status: 'complete', error: null });
    const tokens = 2 * 7; // the dataset's two rows
    expect((await listUsageRequests(svc, teamId, { limit: 10 })).data).toEqual([
      expect.objectContaining({
        inference_id: evaluation.id,
        endpoint: '/core/evaluations',
        model: ENCODER,
        input_tokens: tokens,
        cost_usd: encoderTokensCostMicros(tokens) / 1e6,
      }),
    ]);
    expect(await computeInUse(svc, teamId, 'evaluation')).toBe(0);
  });

  it('a failed evaluation pays for the shards it scored; deleting a running one ends it the same way', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const failed = await evaluationOf(svc, teamId);
    const { shards } = await prepareEvaluation(svc, { evaluationId: failed.id, teamId });
    await evaluateShard(svc, predictor, { evaluationId: failed.id, teamId, shard: shards[0]! });
    await recordEvaluationFailure(svc, { evaluationId: failed.id, teamId, error: { Error: 'boom' } });
    await recordEvaluationFailure(svc, { evaluationId: failed.id, teamId, error: { Error: 'boom' } });
    const deleted = await evaluationOf(svc, teamId);
    await evaluateShard(svc, predictor, { evaluationId: deleted.id, teamId, shard: shards[0]! });
    await deleteEvaluation(svc, teamId, deleted.id);
    await aggregateEvaluation(svc, { evaluationId: deleted.id, teamId, shardResults: [] }); // the workflow after the delete
    const rows = (await listUsageRequests(svc, teamId, { limit: 10 })).data as {
      inference_id: string;
      input_tokens?: number;
    }[];
    expect(rows.map((r) => r.inference_id).sort()).toEqual([failed.id, deleted.id].sort());
    expect(rows.every((r) => r.input_tokens === 14)).toBe(true);
    expect(await computeInUse(svc, teamId, 'evaluation')).toBe(0);
  });
});

/** The decoder stand-in: a distinct line per seed, 20 tokens read and 10 written per completion. */
const generator: TextGenerator = {
  model: 'HuggingFaceTB/SmolLM2-135M-Instruct',
  complete: async (_system, _user, opts) => ({
    text: `A customer message number ${opts.seed}`,
    inputTokens: 20,
    outputTokens: 10,
  }),
};

/** Runs the queued dataset processing while `work` waits for it (as the worker would). */
async function withWorker<T>(svc: MemoryServices, work: Promise<T>): Promise<T> {
  let done = false;
  const finished = work.finally(() => (done = true));
  while (!done) {
    for (const message of svc.sent.splice(0)) await handleWorkMessage(svc, message);
    await new Promise((r) => setTimeout(r, 5));
  }
  return finished;
}

describe("generation is billed once, by the decoder's tokens (and NER labelling at the encoder price)", () => {
  it('every completion of every shard, once, however often a shard, the assemble or the failure step runs', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const job = await generationOf(svc, teamId, 'classification', 30);
    const input = { jobId: job.job_id, teamId };
    const { shards } = await planSyntheticData(svc, input);
    const outputs = [];
    for (const shard of shards)
      outputs.push(await generateSyntheticDataShard(svc, generator, predictor, { ...input, shard }));
    await generateSyntheticDataShard(svc, generator, predictor, { ...input, shard: shards[1]! }); // a retried shard
    await withWorker(svc, assembleSyntheticData(svc, { ...input, shards: outputs }, 5000));
    await withWorker(svc, assembleSyntheticData(svc, { ...input, shards: outputs }, 5000));
    await recordSyntheticDataFailure(svc, { ...input, error: { Error: 'late' } });
    expect(await getSyntheticDataJob(svc, teamId, job.job_id)).toMatchObject({ status: 'complete' });
    const completions = 30; // every example on its first attempt (no duplicates)
    const rows = (await listUsageRequests(svc, teamId, { limit: 10 })).data;
    expect(rows).toEqual([
      expect.objectContaining({
        inference_id: job.job_id,
        endpoint: '/generate',
        model: generator.model,
        input_tokens: 20 * completions,
        output_tokens: 10 * completions,
        cost_usd: decoderTokensCostMicros(generator.model, 20 * completions, 10 * completions) / 1e6,
      }),
    ]);
    expect(await computeInUse(svc, teamId, 'generation')).toBe(0);
  });

  it('a NER job also pays for labelling its texts, as its own row at the encoder price; a failed job pays for what ran', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 1 });
    const job = await generationOf(svc, teamId, 'ner', 5);
    const input = { jobId: job.job_id, teamId };
    const { shards } = await planSyntheticData(svc, input);
    await generateSyntheticDataShard(svc, generator, predictor, { ...input, shard: shards[0]! });
    await recordSyntheticDataFailure(svc, { ...input, error: { Error: 'boom' } });
    await recordSyntheticDataFailure(svc, { ...input, error: { Error: 'boom' } });
    await expect(planSyntheticData(svc, input)).rejects.toThrow(/already ended/); // an ended job is never reopened
    const rows = (await listUsageRequests(svc, teamId, { limit: 10 })).data as {
      inference_id: string;
      model: string;
      input_tokens?: number;
      cost_usd: number;
    }[];
    expect(rows.map((r) => [r.inference_id, r.model, r.input_tokens, r.cost_usd]).sort()).toEqual(
      [
        [job.job_id, generator.model, 100, decoderTokensCostMicros(generator.model, 100, 50) / 1e6],
        [`${job.job_id}#labels`, 'sift/gliner2-mini-v1', 35, encoderTokensCostMicros(35) / 1e6],
      ].sort(),
    );
  });
});

describe('each plan caps the compute running at once, exactly', () => {
  const refusedConcurrent = (results: PromiseSettledResult<unknown>[]) =>
    results.filter(
      (r) =>
        r.status === 'rejected' && (r.reason as RateLimitError).headers?.['x-ratelimit-reason'] === 'concurrent_jobs',
    );

  it.each([
    ['free', 1],
    ['pro', 4],
  ] as const)(
    '%s: of cap + 3 training jobs, evaluations and generations created at once, exactly the cap of each succeeds',
    async (plan, cap) => {
      const { svc, teamId } = await setup({ plan });
      for (const [kind, create, list] of [
        ['training', () => newJob(svc, teamId), () => listTrainingJobs(svc, teamId)],
        ['evaluation', () => evaluationOf(svc, teamId), () => listEvaluations(svc, teamId, {})],
        ['generation', () => generationOf(svc, teamId), () => listSyntheticDataJobs(svc, teamId)],
      ] as const) {
        const results = await Promise.allSettled(Array.from({ length: cap + 3 }, () => create()));
        expect({ kind, created: results.filter((r) => r.status === 'fulfilled').length }).toEqual({
          kind,
          created: cap,
        });
        const refused = refusedConcurrent(results);
        expect(refused).toHaveLength(3);
        const err = (refused[0] as PromiseRejectedResult).reason as RateLimitError;
        expect(err.status).toBe(429);
        expect(Number(err.headers['retry-after'])).toBeGreaterThan(0);
        expect(err.message).toContain(`at most ${cap} `);
        expect(await list()).toHaveLength(cap);
      }
    },
  );

  it('the transition that ends a job frees its slot for the next create', async () => {
    const { svc, teamId } = await setup({ plan: 'free' });
    const first = await newJob(svc, teamId);
    await expect(newJob(svc, teamId)).rejects.toBeInstanceOf(RateLimitError);
    await transitionJob(svc, teamId, first.id, 'failed', { error: 'x' });
    expect(await computeInUse(svc, teamId, 'training')).toBe(0); // freed by the transition itself, not left to the repair
    const second = await newJob(svc, teamId);
    expect(await getTrainingJob(svc, teamId, second.id)).toMatchObject({ status: 'requested' });
  });

  it('a create that fails after taking its slot gives it back (the launcher refused it; the record could not be written)', async () => {
    const { svc, teamId } = await setup({ plan: 'free' });
    svc.training = { submit: async () => Promise.reject(new Error('Step Functions is down')), stop: async () => {} };
    await expect(newJob(svc, teamId)).rejects.toThrow('Step Functions is down');
    expect(await computeInUse(svc, teamId, 'training')).toBe(0);
    delete svc.training;
    const put = svc.records.put.bind(svc.records);
    svc.records.put = async (keys, record, opts) =>
      keys.sk.startsWith('EVAL#') ? Promise.reject(new Error('store down')) : put(keys, record, opts);
    await expect(evaluationOf(svc, teamId)).rejects.toThrow('store down');
    expect(await computeInUse(svc, teamId, 'evaluation')).toBe(0);
  });

  it('a slot left held by a holder that ended, or by a create that died before its record, is reclaimed — the latter only after the grace period', async () => {
    const { svc, teamId, advance } = await setup({ plan: 'free' });
    const ended = await newJob(svc, teamId);
    // the job ended, but its slot was never released (the process died between the two writes)
    const job = jobItem(teamId, ended.id);
    await svc.records.update(job.pk, job.sk, { set: { status: 'failed' } });
    expect(await computeInUse(svc, teamId, 'training')).toBe(1);
    const next = await newJob(svc, teamId);
    expect(next.status).toBe('requested');
    // a create that took slot 0 of the evaluations and died before writing its record
    const slot = computeSlotItem(teamId, 'evaluation', 0);
    await svc.records.update(slot.pk, slot.sk, {
      set: { kind: 'evaluation', slot: 0, holder: 'never-written', acquired_at: new Date(T0).toISOString() },
    });
    await expect(evaluationOf(svc, teamId)).rejects.toBeInstanceOf(RateLimitError);
    advance(ORPHAN_SLOT_GRACE_MS + 1);
    expect((await evaluationOf(svc, teamId)).status).toBe('running');
  });

  it('whatever slots are held (a plan lowered, slots freed out of order), creates that take every slot they may end at exactly max(cap, held)', () => {
    // the counterexample to "take any free n < cap": cap 2 with n = 1 and n = 3 held must take nothing
    expect(usableSlots(2, [1, 3])).toBe(0);
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 16 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 31 }), { maxLength: 24 }),
        (cap, heldAt) => {
          const usable = usableSlots(cap, heldAt);
          const taken = Array.from({ length: usable }, (_, n) => n).filter((n) => !heldAt.includes(n)).length;
          expect(heldAt.length + taken).toBe(Math.max(cap, heldAt.length));
        },
      ),
      { seed: 25, numRuns: 500 },
    );
  });

  it('a plan lowered while jobs run keeps counting them: nothing new starts until the team is under the new cap', async () => {
    const { svc, teamId } = await setup({ plan: 'pro' });
    const jobs = [];
    for (let i = 0; i < 3; i++) jobs.push(await newJob(svc, teamId, `j${i}`));
    await updateTeam(svc, teamId, { plan: 'free' });
    await transitionJob(svc, teamId, jobs[0]!.id, 'failed', { error: 'x' }); // slot 0 free, slots 1 and 2 still held
    await expect(newJob(svc, teamId)).rejects.toBeInstanceOf(RateLimitError);
    await transitionJob(svc, teamId, jobs[1]!.id, 'failed', { error: 'x' });
    await expect(newJob(svc, teamId)).rejects.toBeInstanceOf(RateLimitError);
    await transitionJob(svc, teamId, jobs[2]!.id, 'failed', { error: 'x' });
    expect((await newJob(svc, teamId)).status).toBe('requested');
  });
});

describe('adaptive cycles and the spend allowance', () => {
  it('a scheduled cycle of a team out of credit is skipped, with the reason on the cycle; nothing is trained', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 5 });
    const project = await deployedProject(svc, teamId);
    await updateTeam(svc, teamId, { credit_balance_usd: 0 });
    expect(await selectProjects(svc, { trigger: 'schedule' })).toEqual({ projects: [] });
    const { cycles } = await listCycles(svc, teamId, project.id);
    expect(cycles).toEqual([
      expect.objectContaining({
        trigger: 'schedule',
        status: 'skipped',
        stage: 'done',
        reason: expect.stringContaining('Account out of credits'),
      }),
    ]);
    expect(await listTrainingJobs(svc, teamId)).toHaveLength(1); // the deployed one only
    // the project is free again for the next run
    await updateTeam(svc, teamId, { credit_balance_usd: 5 });
    expect((await selectProjects(svc, { trigger: 'schedule' })).projects).toHaveLength(1);
  });

  it('a cycle whose team runs out of credit before its candidate is created ends skipped with the reason, training nothing', async () => {
    const { svc, teamId } = await setup({ credit_balance_usd: 5 });
    const project = await deployedProject(svc, teamId);
    // the deployed job's final checkpoint, which the candidate continues from
    const deployed = (await listTrainingJobs(svc, teamId))[0]!;
    const checkpoint = {
      id: newUuid(),
      job_id: deployed.id,
      root_model: ENCODER,
      blob_prefix: modelPrefix(teamId, deployed.id),
      step: 1,
      epoch: 1,
      metrics: null,
      is_best: false,
      is_final: true,
      created_at: new Date(T0).toISOString(),
    };
    await registerCheckpoint(svc, teamId, checkpoint);
    await svc.records.update(jobItem(teamId, deployed.id).pk, jobItem(teamId, deployed.id).sk, {
      set: { final_checkpoint_id: checkpoint.id },
    });
    const cycle = (await claimCycle(svc, teamId, await getProject(svc, teamId, project.id), 'schedule'))!;
    await readyDataset(svc, teamId, 'train-set');
    await updateCycle(svc, teamId, cycle, {
      datasets: { train: { name: 'train-set', version: 1 }, holdout: { name: 'ner-set', version: 1 } },
    });
    await updateTeam(svc, teamId, { credit_balance_usd: 0 });
    await expect(
      startCandidate(svc, { project: { teamId, projectId: project.id, cycleId: cycle.id } }),
    ).rejects.toBeInstanceOf(PaymentRequiredError);
    expect(await getCycle(svc, teamId, project.id, cycle.id)).toMatchObject({
      status: 'skipped',
      stage: 'done',
      reason: expect.stringContaining('Account out of credits'),
    });
    expect(await listTrainingJobs(svc, teamId)).toHaveLength(1);
    expect((await getProject(svc, teamId, project.id)).adaptive_cycle_id ?? null).toBeNull(); // the project is free for the next one
  });

  it('a scheduled cycle of a team past its daily cap is skipped with the spend-cap reason', async () => {
    const { svc, teamId, advance } = await setup({ credit_balance_usd: 5, daily_spend_cap_usd: 0.0001 });
    const project = await deployedProject(svc, teamId);
    const spender = await newJob(svc, teamId, 'spender');
    await transitionJob(svc, teamId, spender.id, 'running', { instance_type: 'local' });
    advance(60_000);
    await transitionJob(svc, teamId, spender.id, 'complete');
    await selectProjects(svc, { trigger: 'schedule' });
    expect((await listCycles(svc, teamId, project.id)).cycles).toEqual([
      expect.objectContaining({ status: 'skipped', reason: expect.stringContaining('daily_spend_cap_exceeded') }),
    ]);
  });
});

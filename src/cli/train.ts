import { Presets, SingleBar } from 'cli-progress';

export interface TrainOptions {
  url: string;
  apiKey: string;
  modelName: string;
  baseModel: string;
  datasets: string[];
  trainingType?: string;
  algorithm?: string;
  epochs?: number;
  learningRate?: number;
  rlConfig?: Record<string, unknown>;
}

interface JobView {
  id: string;
  status: string;
  progress: { epoch: number; step: number; total_steps: number } | null;
  metrics: Record<string, number> | null;
  error: string | null;
  last_loss?: number;
}

const TERMINAL = new Set(['complete', 'failed', 'stopped']);

async function api<T>(opts: { url: string; apiKey: string }, method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(opts.url.replace(/\/$/, '') + path, {
    method,
    headers: { 'x-api-key': opts.apiKey, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const payload = (await res.json().catch(() => ({}))) as T & { detail?: string };
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status}: ${payload.detail ?? 'no detail'}`);
  return payload;
}

/** Starts a job through the API and follows it; resolves with the final job. */
export async function startTraining(opts: TrainOptions): Promise<JobView> {
  const created = await api<{ id: string }>(opts, 'POST', '/core/training-jobs', {
    model_name: opts.modelName,
    base_model: opts.baseModel,
    datasets: opts.datasets.map((name) => ({ name })),
    ...(opts.trainingType ? { training_type: opts.trainingType } : {}),
    ...(opts.algorithm ? { training_algorithm: opts.algorithm } : {}),
    ...(opts.epochs !== undefined ? { nr_epochs: opts.epochs } : {}),
    ...(opts.learningRate !== undefined ? { learning_rate: opts.learningRate } : {}),
    ...(opts.rlConfig ? { rl_config: opts.rlConfig } : {}),
  });
  process.stderr.write(`training job ${created.id}\n`);
  return followJob(opts, created.id);
}

/** Polls a job and draws a live progress bar (steps, epoch, loss) until the job ends. */
export async function followJob(
  opts: { url: string; apiKey: string },
  jobId: string,
  intervalMs = 1000,
): Promise<JobView> {
  const bar = new SingleBar(
    {
      format: '{status} |{bar}| {value}/{total} steps | epoch {epoch} | loss {loss} | {duration_formatted}',
      hideCursor: true,
      stream: process.stderr,
    },
    Presets.shades_classic,
  );
  let started = false;
  for (;;) {
    const job = await api<JobView>(opts, 'GET', `/core/training-jobs/${jobId}`);
    const p = job.progress;
    const payload = { status: job.status.padEnd(9), epoch: p?.epoch ?? '-', loss: job.last_loss?.toFixed(4) ?? '-' };
    if (!started) {
      bar.start(Math.max(1, p?.total_steps ?? 1), p?.step ?? 0, payload);
      started = true;
    } else {
      if (p?.total_steps) bar.setTotal(p.total_steps);
      bar.update(p?.step ?? 0, payload);
    }
    if (TERMINAL.has(job.status)) {
      bar.stop();
      return job;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

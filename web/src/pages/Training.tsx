import {
  Alert,
  Badge,
  Button,
  Code,
  Group,
  Modal,
  NumberInput,
  Paper,
  Progress,
  Select,
  SimpleGrid,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { createParser } from 'eventsource-parser';
import { useEffect, useState, type FormEvent } from 'react';
import { CartesianGrid, Line, LineChart, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { api, apiBase, must, storedKey } from '../api/client';
import type { components } from '../api/schema';
import { DataTable, Empty, fmtDate, FormError, Loadable, useAction, useLoad } from '../components/states';

type Job = components['schemas']['TrainingJob'];
type LogLine = { offset: number; ts: string; stream: string; line: string };
const TERMINAL = ['complete', 'failed', 'stopped'];
// every status colour reads at ≥ 4.5:1 on white (WCAG AA; Mantine's green.9 is 4.4:1)
const statusColor = (s: string) =>
  ({ complete: '#22672f', failed: '#b02525', stopped: '#495057', running: '#1864ab' })[s] ?? '#212529';

/** Follows GET /core/training-jobs/{id}/logs as SSE (fetch, because EventSource cannot send X-API-Key). */
function useLiveLogs(jobId: string) {
  const [lines, setLines] = useState<LogLine[]>([]);
  const [end, setEnd] = useState<string>();
  const [error, setError] = useState<string>();
  useEffect(() => {
    const abort = new AbortController();
    setLines([]);
    setEnd(undefined);
    (async () => {
      const res = await fetch(`${apiBase}/core/training-jobs/${encodeURIComponent(jobId)}/logs`, {
        headers: { accept: 'text/event-stream', 'x-api-key': storedKey() ?? '' },
        signal: abort.signal,
      });
      if (!res.ok || !res.body) throw new Error(`The log stream answered HTTP ${res.status}`);
      const parser = createParser({
        onEvent: (e) => {
          if (e.event === 'end')
            setEnd(
              ((): string => {
                try {
                  return String((JSON.parse(e.data) as { status?: string }).status ?? e.data);
                } catch {
                  return e.data;
                }
              })(),
            );
          else if (e.event === 'log') setLines((l) => [...l, JSON.parse(e.data) as LogLine]);
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
    })().catch((err: Error) => !abort.signal.aborted && setError(err.message));
    return () => abort.abort();
  }, [jobId]);
  return { lines, end, error };
}

/** The trainer writes one JSON object per line; `progress` events carry the loss. */
function lossPoints(lines: LogLine[]) {
  const points: { step: number; loss: number }[] = [];
  for (const l of lines) {
    if (!l.line.startsWith('{')) continue;
    try {
      const e = JSON.parse(l.line) as { event?: string; step?: number; loss?: number };
      if (e.event === 'progress' && typeof e.loss === 'number' && typeof e.step === 'number')
        points.push({ step: e.step, loss: e.loss });
    } catch {
      /* a plain line */
    }
  }
  return points;
}

function JobDetail({ id, onChanged }: { id: string; onChanged: () => void }) {
  const [tick, setTick] = useState(0);
  const job = useLoad(() => must(api.GET('/core/training-jobs/{id}', { params: { path: { id } } })), [id, tick]);
  const logs = useLiveLogs(id);
  const [error, setError] = useState<string>();
  const checkpoints = useLoad(
    () => must(api.GET('/core/training-jobs/{id}/checkpoints', { params: { path: { id } } })),
    [id, logs.end],
  );
  // refresh the job while it runs; the log stream's end event says when it is over
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when the log stream ends; onChanged is the parent's, new each render
  useEffect(() => {
    if (logs.end) {
      setTick((t) => t + 1);
      onChanged(); // the list shows the final status too
    }
    const timer = setInterval(() => !logs.end && setTick((t) => t + 1), 3000);
    return () => clearInterval(timer);
  }, [logs.end]);
  const act = (fn: () => Promise<unknown>) => async () => {
    setError(undefined);
    try {
      await fn();
      setTick((t) => t + 1);
      onChanged();
    } catch (err) {
      setError((err as Error).message);
    }
  };
  const loss = lossPoints(logs.lines);
  // the weights' presigned URL (JSON form of GET /download), opened in a new tab
  const download = async () => {
    const res = await fetch(`${apiBase}/core/training-jobs/${encodeURIComponent(id)}/download`, {
      headers: { accept: 'application/json', 'x-api-key': storedKey() ?? '' },
    });
    if (!res.ok) throw new Error(`The download answered HTTP ${res.status}`);
    window.open(((await res.json()) as { url: string }).url, '_blank', 'noopener');
  };
  return (
    <Paper withBorder p="md" component="section" aria-label={`Training job ${id}`}>
      <Loadable state={job} label="Loading the job">
        {(j: Job) => (
          <Stack>
            <Group justify="space-between">
              <Group>
                <Title order={2} size="h4">
                  {j.model_name}
                </Title>
                <Text fw={700} c={statusColor(j.status)} tt="uppercase" size="sm" data-testid="job-status">
                  {j.status}
                </Text>
              </Group>
              <Group gap="xs">
                {!TERMINAL.includes(j.status) && (
                  <Button
                    size="xs"
                    variant="light"
                    color="orange"
                    onClick={act(() => must(api.POST('/core/training-jobs/{id}/stop', { params: { path: { id } } })))}
                  >
                    Stop
                  </Button>
                )}
                {j.status === 'complete' && (
                  <Button
                    size="xs"
                    variant="light"
                    onClick={act(() =>
                      must(api.POST('/core/training-jobs/{id}/deploy', { params: { path: { id } }, body: {} })),
                    )}
                  >
                    Deploy
                  </Button>
                )}
                {j.status === 'complete' && (
                  <Button size="xs" variant="light" onClick={act(download)}>
                    Download
                  </Button>
                )}
              </Group>
            </Group>
            <Text size="sm">
              {j.base_model} · {j.training_type} · {j.training_algorithm} · {j.nr_epochs} epochs · lr {j.learning_rate}{' '}
              · datasets {j.datasets.map((d) => `${d.name}${d.version ? ` v${d.version}` : ''}`).join(', ')}
            </Text>
            <Text size="sm">
              Created {fmtDate(j.created_at)} · started {fmtDate(j.started_at)} · finished {fmtDate(j.finished_at)}
            </Text>
            {j.progress && (
              <Progress
                value={(100 * j.progress.step) / Math.max(1, j.progress.total_steps)}
                aria-label={`Step ${j.progress.step} of ${j.progress.total_steps}`}
              />
            )}
            {j.error && (
              <Alert color="red" title="The job failed">
                {j.error}
              </Alert>
            )}
            {j.warnings.length > 0 && (
              <Alert color="yellow">
                {j.warnings.map((w) => (typeof w === 'string' ? w : JSON.stringify(w))).join(' · ')}
              </Alert>
            )}
            {j.metrics && (
              <SimpleGrid cols={3}>
                {Object.entries(j.metrics).map(([k, v]) => (
                  <Paper key={k} withBorder p="xs">
                    <Text size="xs" c="dimmed">
                      {k}
                    </Text>
                    <Text fw={700}>{typeof v === 'number' ? v.toFixed(3) : String(v)}</Text>
                  </Paper>
                ))}
              </SimpleGrid>
            )}
            <FormError error={error} />
            <Title order={3} size="h5">
              Loss
            </Title>
            {loss.length < 2 ? (
              <Empty>No loss reported yet.</Empty>
            ) : (
              <div
                style={{ height: 200 }}
                role="img"
                aria-label={`Training loss from ${loss[0]!.loss.toFixed(3)} at step ${loss[0]!.step} to ${loss.at(-1)!.loss.toFixed(3)} at step ${loss.at(-1)!.step}`}
              >
                <ResponsiveContainer>
                  <LineChart data={loss}>
                    <CartesianGrid strokeDasharray="3 3" />
                    <XAxis dataKey="step" fontSize={12} />
                    <YAxis fontSize={12} />
                    <Tooltip />
                    <Line dataKey="loss" stroke="#1971c2" dot={false} isAnimationActive={false} />
                  </LineChart>
                </ResponsiveContainer>
              </div>
            )}
            <Title order={3} size="h5">
              Checkpoints
            </Title>
            <Loadable
              state={checkpoints}
              label="Loading checkpoints"
              isEmpty={(c) => c.checkpoints.length === 0}
              empty="No checkpoints yet."
            >
              {(c) => (
                <Text size="sm">
                  {c.checkpoints.map((cp) => (
                    <Code key={cp.id} mr="xs">
                      {cp.id} (step {cp.step})
                    </Code>
                  ))}
                </Text>
              )}
            </Loadable>
            <Title order={3} size="h5">
              Logs {logs.end ? `(ended: ${logs.end})` : '(live)'}
            </Title>
            {logs.error && <Alert color="red">{logs.error}</Alert>}
            {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region takes focus so that the keyboard can scroll it (axe: scrollable-region-focusable) */}
            {/* biome-ignore lint/a11y/useSemanticElements: kept a <div> with the region role, the element the console's axe checks were run on */}
            <div style={{ maxHeight: 220, overflow: 'auto' }} tabIndex={0} role="region" aria-label="Job logs">
              <Code block data-testid="job-logs" style={{ whiteSpace: 'pre-wrap', wordBreak: 'break-all' }}>
                {logs.lines.length ? logs.lines.map((l) => l.line).join('\n') : 'Waiting for the first log line…'}
              </Code>
            </div>
          </Stack>
        )}
      </Loadable>
    </Paper>
  );
}

function StartForm({ onStarted }: { onStarted: (id: string) => void }) {
  const models = useLoad(() => must(api.GET('/base-models')));
  const datasets = useLoad(() => must(api.GET('/core/datasets')));
  const [modelName, setModelName] = useState('');
  const [base, setBase] = useState<string | null>(null);
  const [dataset, setDataset] = useState<string | null>(null);
  const [trainingType, setTrainingType] = useState<'lora' | 'full'>('lora');
  const [epochs, setEpochs] = useState<number | string>('');
  const [lr, setLr] = useState<number | string>('');
  const { busy, error, run } = useAction();
  const trainable = models.data?.data.filter((m) => m.supports_training) ?? [];
  const ready = datasets.data?.data.filter((d) => d.status === 'ready') ?? [];
  const chosen = trainable.find((m) => m.id === base);
  async function submit(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      const [name, version] = (dataset ?? '').split('@');
      const job = await must(
        api.POST('/core/training-jobs', {
          body: {
            model_name: modelName,
            base_model: base ?? '',
            datasets: [{ name: name!, ...(version ? { version: Number(version) } : {}) }],
            training_type: trainingType,
            ...(epochs !== '' ? { nr_epochs: Number(epochs) } : {}),
            ...(lr !== '' ? { learning_rate: Number(lr) } : {}),
          },
        }),
      );
      onStarted(job.id);
    });
  }
  return (
    <Paper withBorder p="md">
      <form onSubmit={submit} aria-label="Start a training job">
        <Stack>
          <Title order={2} size="h4">
            Start a training job
          </Title>
          <SimpleGrid cols={{ base: 1, sm: 2 }}>
            <TextInput
              label="Model name"
              description="The trained model's name: you call it by this id afterwards"
              value={modelName}
              onChange={(e) => setModelName(e.currentTarget.value)}
              required
            />
            <Select
              label="Base model"
              description="What to fine-tune: a catalog model (or a checkpoint id)"
              data={trainable.map((m) => ({ value: m.id, label: `${m.id} (${m.type})` }))}
              value={base}
              onChange={setBase}
              required
              searchable
            />
            <Select
              label="Dataset"
              description="A ready dataset version whose task heads the model learns"
              data={ready.map((d) => ({
                value: `${d.name}@${d.version}`,
                label: `${d.name} v${d.version} · ${d.row_count} rows · ${d.task_types.join(', ')}`,
              }))}
              value={dataset}
              onChange={setDataset}
              required
              nothingFoundMessage="No ready dataset: upload one first"
            />
            <Select
              label="Training type"
              description="LoRA trains small adapters (fast, small files); full updates every weight"
              data={['lora', 'full']}
              value={trainingType}
              onChange={(v) => setTrainingType((v as 'lora' | 'full') ?? 'lora')}
              allowDeselect={false}
            />
            <NumberInput
              label="Epochs"
              description={`Passes over the data (default ${chosen?.default_hyperparameters.nr_epochs ?? 'the model’s'})`}
              min={1}
              max={100}
              value={epochs}
              onChange={setEpochs}
            />
            <NumberInput
              label="Learning rate"
              description={`Step size (default ${chosen?.default_hyperparameters.learning_rate ?? 'the model’s'})`}
              min={0}
              max={1}
              step={0.00001}
              decimalScale={8}
              value={lr}
              onChange={setLr}
            />
          </SimpleGrid>
          <FormError error={error} />
          <Group>
            <Button type="submit" loading={busy}>
              Start training
            </Button>
          </Group>
        </Stack>
      </form>
    </Paper>
  );
}

export function TrainingPage() {
  const [status, setStatus] = useState<string | null>(null);
  const jobs = useLoad(
    () => must(api.GET('/core/training-jobs', { params: { query: status ? { status: status as never } : {} } })),
    [status],
  );
  const [open, setOpen] = useState<string>();
  const [deleting, setDeleting] = useState<Job>();
  return (
    <Stack>
      <Title order={1} size="h2">
        Training jobs
      </Title>
      <StartForm
        onStarted={(id) => {
          setOpen(id);
          jobs.reload();
        }}
      />
      {open && <JobDetail key={open} id={open} onChanged={jobs.reload} />}
      <Group>
        <Select
          label="Status"
          placeholder="Any"
          clearable
          data={['requested', 'running', 'complete', 'failed', 'stopped']}
          value={status}
          onChange={setStatus}
        />
      </Group>
      <Loadable
        state={jobs}
        label="Loading training jobs"
        isEmpty={(d) => d.data.length === 0}
        empty="No training jobs yet: start one above."
      >
        {(d) => (
          <DataTable label="Training jobs" minWidth={640} columns={['Model', 'Base', 'Status', 'Created', 'Actions']}>
            {d.data.map((j) => (
              <Table.Tr key={j.id}>
                <Table.Td>{j.model_name}</Table.Td>
                <Table.Td>{j.base_model}</Table.Td>
                <Table.Td>
                  <Badge variant="outline" color={statusColor(j.status)}>
                    {j.status}
                  </Badge>
                </Table.Td>
                <Table.Td>{fmtDate(j.created_at)}</Table.Td>
                <Table.Td>
                  <Group gap={4}>
                    <Button
                      size="xs"
                      variant="subtle"
                      onClick={() => setOpen(j.id)}
                      aria-label={`Open ${j.model_name}`}
                    >
                      Open
                    </Button>
                    <Button
                      size="xs"
                      variant="subtle"
                      color="red"
                      onClick={() => setDeleting(j)}
                      aria-label={`Delete ${j.model_name}`}
                    >
                      Delete
                    </Button>
                  </Group>
                </Table.Td>
              </Table.Tr>
            ))}
          </DataTable>
        )}
      </Loadable>
      <Modal
        opened={Boolean(deleting)}
        onClose={() => setDeleting(undefined)}
        title="Delete this training job?"
        closeButtonProps={{ 'aria-label': 'Cancel' }}
      >
        <Stack>
          <Text size="sm">
            “{deleting?.model_name}”, its logs, checkpoints and weights are deleted. A running job is stopped first.
          </Text>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setDeleting(undefined)}>
              Cancel
            </Button>
            <Button
              color="red"
              onClick={async () => {
                const id = deleting!.id;
                setDeleting(undefined);
                await api.DELETE('/core/training-jobs/{id}', { params: { path: { id } } });
                if (open === id) setOpen(undefined);
                jobs.reload();
              }}
            >
              Delete
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}

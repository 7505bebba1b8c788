import {
  Alert,
  Badge,
  Button,
  Checkbox,
  Code,
  Group,
  Paper,
  Select,
  SimpleGrid,
  Stack,
  Table,
  Text,
  Title,
} from '@mantine/core';
import { useEffect, useState, type FormEvent } from 'react';
import {
  CartesianGrid,
  Legend,
  Line,
  LineChart,
  ReferenceLine,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from 'recharts';
import { api, must } from '../api/client';
import type { components } from '../api/schema';
import { DataTable, Empty, fmtDate, FormError, Loadable, useAction, useLoad } from '../components/states';

type Evaluation = components['schemas']['Evaluation'];

/** The scorer's metrics (src/core/evaluation/scoring.ts `EvaluationMetrics`); the API types them as an open object. */
interface Breakdown {
  f1: number;
  precision: number;
  recall: number;
  support: number;
  tp: number;
  fp: number;
  fn: number;
}
interface ExampleItems {
  entities?: { text: string; label: string }[];
  labels?: string[];
  fields?: Record<string, string[]>;
  relations?: { relation: string; head: string; tail: string }[];
}
interface CurvePoint {
  threshold: number;
  f1: number;
  precision: number;
  recall: number;
}
/** scoring/calibration.ts `TypeCalibration`. */
interface TypeCalibration {
  best_threshold: number | null;
  f1: number;
  precision: number;
  recall: number;
  support: number;
  curve: CurvePoint[];
}
type Calibration = Partial<Record<(typeof breakdowns)[number][0], Record<string, TypeCalibration>>>;
interface Metrics {
  calibration?: Calibration;
  f1: number;
  precision: number;
  recall: number;
  per_entity?: Record<string, Breakdown>;
  per_label?: Record<string, Breakdown>;
  per_field?: Record<string, Breakdown>;
  per_relation?: Record<string, Breakdown>;
  confusion?: { labels: string[]; matrix: number[][] };
  examples?: { id?: string | number; text: string; gold: ExampleItems; predicted: ExampleItems }[];
  support: { rows: number };
}
const metricsOf = (e: Evaluation) => (e.metrics as Metrics | null) ?? undefined;

// dark enough for AA contrast as an outlined badge (the Training page's colours)
const statusColor: Record<Evaluation['status'], string> = {
  running: '#1864ab',
  complete: '#22672f',
  failed: '#b02525',
};
const pct = (n: number | undefined) => (n === undefined ? '—' : `${(n * 100).toFixed(1)}%`);
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));
const breakdowns = [
  ['per_entity', 'Entity type'],
  ['per_label', 'Label'],
  ['per_field', 'Field'],
  ['per_relation', 'Relation'],
] as const;

function RunForm({ onStarted }: { onStarted: (id: string) => void }) {
  const models = useLoad(() => must(api.GET('/base-models')));
  const jobs = useLoad(() => must(api.GET('/core/training-jobs')));
  const datasets = useLoad(() => must(api.GET('/core/datasets')));
  const [model, setModel] = useState<string | null>(null);
  const [dataset, setDataset] = useState<string | null>(null);
  const { busy, error, run } = useAction();
  // evaluations score extraction models: encoder catalog models (a baseline) and complete encoder jobs
  const choices = [
    {
      group: 'Trained models',
      items: (jobs.data?.data ?? [])
        .filter((j) => j.model_type === 'encoder' && j.status === 'complete')
        .map((j) => ({ value: j.id, label: `${j.model_name} (job ${j.id.slice(0, 8)})` })),
    },
    {
      group: 'Base models (baseline)',
      items: (models.data?.data ?? []).filter((m) => m.type === 'encoder').map((m) => ({ value: m.id, label: m.id })),
    },
  ].filter((g) => g.items.length > 0);
  const ready = datasets.data?.data.filter((d) => d.status === 'ready') ?? [];
  async function submit(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      const [name, version] = (dataset ?? '').split('@');
      const started = await must(
        api.POST('/core/evaluations', {
          body: {
            base_model: model ?? '',
            dataset_name: name!,
            ...(version ? { dataset_version: Number(version) } : {}),
          },
        }),
      );
      onStarted(started.id);
    });
  }
  return (
    <Paper withBorder p="md">
      <form onSubmit={submit} aria-label="Run an evaluation">
        <Stack>
          <Title order={2} size="h4">
            Run an evaluation
          </Title>
          <SimpleGrid cols={{ base: 1, sm: 2 }}>
            <Select
              label="Model"
              description="A trained encoder, or a catalog encoder as the baseline"
              data={choices}
              value={model}
              onChange={setModel}
              allowDeselect={false}
              required
              searchable
              nothingFoundMessage="No encoder model"
            />
            <Select
              label="Dataset"
              description="A ready, labelled dataset version: its gold answers are scored"
              data={ready.map((d) => ({
                value: `${d.name}@${d.version}`,
                label: `${d.name} v${d.version} · ${d.row_count} rows · ${d.task_types.join(', ')}`,
              }))}
              value={dataset}
              onChange={setDataset}
              allowDeselect={false}
              required
              nothingFoundMessage="No ready dataset: upload one first"
            />
          </SimpleGrid>
          <Group>
            <Button type="submit" loading={busy} disabled={!model || !dataset}>
              Run evaluation
            </Button>
          </Group>
          <FormError error={error} />
        </Stack>
      </form>
    </Paper>
  );
}

/** Per type: the F1 / precision / recall curve over thresholds and the threshold that maximises F1 (a deployment may opt in to it). */
function CalibrationView({ calibration }: { calibration: Calibration }) {
  const types = breakdowns.flatMap(([key, label]) =>
    Object.entries(calibration[key] ?? {}).map(([name, c]) => ({ id: `${key}:${name}`, label, name, c })),
  );
  const [picked, setPicked] = useState<string | null>(types[0]?.id ?? null);
  const shown = types.find((t) => t.id === picked) ?? types[0];
  if (!shown) return null;
  const at = (c: TypeCalibration, t: number) => c.curve.find((p) => Math.abs(p.threshold - t) < 1e-9)?.f1;
  const best = shown.c.best_threshold;
  return (
    <Stack gap={4}>
      <Title order={3} size="h5">
        Thresholds
      </Title>
      <Text size="sm">
        The threshold that maximises each type&apos;s F1 on this dataset. Deploy the job with{' '}
        <Code>thresholds: &quot;calibrated&quot;</Code> to use them for requests that send no threshold.
      </Text>
      <Table.ScrollContainer minWidth={520}>
        <Table striped aria-label="Best threshold by type" data-testid="calibration-table">
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Type</Table.Th>
              <Table.Th>Best threshold</Table.Th>
              <Table.Th>F1 there</Table.Th>
              <Table.Th>F1 at 0.5</Table.Th>
              <Table.Th>Support</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {types.map((t) => (
              <Table.Tr key={t.id}>
                <Table.Td>
                  {t.label.toLowerCase()} {t.name}
                </Table.Td>
                <Table.Td>{t.c.best_threshold === null ? '— (keeps 0.5)' : t.c.best_threshold.toFixed(2)}</Table.Td>
                <Table.Td>{pct(t.c.f1)}</Table.Td>
                <Table.Td>{pct(at(t.c, 0.5))}</Table.Td>
                <Table.Td>{t.c.support}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      <Select
        label="Curve of"
        data={types.map((t) => ({ value: t.id, label: `${t.label.toLowerCase()} ${t.name}` }))}
        value={shown.id}
        onChange={setPicked}
        allowDeselect={false}
        searchable
        maw={360}
      />
      <div
        style={{ height: 240 }}
        role="img"
        data-testid="calibration-curve"
        aria-label={`F1, precision and recall of ${shown.label.toLowerCase()} ${shown.name} by threshold; best threshold ${best === null ? 'none' : best.toFixed(2)} with F1 ${pct(shown.c.f1)}`}
      >
        <ResponsiveContainer>
          <LineChart data={shown.c.curve}>
            <CartesianGrid strokeDasharray="3 3" />
            <XAxis dataKey="threshold" type="number" domain={[0, 1]} fontSize={12} />
            <YAxis domain={[0, 1]} fontSize={12} />
            <Tooltip />
            <Legend />
            {best !== null && <ReferenceLine x={best} stroke="#22672f" strokeDasharray="4 2" />}
            <Line dataKey="f1" name="F1" stroke="#1971c2" strokeWidth={2} dot={false} isAnimationActive={false} />
            <Line dataKey="precision" name="Precision" stroke="#862e9c" dot={false} isAnimationActive={false} />
            <Line dataKey="recall" name="Recall" stroke="#c2410c" dot={false} isAnimationActive={false} />
          </LineChart>
        </ResponsiveContainer>
      </div>
    </Stack>
  );
}

function BreakdownTable({ name, label, rows }: { name: string; label: string; rows: Record<string, Breakdown> }) {
  return (
    <Table.ScrollContainer minWidth={520}>
      <Table striped aria-label={name}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>{label}</Table.Th>
            <Table.Th>F1</Table.Th>
            <Table.Th>Precision</Table.Th>
            <Table.Th>Recall</Table.Th>
            <Table.Th>Support</Table.Th>
            <Table.Th>TP / FP / FN</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {Object.entries(rows).map(([k, b]) => (
            <Table.Tr key={k}>
              <Table.Td>{k}</Table.Td>
              <Table.Td>{pct(b.f1)}</Table.Td>
              <Table.Td>{pct(b.precision)}</Table.Td>
              <Table.Td>{pct(b.recall)}</Table.Td>
              <Table.Td>{b.support}</Table.Td>
              <Table.Td>
                {b.tp} / {b.fp} / {b.fn}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

/**
 * Shade of one cell: its share of the gold row (rows are what the model should have said). Two
 * bands, so the number stays readable (WCAG AA contrast): light blues with dark text below half,
 * dark blues with white text from half up.
 */
function cellColours(share: number): { background: string; color: string } {
  if (share < 0.5) return { background: `hsl(210 80% ${Math.round(97 - share * 2 * 25)}%)`, color: '#1a1b1e' };
  return { background: `hsl(210 80% ${Math.round(38 - (share - 0.5) * 2 * 16)}%)`, color: '#ffffff' };
}

/** The confusion matrix as a heat map: a real table (gold rows, predicted columns) that screen readers can walk. */
export function ConfusionHeatMap({ labels, matrix }: { labels: string[]; matrix: number[][] }) {
  const golds = labels.filter((_, i) => (matrix[i] ?? []).some((n) => n > 0) || labels[i] !== '(none)');
  return (
    <Stack gap={4}>
      <Table.ScrollContainer minWidth={120 + labels.length * 72}>
        <table
          data-testid="confusion-matrix"
          aria-label="Confusion matrix: gold labels in rows, predicted labels in columns"
          style={{ borderCollapse: 'collapse', fontSize: 14 }}
        >
          <thead>
            <tr>
              <th scope="col" style={{ padding: 6, textAlign: 'left' }}>
                Gold ↓ / predicted →
              </th>
              {labels.map((l) => (
                <th key={l} scope="col" style={{ padding: 6, minWidth: 64 }}>
                  {l}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {golds.map((gold) => {
              const i = labels.indexOf(gold);
              const row = matrix[i] ?? [];
              const total = row.reduce((a, b) => a + b, 0);
              return (
                <tr key={gold}>
                  <th scope="row" style={{ padding: 6, textAlign: 'left' }}>
                    {gold}
                  </th>
                  {labels.map((pred, j) => {
                    const n = row[j] ?? 0;
                    const share = total ? n / total : 0;
                    return (
                      <td
                        key={pred}
                        title={`gold ${gold}, predicted ${pred}: ${n} of ${total} rows`}
                        data-count={n}
                        style={{
                          ...cellColours(share),
                          padding: 6,
                          textAlign: 'center',
                          minWidth: 64,
                          border: i === j ? '2px solid #1a1b1e' : '1px solid #dee2e6',
                          fontWeight: i === j ? 700 : 400,
                        }}
                      >
                        {n}
                      </td>
                    );
                  })}
                </tr>
              );
            })}
          </tbody>
        </table>
      </Table.ScrollContainer>
      <Text size="xs" c="dimmed">
        Darker = a larger share of that gold label&apos;s rows; the outlined diagonal is correct; &quot;(none)&quot; =
        nothing predicted.
      </Text>
    </Stack>
  );
}

const itemsText = (x: ExampleItems) =>
  [
    ...(x.entities ?? []).map((e) => `${e.label}: ${e.text}`),
    ...(x.labels ?? []),
    ...Object.entries(x.fields ?? {}).map(([f, v]) => `${f} = ${v.join(', ')}`),
    ...(x.relations ?? []).map((r) => `${r.head} —${r.relation}→ ${r.tail}`),
  ].join('; ') || '—';

function Detail({ id, onChanged }: { id: string; onChanged: () => void }) {
  const ev = useLoad(() => must(api.GET('/core/evaluations/{id}', { params: { path: { id } } })), [id]);
  const running = ev.data?.status === 'running';
  // a running evaluation: read it again until it finishes, then refresh the list
  // biome-ignore lint/correctness/useExhaustiveDependencies: one wait per read of the evaluation (ev.data); `running` comes from it and ev.reload is new each render
  useEffect(() => {
    if (!running) return;
    let live = true;
    void wait(1000).then(() => live && ev.reload());
    return () => {
      live = false;
    };
  }, [ev.data]);
  const status = ev.data?.status;
  // biome-ignore lint/correctness/useExhaustiveDependencies: the list is told once per change of status; onChanged is the parent's, new each render
  useEffect(() => {
    if (status && status !== 'running') onChanged();
  }, [status]);
  return (
    <Paper withBorder p="md" component="section" aria-label={`Evaluation ${id}`}>
      <Loadable state={ev} label="Loading the evaluation">
        {(e) => {
          const m = metricsOf(e);
          return (
            <Stack gap="sm">
              <Group>
                <Title order={2} size="h4">
                  {e.base_model} on {e.dataset_name} v{e.dataset_version}
                </Title>
                <Badge variant="outline" color={statusColor[e.status]} data-testid="evaluation-status">
                  {e.status}
                </Badge>
              </Group>
              <Text size="sm">
                Evaluation <Code>{e.id}</Code> · started {fmtDate(e.created_at)} · finished {fmtDate(e.finished_at)}
              </Text>
              {e.status === 'running' && <Text size="sm">Scoring the dataset…</Text>}
              {e.error && (
                <Alert color="red" role="alert" title="The evaluation failed">
                  {e.error}
                </Alert>
              )}
              {m && (
                <>
                  <SimpleGrid cols={{ base: 2, sm: 4 }}>
                    {(
                      [
                        ['Micro F1', pct(m.f1)],
                        ['Precision', pct(m.precision)],
                        ['Recall', pct(m.recall)],
                        ['Rows scored', String(m.support.rows)],
                      ] as const
                    ).map(([k, v]) => (
                      <Paper key={k} withBorder p="xs" data-testid={`stat-${k}`}>
                        <Text size="xs" c="dimmed">
                          {k}
                        </Text>
                        <Text fw={700} size="lg">
                          {v}
                        </Text>
                      </Paper>
                    ))}
                  </SimpleGrid>
                  {breakdowns.map(([key, label]) =>
                    m[key] && Object.keys(m[key]).length > 0 ? (
                      <Stack key={key} gap={4}>
                        <Title order={3} size="h5">
                          By {label.toLowerCase()}
                        </Title>
                        <BreakdownTable name={`Metrics by ${label.toLowerCase()}`} label={label} rows={m[key]} />
                      </Stack>
                    ) : null,
                  )}
                  {m.calibration && <CalibrationView calibration={m.calibration} />}
                  {m.confusion && m.confusion.labels.length > 0 && (
                    <Stack gap={4}>
                      <Title order={3} size="h5">
                        Confusion matrix
                      </Title>
                      <ConfusionHeatMap labels={m.confusion.labels} matrix={m.confusion.matrix} />
                    </Stack>
                  )}
                  <Title order={3} size="h5">
                    Misclassified examples
                  </Title>
                  {m.examples && m.examples.length > 0 ? (
                    <Table.ScrollContainer minWidth={600}>
                      <Table aria-label="Misclassified examples" data-testid="evaluation-examples">
                        <Table.Thead>
                          <Table.Tr>
                            <Table.Th>Row</Table.Th>
                            <Table.Th>Text</Table.Th>
                            <Table.Th>Missed (gold)</Table.Th>
                            <Table.Th>Wrong (predicted)</Table.Th>
                          </Table.Tr>
                        </Table.Thead>
                        <Table.Tbody>
                          {m.examples.map((x, i) => (
                            // biome-ignore lint/suspicious/noArrayIndexKey: a read-only list from one response, rendered whole; it never reorders
                            <Table.Tr key={i}>
                              <Table.Td>{x.id ?? '—'}</Table.Td>
                              <Table.Td>{x.text}</Table.Td>
                              <Table.Td>{itemsText(x.gold)}</Table.Td>
                              <Table.Td>{itemsText(x.predicted)}</Table.Td>
                            </Table.Tr>
                          ))}
                        </Table.Tbody>
                      </Table>
                    </Table.ScrollContainer>
                  ) : (
                    <Empty>No mistakes on the scored rows.</Empty>
                  )}
                </>
              )}
            </Stack>
          );
        }}
      </Loadable>
    </Paper>
  );
}

/** Two evaluations side by side: micro metrics and every per-type F1, with the difference. */
function Compare({ a, b }: { a: Evaluation; b: Evaluation }) {
  const ma = metricsOf(a);
  const mb = metricsOf(b);
  const rows: [string, number | undefined, number | undefined][] = [
    ['Micro F1', ma?.f1, mb?.f1],
    ['Precision', ma?.precision, mb?.precision],
    ['Recall', ma?.recall, mb?.recall],
  ];
  for (const [key, label] of breakdowns) {
    const names = [...new Set([...Object.keys(ma?.[key] ?? {}), ...Object.keys(mb?.[key] ?? {})])];
    for (const n of names) rows.push([`F1 · ${label.toLowerCase()} ${n}`, ma?.[key]?.[n]?.f1, mb?.[key]?.[n]?.f1]);
  }
  const title = (e: Evaluation) => `${e.base_model} on ${e.dataset_name} v${e.dataset_version}`;
  return (
    <Paper withBorder p="md" component="section" aria-label="Comparison">
      <Stack gap="xs">
        <Title order={2} size="h4">
          Compare
        </Title>
        <Table.ScrollContainer minWidth={520}>
          <Table striped aria-label="Evaluation comparison" data-testid="evaluation-compare">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Metric</Table.Th>
                <Table.Th>A: {title(a)}</Table.Th>
                <Table.Th>B: {title(b)}</Table.Th>
                <Table.Th>B − A</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map(([k, x, y]) => {
                const d = x !== undefined && y !== undefined ? (y - x) * 100 : undefined;
                return (
                  <Table.Tr key={k}>
                    <Table.Td>{k}</Table.Td>
                    <Table.Td>{pct(x)}</Table.Td>
                    <Table.Td>{pct(y)}</Table.Td>
                    <Table.Td c={d === undefined || Math.abs(d) < 0.05 ? undefined : d > 0 ? 'green.9' : 'red.9'}>
                      {d === undefined ? '—' : `${d > 0 ? '+' : ''}${d.toFixed(1)} pts`}
                    </Table.Td>
                  </Table.Tr>
                );
              })}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      </Stack>
    </Paper>
  );
}

export function EvaluationsPage() {
  const list = useLoad(() => must(api.GET('/core/evaluations')));
  const [open, setOpen] = useState<string>();
  const [picked, setPicked] = useState<string[]>([]);
  const all = list.data?.data ?? [];
  const compared = picked.map((id) => all.find((e) => e.id === id)).filter((e): e is Evaluation => Boolean(e));
  const toggle = (id: string, on: boolean) =>
    setPicked((p) => (on ? [...p.filter((x) => x !== id), id].slice(-2) : p.filter((x) => x !== id)));
  return (
    <Stack>
      <Title order={1} size="h2">
        Evaluations
      </Title>
      <RunForm
        onStarted={(id) => {
          setOpen(id);
          list.reload();
        }}
      />
      {open && <Detail key={open} id={open} onChanged={list.reload} />}
      {compared.length === 2 && <Compare a={compared[0]!} b={compared[1]!} />}
      <Loadable
        state={list}
        label="Loading evaluations"
        isEmpty={(d) => d.data.length === 0}
        empty="No evaluations yet: run one above."
      >
        {(d) => (
          <Stack gap={4}>
            <Text size="sm">Tick two evaluations to compare them side by side.</Text>
            <DataTable
              label="Evaluations"
              minWidth={720}
              hover
              columns={['Compare', 'Model', 'Dataset', 'Status', 'F1', 'Started', 'Details']}
            >
              {d.data.map((e) => (
                <Table.Tr key={e.id}>
                  <Table.Td>
                    <Checkbox
                      aria-label={`Compare evaluation of ${e.base_model} on ${e.dataset_name} v${e.dataset_version} (${e.id.slice(0, 8)})`}
                      checked={picked.includes(e.id)}
                      onChange={(x) => toggle(e.id, x.currentTarget.checked)}
                      disabled={e.status !== 'complete'}
                    />
                  </Table.Td>
                  <Table.Td>{e.base_model}</Table.Td>
                  <Table.Td>
                    {e.dataset_name} v{e.dataset_version}
                  </Table.Td>
                  <Table.Td>
                    <Badge variant="outline" color={statusColor[e.status]}>
                      {e.status}
                    </Badge>
                  </Table.Td>
                  <Table.Td>{pct(metricsOf(e)?.f1)}</Table.Td>
                  <Table.Td>{fmtDate(e.created_at)}</Table.Td>
                  <Table.Td>
                    <Button
                      size="xs"
                      variant="subtle"
                      onClick={() => setOpen(e.id)}
                      aria-label={`Open evaluation ${e.id.slice(0, 8)}`}
                    >
                      Open
                    </Button>
                  </Table.Td>
                </Table.Tr>
              ))}
            </DataTable>
          </Stack>
        )}
      </Loadable>
    </Stack>
  );
}

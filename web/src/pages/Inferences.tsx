import {
  Badge,
  Button,
  Code,
  Group,
  Paper,
  Select,
  SimpleGrid,
  Stack,
  Table,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { useDebouncedValue } from '@mantine/hooks';
import { useState } from 'react';
import { api, must } from '../api/client';
import type { components } from '../api/schema';
import { DataTable, fmtDate, FormError, Loadable, useLoad } from '../components/states';

type Inference = components['schemas']['InferenceRecord'];
type Task = 'ner' | 'classification' | 'structures' | 'relations' | 'generate';
const PAGE = 25;
const json = (v: unknown) => JSON.stringify(v, null, 2);

function FeedbackBadge({ f }: { f: Inference['feedback'] }) {
  if (!f) return <Text size="sm">—</Text>;
  return (
    <Badge variant="outline" color={f.verdict === 'correct' ? '#22672f' : '#9c3d00'}>
      {f.verdict}
    </Badge>
  );
}

type Label = string | { label?: string };

/**
 * The output in the shape `corrected_output` takes, to edit from: its heads only, spans without their
 * scores, classification labels by name (a list for multi-label tasks) — the server refuses `score`.
 */
export function correctionTemplate(inf: Inference): unknown {
  const out = inf.output;
  if (!out || typeof out !== 'object' || Array.isArray(out)) return out; // a batch: edited as it is
  const o = out as Record<string, unknown>;
  const schema = inf.input.schema as { classifications?: { task: string; multi_label?: boolean }[] } | undefined;
  const multi = new Map((schema?.classifications ?? []).map((c) => [c.task, c.multi_label === true]));
  const t: Record<string, unknown> = {};
  if (Array.isArray(o.entities)) {
    t.entities = (o.entities as { text: string; label: string; start: number; end: number }[]).map(
      ({ text, label, start, end }) => ({ text, label, start, end }),
    );
  }
  if (o.classifications && typeof o.classifications === 'object') {
    t.classifications = Object.fromEntries(
      Object.entries(o.classifications as Record<string, Label | Label[]>).map(([task, v]) => {
        const labels = (Array.isArray(v) ? v : [v]).map((l) => (typeof l === 'string' ? l : (l.label ?? '')));
        return [task, multi.get(task) ? labels : (labels[0] ?? '')];
      }),
    );
  }
  for (const key of ['structures', 'relations', 'completion']) if (key in o) t[key] = o[key];
  return t;
}

/** Correct, or incorrect with the corrected output (the server checks it has the output's shape). */
function Feedback({ inf, onSaved }: { inf: Inference; onSaved: () => void }) {
  const [correcting, setCorrecting] = useState(false);
  const [corrected, setCorrected] = useState(() => json(correctionTemplate(inf)));
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  async function send(verdict: 'correct' | 'incorrect') {
    setError(undefined);
    let body: { verdict: 'correct' | 'incorrect'; corrected_output?: Record<string, unknown> } = { verdict };
    if (verdict === 'incorrect') {
      try {
        body = { verdict, corrected_output: JSON.parse(corrected) as Record<string, unknown> };
      } catch (err) {
        setError(`The corrected output is not valid JSON: ${(err as Error).message}`);
        return;
      }
    }
    setBusy(true);
    try {
      await must(api.POST('/inferences/{id}/feedback', { params: { path: { id: inf.inference_id } }, body }));
      setCorrecting(false);
      onSaved();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(false);
    }
  }
  return (
    <Stack gap="xs">
      <Title order={3} size="h5">
        Feedback
      </Title>
      {inf.feedback ? (
        <Text size="sm" data-testid="feedback-saved">
          Marked <FeedbackBadge f={inf.feedback} /> on {fmtDate(inf.feedback.created_at)}. You can change it below.
        </Text>
      ) : (
        <Text size="sm">
          Was this output right? Feedback (and corrections) become training data for the project&apos;s next adaptive
          cycle.
        </Text>
      )}
      <Group>
        <Button variant="default" onClick={() => send('correct')} loading={busy && !correcting}>
          Mark correct
        </Button>
        <Button variant="default" onClick={() => setCorrecting((c) => !c)} aria-expanded={correcting}>
          Mark incorrect…
        </Button>
      </Group>
      {correcting && (
        <Stack gap="xs">
          <Textarea
            label="Corrected output (JSON)"
            description="Edit the output to what it should have been: same heads as the original"
            autosize
            minRows={6}
            maxRows={20}
            value={corrected}
            onChange={(e) => setCorrected(e.currentTarget.value)}
            styles={{ input: { fontFamily: 'monospace' } }}
          />
          <Group>
            <Button onClick={() => send('incorrect')} loading={busy}>
              Save correction
            </Button>
          </Group>
        </Stack>
      )}
      <FormError error={error} />
    </Stack>
  );
}

function Detail({ id, onChanged }: { id: string; onChanged: () => void }) {
  const inf = useLoad(() => must(api.GET('/inferences/{id}', { params: { path: { id } } })), [id]);
  return (
    <Paper withBorder p="md" component="section" aria-label={`Inference ${id}`}>
      <Loadable state={inf} label="Loading the inference">
        {(i) => (
          <Stack gap="sm">
            <Group>
              <Title order={2} size="h4">
                {i.model_id} · {i.endpoint}
              </Title>
              <Badge variant="light">{i.type}</Badge>
            </Group>
            <Text size="sm">
              <Code>{i.inference_id}</Code> · {fmtDate(i.created_at)} · {i.latency_ms} ms · tasks{' '}
              {i.tasks.join(', ') || '—'}
              {i.project_id ? ` · project ${i.project_id}` : ''}
              {i.training_job_id ? ` · job ${i.training_job_id}` : ''}
            </Text>
            <SimpleGrid cols={{ base: 1, md: 2 }}>
              <Stack gap={4}>
                <Title order={3} size="h5">
                  Input
                </Title>
                <Code block tabIndex={0} aria-label="Input JSON" style={{ maxHeight: 320, overflow: 'auto' }}>
                  {json(i.input)}
                </Code>
              </Stack>
              <Stack gap={4}>
                <Title order={3} size="h5">
                  Output
                </Title>
                <Code
                  block
                  tabIndex={0}
                  aria-label="Output JSON"
                  data-testid="inference-output"
                  style={{ maxHeight: 320, overflow: 'auto' }}
                >
                  {json(i.output)}
                </Code>
              </Stack>
            </SimpleGrid>
            <Feedback
              key={i.feedback?.created_at ?? 'none'}
              inf={i}
              onSaved={() => {
                inf.reload();
                onChanged();
              }}
            />
          </Stack>
        )}
      </Loadable>
    </Paper>
  );
}

export function InferencesPage() {
  const [model, setModel] = useState('');
  const [task, setTask] = useState<string | null>(null);
  const [project, setProject] = useState('');
  const [job, setJob] = useState('');
  const [offset, setOffset] = useState(0);
  const [open, setOpen] = useState<string>();
  const query = {
    limit: PAGE,
    offset,
    ...(model.trim() ? { model_id: model.trim() } : {}),
    ...(task ? { task: task as Task } : {}),
    ...(project.trim() ? { project_id: project.trim() } : {}),
    ...(job.trim() ? { training_job_id: job.trim() } : {}),
  };
  // typed filters are read 300 ms after the last keystroke, not once per key
  const [debounced] = useDebouncedValue(JSON.stringify(query), 300);
  const list = useLoad(
    () => must(api.GET('/inferences', { params: { query: JSON.parse(debounced) as typeof query } })),
    [debounced],
  );
  const filter =
    <T,>(set: (v: T) => void) =>
    (v: T) => {
      set(v);
      setOffset(0);
    };
  const filtered = Boolean(model.trim() || task || project.trim() || job.trim());
  return (
    <Stack>
      <Title order={1} size="h2">
        Inference history
      </Title>
      <Paper withBorder p="md">
        <SimpleGrid cols={{ base: 1, sm: 2, lg: 4 }} role="group" aria-label="Filters">
          <TextInput
            label="Model id"
            placeholder="Any"
            value={model}
            onChange={(e) => filter(setModel)(e.currentTarget.value)}
          />
          <Select
            label="Task"
            placeholder="Any"
            clearable
            data={['ner', 'classification', 'structures', 'relations', 'generate']}
            value={task}
            onChange={filter(setTask)}
          />
          <TextInput
            label="Project id"
            placeholder="Any"
            value={project}
            onChange={(e) => filter(setProject)(e.currentTarget.value)}
          />
          <TextInput
            label="Training job id"
            placeholder="Any"
            value={job}
            onChange={(e) => filter(setJob)(e.currentTarget.value)}
          />
        </SimpleGrid>
      </Paper>
      {open && <Detail key={open} id={open} onChanged={list.reload} />}
      <Loadable
        state={list}
        label="Loading inferences"
        isEmpty={(d) => d.data.length === 0 && offset === 0}
        empty={
          filtered
            ? 'No inference matches these filters.'
            : 'No inferences stored yet: run the playground or call the API (inferences are kept unless a request sets store: false).'
        }
      >
        {(d) => (
          <Stack gap="xs">
            <DataTable
              label="Inferences"
              minWidth={760}
              hover
              columns={['When', 'Model', 'Endpoint', 'Tasks', 'Latency', 'Feedback', 'Details']}
            >
              {d.data.map((i) => (
                <Table.Tr key={i.inference_id}>
                  <Table.Td>{fmtDate(i.created_at)}</Table.Td>
                  <Table.Td>{i.model_id}</Table.Td>
                  <Table.Td>{i.endpoint}</Table.Td>
                  <Table.Td>{i.tasks.join(', ') || '—'}</Table.Td>
                  <Table.Td>{i.latency_ms} ms</Table.Td>
                  <Table.Td>
                    <FeedbackBadge f={i.feedback} />
                  </Table.Td>
                  <Table.Td>
                    <Button
                      size="xs"
                      variant="subtle"
                      onClick={() => setOpen(i.inference_id)}
                      aria-label={`Open inference ${i.inference_id.slice(0, 8)}`}
                    >
                      Open
                    </Button>
                  </Table.Td>
                </Table.Tr>
              ))}
            </DataTable>
            <Group justify="space-between">
              <Text size="sm">
                {d.data.length ? `${offset + 1}–${offset + d.data.length}` : 'None'} {d.has_more ? '(more after)' : ''}
              </Text>
              <Group>
                <Button
                  size="xs"
                  variant="default"
                  disabled={offset === 0}
                  onClick={() => setOffset(Math.max(0, offset - PAGE))}
                >
                  Newer
                </Button>
                <Button size="xs" variant="default" disabled={!d.has_more} onClick={() => setOffset(offset + PAGE)}>
                  Older
                </Button>
              </Group>
            </Group>
          </Stack>
        )}
      </Loadable>
    </Stack>
  );
}

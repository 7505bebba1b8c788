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
  TextInput,
  Title,
} from '@mantine/core';
import { useEffect, useState, type FormEvent } from 'react';
import { api, must } from '../api/client';
import type { components } from '../api/schema';
import { DataTable, Empty, fmtDate, FormError, Loadable, useAction, useLoad } from '../components/states';
import { CycleComparison } from './projects/Comparison';
import { ReviewQueue } from './projects/Review';

type Project = components['schemas']['Project'];
type Cycle = components['schemas']['AdaptiveCycle'];
type Job = components['schemas']['TrainingJob'];

const actionColor = { promote: '#22672f', rollback: '#9c3d00', clear: '#495057' } as const;
const cycleColor: Record<Cycle['status'], string> = {
  running: '#1864ab',
  offered: '#6741d9',
  promoted: '#22672f',
  skipped: '#495057',
  failed: '#b02525',
};
const pct = (n: number) => `${(n * 100).toFixed(1)}%`;

/** A training job by its model name when this team has it, else its id. */
const jobName = (jobs: Job[], id: string | null | undefined) => {
  if (!id) return '—';
  const j = jobs.find((x) => x.id === id);
  return j ? `${j.model_name} (${id.slice(0, 8)})` : id;
};

function CreateForm({ onCreated }: { onCreated: (p: Project) => void }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const { busy, error, run } = useAction();
  async function submit(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      const p = await must(api.POST('/projects', { body: { name, ...(description ? { description } : {}) } }));
      setName('');
      setDescription('');
      onCreated(p);
    });
  }
  return (
    <Paper withBorder p="md">
      <form onSubmit={submit} aria-label="Create a project">
        <Stack>
          <Title order={2} size="h4">
            Create a project
          </Title>
          <SimpleGrid cols={{ base: 1, sm: 2 }}>
            <TextInput
              label="Project name"
              description="A stable name: callers use the project id as the model id, whatever model it serves"
              value={name}
              onChange={(e) => setName(e.currentTarget.value)}
              required
            />
            <TextInput
              label="Description"
              description="Optional"
              value={description}
              onChange={(e) => setDescription(e.currentTarget.value)}
            />
          </SimpleGrid>
          <Group>
            <Button type="submit" loading={busy} disabled={!name.trim()}>
              Create project
            </Button>
          </Group>
          <FormError error={error} />
        </Stack>
      </form>
    </Paper>
  );
}

function Deployments({ project, jobs, onChanged }: { project: Project; jobs: Job[]; onChanged: () => void }) {
  const history = useLoad(
    () => must(api.GET('/projects/{id}/deployments', { params: { path: { id: project.id } } })),
    [project.id, project.active_training_job_id],
  );
  const [job, setJob] = useState<string | null>(null);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState<string>();
  const complete = jobs.filter((j) => j.status === 'complete');
  async function act(what: string, call: () => Promise<unknown>) {
    setBusy(what);
    setError(undefined);
    try {
      await call();
      setJob(null);
      onChanged();
      history.reload();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(undefined);
    }
  }
  const promote = (e: FormEvent) => {
    e.preventDefault();
    void act('promote', () =>
      must(
        api.POST('/projects/{id}/deployments', {
          params: { path: { id: project.id } },
          body: { training_job_id: job ?? '' },
        }),
      ),
    );
  };
  const rollback = (deploymentId?: string) =>
    act(deploymentId ?? 'rollback', () =>
      must(
        api.POST('/projects/{id}/rollback', {
          params: { path: { id: project.id } },
          body: deploymentId ? { deployment_id: deploymentId } : {},
        }),
      ),
    );
  return (
    <Stack gap="sm">
      <Title order={3} size="h5">
        Deployments
      </Title>
      <Text size="sm" data-testid="current-model">
        Serving: <strong>{jobName(jobs, project.active_training_job_id)}</strong>
      </Text>
      <form onSubmit={promote} aria-label="Promote a model">
        <Group align="flex-end">
          <Select
            label="Promote a trained model"
            description="A complete training job; the one it replaces stays deployed, so a rollback is instant"
            data={complete.map((j) => ({
              value: j.id,
              label: `${j.model_name} (${j.model_type}, ${j.id.slice(0, 8)})`,
            }))}
            value={job}
            onChange={setJob}
            allowDeselect={false}
            searchable
            nothingFoundMessage="No complete training job"
            style={{ flex: 1, minWidth: 240 }}
          />
          <Button type="submit" disabled={!job} loading={busy === 'promote'}>
            Promote
          </Button>
          <Button
            variant="default"
            onClick={() => rollback()}
            disabled={!project.active_training_job_id}
            loading={busy === 'rollback'}
          >
            Roll back to the previous model
          </Button>
        </Group>
      </form>
      <FormError error={error} />
      <Loadable
        state={history}
        label="Loading the deployment history"
        isEmpty={(d) => d.data.length === 0}
        empty="Nothing deployed yet: promote a trained model."
      >
        {(d) => (
          <Table.ScrollContainer minWidth={640}>
            <Table striped aria-label="Deployment history">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>When</Table.Th>
                  <Table.Th style={{ minWidth: 110 }}>Action</Table.Th>
                  <Table.Th>Model</Table.Th>
                  <Table.Th>Replaced</Table.Th>
                  <Table.Th>Roll back</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {d.data.map((dep) => (
                  <Table.Tr key={dep.id}>
                    <Table.Td>{fmtDate(dep.created_at)}</Table.Td>
                    <Table.Td>
                      <Badge variant="outline" color={actionColor[dep.action]}>
                        {dep.action}
                      </Badge>
                    </Table.Td>
                    <Table.Td>{jobName(jobs, dep.training_job_id)}</Table.Td>
                    <Table.Td>{jobName(jobs, dep.previous_training_job_id)}</Table.Td>
                    <Table.Td>
                      {dep.training_job_id && dep.training_job_id !== project.active_training_job_id ? (
                        <Button
                          size="xs"
                          variant="subtle"
                          onClick={() => rollback(dep.id)}
                          loading={busy === dep.id}
                          aria-label={`Roll back to ${jobName(jobs, dep.training_job_id)} (deployed ${fmtDate(dep.created_at)})`}
                        >
                          Roll back to this
                        </Button>
                      ) : (
                        '—'
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Loadable>
    </Stack>
  );
}

function Cycles({ project, jobs, onChanged }: { project: Project; jobs: Job[]; onChanged: () => void }) {
  const cycles = useLoad(
    () => must(api.GET('/projects/{id}/adaptive-cycles', { params: { path: { id: project.id } } })),
    [project.id],
  );
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState<string>();
  async function act(what: string, call: () => Promise<unknown>) {
    setBusy(what);
    setError(undefined);
    try {
      await call();
      cycles.reload();
      onChanged();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(undefined);
    }
  }
  const running = cycles.data?.data.some((c) => c.status === 'running') ?? false;
  const [wasRunning, setWasRunning] = useState(false);
  // biome-ignore lint/correctness/useExhaustiveDependencies: runs when a cycle starts or stops running; the callbacks are new each render and the poll needs no restart for them
  useEffect(() => {
    if (running !== wasRunning) setWasRunning(running);
    if (wasRunning && !running) onChanged(); // a finished cycle made a candidate job: names come from the job list
    if (!running) return;
    const timer = setInterval(cycles.reload, 3000); // a running cycle moves through its stages on the server
    return () => clearInterval(timer);
  }, [running]);
  const promote = (c: Cycle) =>
    act(c.id, () =>
      must(
        api.POST('/projects/{id}/adaptive-cycles/{cycle_id}/promote', {
          params: { path: { id: project.id, cycle_id: c.id } },
        }),
      ),
    );
  const compared = cycles.data?.data.find((c) => c.comparison);
  return (
    <Stack gap="sm">
      <Group justify="space-between">
        <Title order={3} size="h5">
          Adaptive cycles
        </Title>
        <Button
          size="xs"
          variant="default"
          loading={busy === 'start'}
          onClick={() =>
            act('start', () =>
              must(api.POST('/projects/{id}/adaptive-cycles', { params: { path: { id: project.id } } })),
            )
          }
        >
          Start a cycle
        </Button>
      </Group>
      <Text size="sm">
        A cycle turns the served encoder&apos;s own traffic into training data (feedback is gold; confident outputs are
        replayed), trains a candidate, and scores it against the current model on the same held-out traces. Nothing is
        promoted without you.
      </Text>
      <FormError error={error} />
      <Loadable
        state={cycles}
        label="Loading adaptive cycles"
        isEmpty={(d) => d.data.length === 0}
        empty="No adaptive cycles yet."
      >
        {(d) => (
          <Table.ScrollContainer minWidth={900}>
            <Table striped aria-label="Adaptive cycles">
              <Table.Thead>
                <Table.Tr>
                  <Table.Th>Started</Table.Th>
                  <Table.Th style={{ minWidth: 110 }}>Status</Table.Th>
                  <Table.Th>Stage</Table.Th>
                  <Table.Th>Candidate</Table.Th>
                  <Table.Th>F1 candidate / current</Table.Th>
                  <Table.Th style={{ minWidth: 260 }}>Note</Table.Th>
                  <Table.Th>Promote</Table.Th>
                </Table.Tr>
              </Table.Thead>
              <Table.Tbody>
                {d.data.map((c) => (
                  <Table.Tr key={c.id}>
                    <Table.Td>{fmtDate(c.created_at)}</Table.Td>
                    <Table.Td>
                      <Badge variant="outline" color={cycleColor[c.status]}>
                        {c.status}
                      </Badge>
                    </Table.Td>
                    <Table.Td>{c.stage}</Table.Td>
                    <Table.Td>{jobName(jobs, c.candidate_training_job_id)}</Table.Td>
                    <Table.Td>
                      {c.comparison
                        ? `${pct(c.comparison.candidate.f1)} / ${pct(c.comparison.baseline.f1)} (${c.comparison.recommendation})`
                        : '—'}
                    </Table.Td>
                    <Table.Td>{c.reason ?? '—'}</Table.Td>
                    <Table.Td>
                      {c.status === 'offered' ? (
                        <Button
                          size="xs"
                          variant="light"
                          loading={busy === c.id}
                          onClick={() => promote(c)}
                          aria-label={`Promote the candidate of the cycle of ${fmtDate(c.created_at)}`}
                        >
                          Promote candidate
                        </Button>
                      ) : (
                        '—'
                      )}
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </Table>
          </Table.ScrollContainer>
        )}
      </Loadable>
      {compared && (
        <CycleComparison
          cycle={compared}
          name={(id) => jobName(jobs, id)}
          onPromote={() => promote(compared)}
          busy={busy === compared.id}
        />
      )}
      {cycles.data && <ReviewQueue cycles={cycles.data.data} />}
    </Stack>
  );
}

function Detail({ id, jobs, onChanged }: { id: string; jobs: Job[]; onChanged: () => void }) {
  const project = useLoad(() => must(api.GET('/projects/{id}', { params: { path: { id } } })), [id]);
  const changed = () => {
    project.reload();
    onChanged();
  };
  return (
    <Paper withBorder p="md" component="section" aria-label={`Project ${id}`}>
      <Loadable state={project} label="Loading the project">
        {(p) => (
          <Stack gap="md">
            <Stack gap={4}>
              <Title order={2} size="h4">
                {p.name}
              </Title>
              <Text size="sm">
                Model id for callers: <Code>{p.id}</Code> · created {fmtDate(p.created_at)}
                {p.description ? ` · ${p.description}` : ''}
              </Text>
            </Stack>
            <Deployments project={p} jobs={jobs} onChanged={changed} />
            <Cycles project={p} jobs={jobs} onChanged={changed} />
          </Stack>
        )}
      </Loadable>
    </Paper>
  );
}

export function ProjectsPage() {
  const list = useLoad(() => must(api.GET('/projects')));
  const jobs = useLoad(() => must(api.GET('/core/training-jobs')));
  const [open, setOpen] = useState<string>();
  const allJobs = jobs.data?.data ?? [];
  return (
    <Stack>
      <Title order={1} size="h2">
        Projects
      </Title>
      <CreateForm
        onCreated={(p) => {
          setOpen(p.id);
          list.reload();
        }}
      />
      {open && (
        <Detail
          key={open}
          id={open}
          jobs={allJobs}
          onChanged={() => {
            list.reload();
            jobs.reload();
          }}
        />
      )}
      <Loadable
        state={list}
        label="Loading projects"
        isEmpty={(d) => d.data.length === 0}
        empty="No projects yet: create one above."
      >
        {(d) => (
          <DataTable label="Projects" minWidth={600} hover columns={['Name', 'Serving', 'Created', 'Details']}>
            {d.data.map((p) => (
              <Table.Tr key={p.id}>
                <Table.Td>{p.name}</Table.Td>
                <Table.Td>{jobName(allJobs, p.active_training_job_id)}</Table.Td>
                <Table.Td>{fmtDate(p.created_at)}</Table.Td>
                <Table.Td>
                  <Button
                    size="xs"
                    variant="subtle"
                    onClick={() => setOpen(p.id)}
                    aria-label={`Open project ${p.name}`}
                  >
                    Open
                  </Button>
                </Table.Td>
              </Table.Tr>
            ))}
          </DataTable>
        )}
      </Loadable>
      {list.data && list.data.data.length > 0 && !open && (
        <Empty>Open a project to promote a model, roll back or run an adaptive cycle.</Empty>
      )}
    </Stack>
  );
}

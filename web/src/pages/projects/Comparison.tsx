import { Badge, Button, Group, Paper, Stack, Table, Text, Title } from '@mantine/core';
import type { components } from '../../api/schema';
import { fmtDate } from '../../components/states';

type Cycle = components['schemas']['AdaptiveCycle'];
type Scores = NonNullable<Cycle['comparison']>['candidate'];

const pct = (n: number) => `${(n * 100).toFixed(1)}%`;
const pts = (d: number) => `${d > 0 ? '+' : ''}${(d * 100).toFixed(1)} pts`;

/**
 * A finished cycle's candidate next to the model the project served when it started: F1, precision
 * and recall on the same held-out reviewed traces, the difference, and the promote button.
 */
export function CycleComparison({
  cycle,
  name,
  onPromote,
  busy,
}: {
  cycle: Cycle;
  name: (jobId: string | null) => string;
  onPromote: () => void;
  busy: boolean;
}) {
  const c = cycle.comparison!;
  const rows: [string, keyof Scores][] = [
    ['F1', 'f1'],
    ['Precision', 'precision'],
    ['Recall', 'recall'],
  ];
  const holdout = cycle.datasets?.holdout;
  return (
    <Paper withBorder p="sm" component="section" aria-label="Candidate vs deployed model">
      <Stack gap="xs">
        <Group justify="space-between">
          <Title order={4} size="h6">
            Candidate vs deployed model · cycle of {fmtDate(cycle.created_at)}
          </Title>
          <Badge
            variant="outline"
            color={c.recommendation === 'promote' ? '#22672f' : '#495057'}
            data-testid="recommendation"
          >
            recommendation: {c.recommendation}
          </Badge>
        </Group>
        <Text size="sm">
          Both scored on the same {cycle.traces?.holdout ?? '?'} held-out reviewed traces
          {holdout ? ` (dataset ${holdout.name} v${holdout.version ?? '?'})` : ''}; the candidate was trained on{' '}
          {cycle.traces?.train ?? '?'} rows ({cycle.traces?.gold ?? '?'} reviewed traces, confident ones replayed).
        </Text>
        <Table.ScrollContainer minWidth={480}>
          <Table aria-label="Candidate vs deployed scores">
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Metric</Table.Th>
                <Table.Th>Deployed: {name(cycle.baseline_training_job_id)}</Table.Th>
                <Table.Th>Candidate: {name(cycle.candidate_training_job_id)}</Table.Th>
                <Table.Th>Difference</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {rows.map(([label, k]) => {
                const d = c.candidate[k] - c.baseline[k];
                return (
                  <Table.Tr key={k}>
                    <Table.Th scope="row">{label}</Table.Th>
                    <Table.Td>{pct(c.baseline[k])}</Table.Td>
                    <Table.Td>{pct(c.candidate[k])}</Table.Td>
                    <Table.Td c={d > 0 ? '#22672f' : d < 0 ? '#b02525' : undefined}>{pts(d)}</Table.Td>
                  </Table.Tr>
                );
              })}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
        <Group>
          {cycle.status === 'offered' ? (
            <Button onClick={onPromote} loading={busy}>
              Promote the candidate
            </Button>
          ) : (
            <Text size="sm">
              {cycle.status === 'promoted'
                ? 'Promoted: the project serves this candidate (roll back above to undo).'
                : `Cycle ${cycle.status}.`}
            </Text>
          )}
          <Text size="xs">Promoting retargets the project: callers keep using its id.</Text>
        </Group>
      </Stack>
    </Paper>
  );
}

import {
  Button,
  Group,
  Paper,
  SegmentedControl,
  SimpleGrid,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useState } from 'react';
import { Bar, BarChart, CartesianGrid, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { api, must } from '../api/client';
import type { components } from '../api/schema';
import { Empty, ErrorState, fmtDate, Loadable, Loading, useLoad, usd } from '../components/states';

type RequestRow = components['schemas']['UsageRequest'];

function Stat({ label, value, hint }: { label: string; value: string; hint?: string }) {
  return (
    <Paper withBorder p="md">
      <Text size="xs" c="dimmed" tt="uppercase" fw={700}>
        {label}
      </Text>
      <Text size="xl" fw={700} data-testid={`stat-${label}`}>
        {value}
      </Text>
      {hint && (
        <Text size="xs" c="dimmed">
          {hint}
        </Text>
      )}
    </Paper>
  );
}

const tokens = (n: number) => n.toLocaleString();

export function UsagePage() {
  const [days, setDays] = useState('31');
  const usage = useLoad(
    () => must(api.GET('/billing/usage/requests', { params: { query: { days: Number(days) } } })),
    [days],
  );
  const [modelFilter, setModelFilter] = useState('');
  return (
    <Stack>
      <Title order={1} size="h2">
        Credits and usage
      </Title>
      <Loadable state={usage} label="Loading usage">
        {(u) => {
          // a project's row is keyed by its id and carries its name; the last row may sum the rest
          const modelLabel = (m: (typeof u.this_month.by_model)[number]) =>
            m.other ? 'Other models' : (m.name ?? m.model);
          const models = u.this_month.by_model.filter((m) =>
            `${modelLabel(m)} ${m.model}`.toLowerCase().includes(modelFilter.toLowerCase()),
          );
          return (
            <Stack>
              <SimpleGrid cols={{ base: 1, xs: 2, md: 4 }}>
                <Stat label="Credit balance" value={usd(u.credit_balance_usd)} hint={`plan: ${u.plan}`} />
                <Stat label="Daily spend cap" value={usd(u.daily_spend_cap_usd)} />
                <Stat
                  label="Left today"
                  value={usd(u.remaining_daily_allowance_usd)}
                  hint={`resets ${fmtDate(u.resets_at)}`}
                />
                <Stat
                  label="Spent this month"
                  value={usd(u.this_month.cost_usd)}
                  hint={`${u.this_month.requests} billed requests`}
                />
              </SimpleGrid>
              <Paper withBorder p="md">
                <Group justify="space-between" mb="sm">
                  <Title order={2} size="h4">
                    Spend by day
                  </Title>
                  <SegmentedControl
                    aria-label="Window"
                    size="xs"
                    value={days}
                    onChange={setDays}
                    data={[
                      { value: '7', label: '7 days' },
                      { value: '31', label: '31 days' },
                      { value: '90', label: '90 days' },
                    ]}
                  />
                </Group>
                {u.by_day.length === 0 ? (
                  <Empty>No billed requests in this window.</Empty>
                ) : (
                  <div
                    style={{ height: 240 }}
                    role="img"
                    aria-label={`Spend by day over ${days} days: ${usd(u.by_day.reduce((s, d) => s + d.cost_usd, 0))} in total`}
                  >
                    <ResponsiveContainer>
                      <BarChart data={u.by_day}>
                        <CartesianGrid strokeDasharray="3 3" />
                        <XAxis dataKey="day" fontSize={12} />
                        <YAxis fontSize={12} tickFormatter={(v: number) => `$${v}`} />
                        <Tooltip formatter={(v) => usd(Number(v))} />
                        <Bar dataKey="cost_usd" name="Spend (USD)" fill="#1c7ed6" />
                      </BarChart>
                    </ResponsiveContainer>
                  </div>
                )}
              </Paper>
              <Paper withBorder p="md">
                <Group justify="space-between" mb="sm">
                  <Title order={2} size="h4">
                    This month by model
                  </Title>
                  <TextInput
                    size="xs"
                    aria-label="Filter models"
                    placeholder="Filter models"
                    value={modelFilter}
                    onChange={(e) => setModelFilter(e.currentTarget.value)}
                  />
                </Group>
                <Text size="xs" c="dimmed" mb="xs">
                  Cache reads are prompt tokens served from the prompt cache (billed at the cache-read rate); cache
                  writes are tokens stored in it.
                </Text>
                {models.length === 0 ? (
                  <Empty>No usage by model{modelFilter ? ' matches the filter' : ' this month'}.</Empty>
                ) : (
                  <UsageTable rows={models.map((m) => ({ key: m.model, ...m, extra: modelLabel(m) }))} first="Model" />
                )}
              </Paper>
              <RequestList />
            </Stack>
          );
        }}
      </Loadable>
    </Stack>
  );
}

function UsageTable({
  rows,
  first,
}: {
  rows: {
    key: string;
    requests?: number;
    input_tokens: number;
    output_tokens: number;
    cache_read_tokens: number;
    cache_write_tokens: number;
    cost_usd: number;
    extra?: string;
  }[];
  first: string;
}) {
  return (
    <Table.ScrollContainer minWidth={640}>
      <Table striped aria-label={`Usage by ${first.toLowerCase()}`}>
        <Table.Thead>
          <Table.Tr>
            <Table.Th>{first}</Table.Th>
            {rows[0]?.requests !== undefined && <Table.Th>Requests</Table.Th>}
            <Table.Th>Input tokens</Table.Th>
            <Table.Th>Output tokens</Table.Th>
            <Table.Th>Cache reads</Table.Th>
            <Table.Th>Cache writes</Table.Th>
            <Table.Th>Cost</Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((r) => (
            <Table.Tr key={r.key}>
              <Table.Td>{r.extra ?? r.key}</Table.Td>
              {r.requests !== undefined && <Table.Td>{r.requests}</Table.Td>}
              <Table.Td>{tokens(r.input_tokens)}</Table.Td>
              <Table.Td>{tokens(r.output_tokens)}</Table.Td>
              <Table.Td>{tokens(r.cache_read_tokens)}</Table.Td>
              <Table.Td>{tokens(r.cache_write_tokens)}</Table.Td>
              <Table.Td>{usd(r.cost_usd)}</Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

/** Billed requests, newest first, a page at a time (the API's cursor); filters apply to what is loaded. */
function RequestList() {
  const [rows, setRows] = useState<RequestRow[]>([]);
  const [cursor, setCursor] = useState<string | null>();
  const [error, setError] = useState<Error>();
  const [filter, setFilter] = useState('');
  const first = useLoad(async () => {
    const page = await must(api.GET('/billing/usage/requests/list', { params: { query: { limit: 50 } } }));
    setRows(page.data);
    setCursor(page.next_cursor);
    return page;
  });
  async function more() {
    try {
      const page = await must(
        api.GET('/billing/usage/requests/list', { params: { query: { limit: 50, ...(cursor ? { cursor } : {}) } } }),
      );
      setRows((r) => [...r, ...page.data]);
      setCursor(page.next_cursor);
    } catch (err) {
      setError(err as Error);
    }
  }
  const shown = rows.filter((r) =>
    `${r.model} ${r.endpoint} ${r.inference_id}`.toLowerCase().includes(filter.toLowerCase()),
  );
  return (
    <Paper withBorder p="md">
      <Group justify="space-between" mb="sm">
        <Title order={2} size="h4">
          By request
        </Title>
        <TextInput
          size="xs"
          aria-label="Filter requests by model, endpoint or id"
          placeholder="Model, endpoint or id"
          value={filter}
          onChange={(e) => setFilter(e.currentTarget.value)}
        />
      </Group>
      {first.error ? (
        <ErrorState error={first.error} onRetry={first.reload} />
      ) : first.loading && rows.length === 0 ? (
        <Loading label="Loading requests" />
      ) : shown.length === 0 ? (
        <Empty>{rows.length ? 'No loaded request matches the filter.' : 'No billed requests yet.'}</Empty>
      ) : (
        <UsageTable
          first="Request"
          rows={shown.map((r) => ({
            key: r.inference_id + r.at,
            extra: `${fmtDate(r.at)} · ${r.model} · ${r.endpoint}`,
            ...r,
          }))}
        />
      )}
      {error && <ErrorState error={error} />}
      {cursor && (
        <Button mt="sm" variant="light" size="xs" onClick={more}>
          Load more
        </Button>
      )}
    </Paper>
  );
}

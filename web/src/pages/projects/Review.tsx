import { Badge, Button, Group, MultiSelect, Paper, Select, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useState } from 'react';
import { api, must } from '../../api/client';
import type { components } from '../../api/schema';
import { Highlighted, type Span } from '../../components/Highlighted';
import { fmtDate, FormError, Loadable, useLoad } from '../../components/states';

type Inference = components['schemas']['InferenceRecord'];
type Cycle = components['schemas']['AdaptiveCycle'];
type Classification = { task: string; labels: string[]; multi_label?: boolean };
type Output = { entities?: Span[]; classifications?: Record<string, { label: string; score?: number }[]> };
type Trace = { inf: Inference; uncertainty: number };

/** What the request asked for: its entity types and classification tasks (the labels a correction may use). */
function requestSchema(inf: Inference): { entityTypes: string[]; classifications: Classification[] } {
  const schema = (inf.input.schema ?? {}) as { entities?: unknown; classifications?: unknown };
  const e = schema.entities;
  const entityTypes = Array.isArray(e)
    ? e.map((x) => (typeof x === 'string' ? x : String((x as { name?: unknown }).name ?? ''))).filter(Boolean)
    : e && typeof e === 'object'
      ? Object.keys(e)
      : [];
  const classifications = Array.isArray(schema.classifications) ? (schema.classifications as Classification[]) : [];
  return { entityTypes, classifications };
}

/** Code-point offset of a UTF-16 index: the API's spans count code points. */
const codePoints = (s: string) => Array.from(s).length;

/**
 * Correct, or correct it: the spans (remove one, add one by its exact text and type) and the
 * classification labels, sent as `corrected_output` with the heads the request ran.
 */
function TraceReview({ trace, onSaved }: { trace: Trace; onSaved: () => void }) {
  const { inf, uncertainty } = trace;
  const text = typeof inf.input.text === 'string' ? inf.input.text : '';
  const output = (inf.output ?? {}) as Output;
  const { entityTypes, classifications } = requestSchema(inf);
  const ner = inf.tasks.includes('ner');
  const short = inf.inference_id.slice(-8); // ids start with their timestamp: the end tells traces apart
  const [editing, setEditing] = useState(false);
  const [entities, setEntities] = useState<Span[]>(() =>
    (output.entities ?? []).map(({ text, label, start, end }) => ({ text, label, start, end })),
  );
  const [labels, setLabels] = useState<Record<string, string[]>>(() =>
    Object.fromEntries(
      classifications.map((c) => [c.task, (output.classifications?.[c.task] ?? []).map((l) => l.label)]),
    ),
  );
  const [span, setSpan] = useState('');
  const [type, setType] = useState<string | null>(entityTypes[0] ?? null);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState<string>();

  function addSpan() {
    const at = text.indexOf(span);
    if (!span || at < 0) return setError(`"${span}" is not in the text (spans are exact, case included)`);
    const start = codePoints(text.slice(0, at));
    setEntities(
      [...entities, { text: span, label: type ?? '', start, end: start + codePoints(span) }].sort(
        (a, b) => a.start - b.start,
      ),
    );
    setSpan('');
    setError(undefined);
  }

  async function send(verdict: 'correct' | 'incorrect') {
    setBusy(verdict);
    setError(undefined);
    const corrected: Record<string, unknown> = {};
    if (ner) corrected.entities = entities;
    if (classifications.length)
      corrected.classifications = Object.fromEntries(
        classifications.map((c) => [c.task, c.multi_label ? (labels[c.task] ?? []) : (labels[c.task]?.[0] ?? '')]),
      );
    try {
      await must(
        api.POST('/inferences/{id}/feedback', {
          params: { path: { id: inf.inference_id } },
          body: verdict === 'correct' ? { verdict } : { verdict, corrected_output: corrected },
        }),
      );
      setEditing(false);
      onSaved();
    } catch (err) {
      setError((err as Error).message);
    } finally {
      setBusy(undefined);
    }
  }

  return (
    <Paper withBorder p="sm" component="article" aria-label={`Trace ${short}`} data-inference-id={inf.inference_id}>
      <Stack gap="xs">
        <Group gap="xs">
          <Badge variant="light" color={uncertainty >= 0.8 ? '#b02525' : '#9c3d00'}>
            uncertainty {uncertainty.toFixed(2)}
          </Badge>
          <Text size="xs">
            {fmtDate(inf.created_at)} · {inf.endpoint} · {short}
          </Text>
          {inf.feedback && (
            <Badge
              variant="outline"
              color={inf.feedback.verdict === 'correct' ? '#22672f' : '#9c3d00'}
              data-testid="trace-feedback"
            >
              marked {inf.feedback.verdict}
            </Badge>
          )}
        </Group>
        {ner &&
          (output.entities?.length ? (
            <Highlighted text={text} spans={output.entities} labels={entityTypes} />
          ) : (
            <Text size="sm">{text}</Text>
          ))}
        {!ner && <Text size="sm">{text}</Text>}
        {classifications.map((c) => (
          <Text size="sm" key={c.task}>
            {c.task}:{' '}
            {(output.classifications?.[c.task] ?? [])
              .map((l) => `${l.label}${l.score === undefined ? '' : ` (${l.score.toFixed(2)})`}`)
              .join(', ') || 'no label'}
          </Text>
        ))}
        <Group gap="xs">
          <Button size="xs" variant="default" onClick={() => send('correct')} loading={busy === 'correct'}>
            Mark correct
          </Button>
          <Button size="xs" variant="default" onClick={() => setEditing((e) => !e)} aria-expanded={editing}>
            Correct it…
          </Button>
        </Group>
        {editing && (
          <Stack gap="xs">
            {ner && (
              <>
                <Table aria-label={`Corrected entities of trace ${short}`}>
                  <Table.Thead>
                    <Table.Tr>
                      <Table.Th>Span</Table.Th>
                      <Table.Th>Type</Table.Th>
                      <Table.Th>Remove</Table.Th>
                    </Table.Tr>
                  </Table.Thead>
                  <Table.Tbody>
                    {entities.map((e, i) => (
                      <Table.Tr key={`${e.start}-${e.end}-${e.label}`}>
                        <Table.Td>{e.text}</Table.Td>
                        <Table.Td>{e.label}</Table.Td>
                        <Table.Td>
                          <Button
                            size="xs"
                            variant="subtle"
                            color="red"
                            onClick={() => setEntities(entities.filter((_, j) => j !== i))}
                            aria-label={`Remove ${e.text} (${e.label})`}
                          >
                            Remove
                          </Button>
                        </Table.Td>
                      </Table.Tr>
                    ))}
                    {entities.length === 0 && (
                      <Table.Tr>
                        <Table.Td colSpan={3}>No entities: the text has none of the requested types.</Table.Td>
                      </Table.Tr>
                    )}
                  </Table.Tbody>
                </Table>
                <Group align="flex-end" gap="xs">
                  <TextInput
                    size="xs"
                    label="Missing span"
                    description="Its exact text"
                    value={span}
                    onChange={(e) => setSpan(e.currentTarget.value)}
                    style={{ flex: 1, minWidth: 160 }}
                  />
                  <Select
                    size="xs"
                    label="Type"
                    data={entityTypes}
                    value={type}
                    onChange={setType}
                    allowDeselect={false}
                  />
                  <Button size="xs" variant="light" onClick={addSpan} disabled={!span || !type}>
                    Add span
                  </Button>
                </Group>
              </>
            )}
            {classifications.map((c) =>
              c.multi_label ? (
                <MultiSelect
                  key={c.task}
                  size="xs"
                  label={`Labels for ${c.task}`}
                  data={c.labels}
                  value={labels[c.task] ?? []}
                  onChange={(v) => setLabels({ ...labels, [c.task]: v })}
                />
              ) : (
                <Select
                  key={c.task}
                  size="xs"
                  label={`Label for ${c.task}`}
                  data={c.labels}
                  value={labels[c.task]?.[0] ?? null}
                  onChange={(v) => setLabels({ ...labels, [c.task]: v ? [v] : [] })}
                />
              ),
            )}
            <Group>
              <Button size="xs" onClick={() => send('incorrect')} loading={busy === 'incorrect'}>
                Save correction
              </Button>
            </Group>
          </Stack>
        )}
        <FormError error={error} />
      </Stack>
    </Paper>
  );
}

/**
 * The traces the newest cycle asked people to review (`review`: informative traces without feedback,
 * most uncertain first), each with its feedback form. Feedback is what the next cycle trains on.
 */
export function ReviewQueue({ cycles }: { cycles: Cycle[] }) {
  const source = cycles.find((c) => c.review.length > 0);
  const traces = useLoad(
    async () =>
      source
        ? (
            await Promise.all(
              source.review.map(async (r) => {
                const res = await api.GET('/inferences/{id}', { params: { path: { id: r.inference_id } } });
                return res.data ? { inf: res.data, uncertainty: r.uncertainty } : undefined; // a trace deleted since
              }),
            )
          ).filter((t): t is Trace => t !== undefined)
        : [],
    [source?.id],
  );
  const [saved, setSaved] = useState<Record<string, Inference>>({});
  const reviewed = (traces.data ?? []).filter((t) => (saved[t.inf.inference_id] ?? t.inf).feedback).length;
  return (
    <Stack gap="sm" component="section" aria-label="Traces waiting for review">
      <Title order={3} size="h5">
        Traces waiting for review
      </Title>
      {!source ? (
        <Text size="sm" c="dimmed">
          Nothing to review yet: a cycle lists the traces the served model was least sure about. Start one after some
          traffic to this project.
        </Text>
      ) : (
        <Loadable
          state={traces}
          label="Loading the traces to review"
          isEmpty={(d) => d.length === 0}
          empty="The traces to review are no longer stored."
        >
          {(d) => (
            <Stack gap="xs">
              <Text size="sm" data-testid="review-progress">
                {reviewed} of {d.length} reviewed (from the cycle of {fmtDate(source.created_at)}). Mark a trace
                correct, or correct its spans and labels: reviewed traces are the gold data the next cycle trains and
                scores on.
              </Text>
              {d.map((t) => {
                const current = saved[t.inf.inference_id] ?? t.inf;
                return (
                  <TraceReview
                    key={`${t.inf.inference_id}-${current.feedback?.created_at ?? ''}`}
                    trace={{ ...t, inf: current }}
                    onSaved={() =>
                      void must(api.GET('/inferences/{id}', { params: { path: { id: t.inf.inference_id } } })).then(
                        (inf) => setSaved((s) => ({ ...s, [inf.inference_id]: inf })),
                        () => traces.reload(),
                      )
                    }
                  />
                );
              })}
            </Stack>
          )}
        </Loadable>
      )}
    </Stack>
  );
}

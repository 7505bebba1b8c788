import {
  ActionIcon,
  Button,
  Group,
  Paper,
  Select,
  Stack,
  Table,
  TagsInput,
  Text,
  TextInput,
  Title,
} from '@mantine/core';

/** A field as the API's `schema.structures[name].fields` takes it. */
export type Field = { name: string; dtype: 'str' | 'list'; description: string; choices: string[] };
export type Structure = { name: string; fields: Field[] };
type Span = { text: string; start?: number; end?: number; score?: number };
export type StructureResults = Record<string, Record<string, Span | Span[] | null>[]>;
export type RelationResults = Record<string, { head: Span; tail: Span; score: number }[]>;

export const newField = (): Field => ({ name: '', dtype: 'str', description: '', choices: [] });

/** The request's `structures` object: named structures with at least one named field. */
export function structuresSchema(structures: Structure[]) {
  const out: Record<
    string,
    { fields: { name: string; dtype: 'str' | 'list'; description?: string; choices?: string[] }[] }
  > = {};
  for (const s of structures) {
    const fields = s.fields.filter((f) => f.name.trim());
    if (!s.name.trim() || !fields.length) continue;
    out[s.name.trim()] = {
      fields: fields.map((f) => ({
        name: f.name.trim(),
        dtype: f.dtype,
        ...(f.description.trim() ? { description: f.description.trim() } : {}),
        ...(f.choices.length ? { choices: f.choices } : {}),
      })),
    };
  }
  return out;
}

/** Builds structures: each a name and fields (type, description, optional choices). */
export function StructureBuilder({ value, onChange }: { value: Structure[]; onChange: (s: Structure[]) => void }) {
  const set = (i: number, s: Structure) => onChange(value.map((x, j) => (j === i ? s : x)));
  return (
    <Stack gap="xs">
      <Text size="sm" fw={500}>
        Structures
      </Text>
      {value.map((s, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: the form rows have no id; every input is controlled (its value comes from `value`), so a removed row leaves no stale state behind
        <Paper key={i} withBorder p="xs" component="fieldset" aria-label={`Structure ${i + 1}`}>
          <Stack gap="xs">
            <Group align="flex-end">
              <TextInput
                label={`Structure ${i + 1} name`}
                value={s.name}
                onChange={(e) => set(i, { ...s, name: e.currentTarget.value })}
              />
              <Button variant="subtle" color="red" onClick={() => onChange(value.filter((_, j) => j !== i))}>
                Remove structure {i + 1}
              </Button>
            </Group>
            {s.fields.map((f, k) => {
              const setField = (g: Field) => set(i, { ...s, fields: s.fields.map((x, j) => (j === k ? g : x)) });
              const n = `structure ${i + 1} field ${k + 1}`;
              return (
                // biome-ignore lint/suspicious/noArrayIndexKey: the form rows have no id; every input is controlled (its value comes from `value`), so a removed row leaves no stale state behind
                <Group key={k} align="flex-end" wrap="wrap">
                  <TextInput
                    label={`Field ${k + 1} name`}
                    aria-label={`Name of ${n}`}
                    value={f.name}
                    onChange={(e) => setField({ ...f, name: e.currentTarget.value })}
                  />
                  <Select
                    label="Type"
                    aria-label={`Type of ${n}`}
                    data={[
                      { value: 'str', label: 'str (one value)' },
                      { value: 'list', label: 'list (several)' },
                    ]}
                    value={f.dtype}
                    onChange={(v) => setField({ ...f, dtype: (v as Field['dtype']) ?? 'str' })}
                    allowDeselect={false}
                    w={160}
                  />
                  <TextInput
                    label="Description"
                    aria-label={`Description of ${n}`}
                    value={f.description}
                    onChange={(e) => setField({ ...f, description: e.currentTarget.value })}
                  />
                  <TagsInput
                    label="Choices (optional)"
                    aria-label={`Choices of ${n}`}
                    value={f.choices}
                    onChange={(c) => setField({ ...f, choices: c })}
                  />
                  <ActionIcon
                    variant="subtle"
                    color="red"
                    size="lg"
                    aria-label={`Remove ${n}`}
                    onClick={() => set(i, { ...s, fields: s.fields.filter((_, j) => j !== k) })}
                  >
                    ×
                  </ActionIcon>
                </Group>
              );
            })}
            <Group>
              <Button size="xs" variant="light" onClick={() => set(i, { ...s, fields: [...s.fields, newField()] })}>
                Add a field to structure {i + 1}
              </Button>
            </Group>
          </Stack>
        </Paper>
      ))}
      <Group>
        <Button size="xs" variant="light" onClick={() => onChange([...value, { name: '', fields: [newField()] }])}>
          Add a structure
        </Button>
      </Group>
    </Stack>
  );
}

const spanText = (v: Span | Span[] | null | undefined) =>
  v == null
    ? '—'
    : Array.isArray(v)
      ? v.map((s) => s.text).join(', ') || '—'
      : `${v.text}${v.score !== undefined ? ` (${v.score.toFixed(2)})` : ''}`;

/** One table per structure: a row per instance found, a column per field. */
export function StructureTables({ results }: { results: StructureResults }) {
  return (
    <>
      {Object.entries(results).map(([name, instances]) => {
        const fields = [...new Set(instances.flatMap((x) => Object.keys(x)))];
        return (
          <div key={name}>
            <Title order={3} size="h5">
              Structure: {name}
            </Title>
            {instances.length === 0 ? (
              <Text c="dimmed">No instance above the threshold.</Text>
            ) : (
              <Table aria-label={`Structure ${name}`} withTableBorder>
                <Table.Thead>
                  <Table.Tr>
                    {fields.map((f) => (
                      <Table.Th key={f}>{f}</Table.Th>
                    ))}
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {instances.map((inst, i) => (
                    // biome-ignore lint/suspicious/noArrayIndexKey: a read-only list from one response, rendered whole; it never reorders
                    <Table.Tr key={i}>
                      {fields.map((f) => (
                        <Table.Td key={f}>{spanText(inst[f])}</Table.Td>
                      ))}
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            )}
          </div>
        );
      })}
    </>
  );
}

/** All relations found, one row each: relation, head, tail, score. */
export function RelationTable({ results }: { results: RelationResults }) {
  const rows = Object.entries(results).flatMap(([name, rs]) => rs.map((r) => ({ name, ...r })));
  return (
    <div>
      <Title order={3} size="h5">
        Relations
      </Title>
      {rows.length === 0 ? (
        <Text c="dimmed">No relation above the threshold ({Object.keys(results).join(', ')}).</Text>
      ) : (
        <Table aria-label="Relations" withTableBorder>
          <Table.Thead>
            <Table.Tr>
              <Table.Th>Relation</Table.Th>
              <Table.Th>Head</Table.Th>
              <Table.Th>Tail</Table.Th>
              <Table.Th>Score</Table.Th>
            </Table.Tr>
          </Table.Thead>
          <Table.Tbody>
            {rows.map((r, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: a read-only list from one response, rendered whole; it never reorders
              <Table.Tr key={i}>
                <Table.Td>{r.name}</Table.Td>
                <Table.Td>{r.head.text}</Table.Td>
                <Table.Td>{r.tail.text}</Table.Td>
                <Table.Td>{r.score.toFixed(3)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      )}
    </div>
  );
}

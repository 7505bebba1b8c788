import { Badge, Button, Code, Group, Paper, Progress, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useRef, useState, type DragEvent } from 'react';
import { api, must } from '../api/client';
import type { components } from '../api/schema';
import { DataTable, Empty, fmtDate, FormError, Loadable, useLoad } from '../components/states';

type Version = components['schemas']['DatasetVersion'];
const statusColor: Record<Version['status'], string> = {
  pending_upload: 'gray',
  processing: 'blue',
  ready: 'green',
  failed: 'red',
};

/** The presigned PUT, through XMLHttpRequest: fetch() cannot report upload progress. */
function putWithProgress(url: string, file: File, onProgress: (fraction: number) => void): Promise<void> {
  return new Promise((ok, fail) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', url);
    xhr.upload.onprogress = (e) => e.lengthComputable && onProgress(e.loaded / e.total);
    xhr.onload = () => (xhr.status < 300 ? ok() : fail(new Error(`The upload was refused (HTTP ${xhr.status})`)));
    xhr.onerror = () => fail(new Error('The upload failed: the storage URL could not be reached'));
    xhr.send(file);
  });
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

function Upload({ onDone, existing }: { onDone: (v: Version) => void; existing: string[] }) {
  const [name, setName] = useState('');
  const [file, setFile] = useState<File>();
  const [progress, setProgress] = useState<number>();
  const [phase, setPhase] = useState<string>();
  const [error, setError] = useState<string>();
  const [over, setOver] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  function pick(f: File | undefined) {
    if (!f) return;
    setFile(f);
    if (!name) setName(f.name.replace(/\.[^.]+$/, '').replace(/[^A-Za-z0-9_-]/g, '-'));
  }
  function drop(e: DragEvent) {
    e.preventDefault();
    setOver(false);
    pick(e.dataTransfer.files[0]);
  }
  async function upload() {
    if (!file) return;
    setError(undefined);
    try {
      setPhase('Requesting an upload URL');
      const url = await must(
        api.POST('/core/datasets/upload/url', {
          body: {
            dataset_name: name,
            file_name: file.name,
            size_bytes: file.size,
            new_version: existing.includes(name),
          },
        }),
      );
      setPhase('Uploading');
      await putWithProgress(url.upload_url, file, setProgress);
      setPhase('Validating');
      await must(api.POST('/core/datasets/upload/process', { body: { dataset_name: name, version: url.version } }));
      for (;;) {
        const v = await must(
          api.GET('/core/datasets/{name}/{version}', { params: { path: { name, version: String(url.version) } } }),
        );
        if (v.status === 'ready' || v.status === 'failed') {
          setPhase(undefined);
          setProgress(undefined);
          setFile(undefined);
          onDone(v);
          return;
        }
        await wait(500);
      }
    } catch (err) {
      setError((err as Error).message);
      setPhase(undefined);
    }
  }
  return (
    <Paper withBorder p="md">
      <Stack>
        <Title order={2} size="h4">
          Upload a dataset
        </Title>
        {/* biome-ignore lint/a11y/useSemanticElements: a drop zone holding a paragraph and the file input, which a <button> may not contain */}
        <div
          role="button"
          tabIndex={0}
          aria-label="Choose a dataset file (JSONL, JSON or CSV) or drop it here"
          onClick={() => input.current?.click()}
          onKeyDown={(e) => {
            if (e.key === 'Enter' || e.key === ' ') {
              e.preventDefault();
              input.current?.click();
            }
          }}
          onDragOver={(e) => {
            e.preventDefault();
            setOver(true);
          }}
          onDragLeave={() => setOver(false)}
          onDrop={drop}
          style={{
            border: `2px dashed ${over ? '#1c7ed6' : '#adb5bd'}`,
            borderRadius: 8,
            padding: 24,
            textAlign: 'center',
            cursor: 'pointer',
            background: over ? '#e7f5ff' : undefined,
          }}
        >
          <Text>
            {file
              ? `${file.name} (${file.size.toLocaleString()} bytes)`
              : 'Drop a .jsonl, .json or .csv file here, or press to choose one'}
          </Text>
          <input
            ref={input}
            type="file"
            accept=".jsonl,.json,.ndjson,.csv"
            hidden
            data-testid="dataset-file"
            onChange={(e) => pick(e.currentTarget.files?.[0])}
          />
        </div>
        <Group align="flex-end">
          <TextInput
            label="Dataset name"
            description={
              existing.includes(name)
                ? 'Exists: this upload becomes its next version'
                : 'Letters, digits, - and _; an existing name gets a new version'
            }
            value={name}
            onChange={(e) => setName(e.currentTarget.value)}
          />
          <Button onClick={upload} disabled={!file || !name} loading={Boolean(phase)}>
            Upload
          </Button>
        </Group>
        {phase && (
          <Stack gap={4}>
            <Text size="sm">{phase}…</Text>
            {progress !== undefined && <Progress value={progress * 100} aria-label="Upload progress" />}
          </Stack>
        )}
        <FormError error={error} />
      </Stack>
    </Paper>
  );
}

function Report({ v }: { v: Version }) {
  const report = useLoad(
    () =>
      must(
        api.GET('/core/datasets/{name}/{version}/report', {
          params: { path: { name: v.name, version: String(v.version) } },
        }),
      ),
    [v.name, v.version],
  );
  return (
    <Paper withBorder p="md" aria-label={`Dataset ${v.name} version ${v.version}`} component="section">
      <Stack gap="xs">
        <Group>
          <Title order={2} size="h4">
            {v.name} v{v.version}
          </Title>
          <Badge color={statusColor[v.status]}>{v.status}</Badge>
        </Group>
        <Text size="sm">
          {v.file_name} · {v.row_count ?? '—'} rows · {v.size_bytes?.toLocaleString() ?? '—'} bytes · uploaded{' '}
          {fmtDate(v.created_at)}
        </Text>
        {v.task_types.length > 0 && (
          <Text size="sm">
            Task heads:{' '}
            {v.task_types.map((t) => (
              <Badge key={t} variant="light" mr={4}>
                {t}
              </Badge>
            ))}
          </Text>
        )}
        {v.entity_types.length > 0 && <Text size="sm">Entity types: {v.entity_types.join(', ')}</Text>}
        {v.label_vocabulary.length > 0 && <Text size="sm">Label vocabulary: {v.label_vocabulary.join(', ')}</Text>}
        {v.relation_types.length > 0 && <Text size="sm">Relation types: {v.relation_types.join(', ')}</Text>}
        {Object.keys(v.structures).length > 0 && (
          <Text size="sm">
            Structures:{' '}
            {Object.entries(v.structures)
              .map(([s, f]) => `${s} (${Object.keys(f).join(', ')})`)
              .join('; ')}
          </Text>
        )}
        <Title order={3} size="h5">
          Validation report
        </Title>
        <Loadable state={report} label="Loading the validation report">
          {(r) =>
            r.errors.length === 0 ? (
              <Text size="sm" c="green">
                No problems found in {v.row_count ?? 0} rows.
              </Text>
            ) : (
              <Table.ScrollContainer minWidth={480}>
                <Table aria-label="Validation errors" data-testid="validation-report">
                  <Table.Thead>
                    <Table.Tr>
                      <Table.Th>Row</Table.Th>
                      <Table.Th>Field</Table.Th>
                      <Table.Th>Problem</Table.Th>
                    </Table.Tr>
                  </Table.Thead>
                  <Table.Tbody>
                    {r.errors.map((e, i) => (
                      // biome-ignore lint/suspicious/noArrayIndexKey: a read-only list from one response, rendered whole; it never reorders
                      <Table.Tr key={i}>
                        <Table.Td>{e.row ?? '—'}</Table.Td>
                        <Table.Td>{e.field ? <Code>{e.field}</Code> : '—'}</Table.Td>
                        <Table.Td>{e.message}</Table.Td>
                      </Table.Tr>
                    ))}
                  </Table.Tbody>
                </Table>
                {r.error_count > r.errors.length && <Text size="xs">…and {r.error_count - r.errors.length} more</Text>}
              </Table.ScrollContainer>
            )
          }
        </Loadable>
      </Stack>
    </Paper>
  );
}

export function DatasetsPage() {
  const list = useLoad(() => must(api.GET('/core/datasets')));
  const [open, setOpen] = useState<Version>();
  return (
    <Stack>
      <Title order={1} size="h2">
        Datasets
      </Title>
      <Upload
        existing={[...new Set(list.data?.data.map((v) => v.name) ?? [])]}
        onDone={(v) => {
          setOpen(v);
          list.reload();
        }}
      />
      {open && <Report key={`${open.name}/${open.version}`} v={open} />}
      <Loadable
        state={list}
        label="Loading datasets"
        isEmpty={(d) => d.data.length === 0}
        empty="No datasets yet: upload one above."
      >
        {(d) => (
          <DataTable
            label="Dataset versions"
            minWidth={600}
            hover
            columns={['Name', 'Version', 'Status', 'Rows', 'Errors', 'Uploaded', 'Report']}
          >
            {d.data.map((v) => (
              <Table.Tr key={`${v.name}/${v.version}`}>
                <Table.Td>{v.name}</Table.Td>
                <Table.Td>{v.version}</Table.Td>
                <Table.Td>
                  <Badge color={statusColor[v.status]}>{v.status}</Badge>
                </Table.Td>
                <Table.Td>{v.row_count ?? '—'}</Table.Td>
                <Table.Td>{v.error_count}</Table.Td>
                <Table.Td>{fmtDate(v.created_at)}</Table.Td>
                <Table.Td>
                  <Button
                    size="xs"
                    variant="subtle"
                    onClick={() => setOpen(v)}
                    aria-label={`Open ${v.name} version ${v.version}`}
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
        <Empty>Open a version to see its heads, vocabulary and validation report.</Empty>
      )}
    </Stack>
  );
}

import {
  Alert,
  Button,
  Code,
  CopyButton,
  Group,
  Modal,
  Select,
  Stack,
  Table,
  TextInput,
  Title,
  VisuallyHidden,
} from '@mantine/core';
import { useState, type FormEvent } from 'react';
import { api, must } from '../api/client';
import type { components } from '../api/schema';
import { fmtDate, Loadable, useLoad, useAction } from '../components/states';

type Created = { name: string; key: string };

export function ApiKeysPage() {
  const keys = useLoad(() => must(api.GET('/api-keys')));
  const [name, setName] = useState('');
  const [role, setRole] = useState<'member' | 'admin'>('member');
  const [created, setCreated] = useState<Created>();
  const { busy, error, setError, run } = useAction();
  const [revoking, setRevoking] = useState<{ id: string; name: string }>();

  async function create(e: FormEvent) {
    e.preventDefault();
    await run(async () => {
      const key = await must(api.POST('/api-keys', { body: { name, role } }));
      setCreated({ name: key.name, key: key.key });
      setName('');
      keys.reload();
    });
  }

  async function revoke(id: string) {
    try {
      await must(
        api.DELETE('/api-keys/{id}', { params: { path: { id } } }).then((r) => ({ ...r, data: r.data ?? {} })),
      );
      setRevoking(undefined);
      keys.reload();
    } catch (err) {
      setError((err as Error).message);
      setRevoking(undefined);
    }
  }

  return (
    <Stack>
      <Title order={1} size="h2">
        API keys
      </Title>
      <form onSubmit={create} aria-label="Create an API key">
        <Group align="flex-end">
          <TextInput
            label="Name"
            description="What uses this key, e.g. “nightly eval job”"
            value={name}
            onChange={(e) => setName(e.currentTarget.value)}
            required
            maxLength={100}
          />
          <Select
            label="Role"
            description="Members use the API; admins also manage keys"
            data={['member', 'admin']}
            value={role}
            onChange={(v) => setRole((v as 'member' | 'admin') ?? 'member')}
            allowDeselect={false}
          />
          <Button type="submit" loading={busy}>
            Create key
          </Button>
        </Group>
      </form>
      {error && (
        <Alert color="red" role="alert" withCloseButton onClose={() => setError(undefined)}>
          {error}
        </Alert>
      )}
      {created && (
        <Alert
          color="green"
          title={`Key “${created.name}” created: copy it now, it is shown only once`}
          withCloseButton
          onClose={() => setCreated(undefined)}
          closeButtonLabel="Dismiss the new key"
        >
          <Group>
            <Code data-testid="new-key-secret">{created.key}</Code>
            <CopyButton value={created.key}>
              {({ copied, copy }) => (
                <Button size="xs" variant="light" onClick={copy}>
                  {copied ? 'Copied' : 'Copy'}
                </Button>
              )}
            </CopyButton>
          </Group>
        </Alert>
      )}
      <Loadable
        state={keys}
        label="Loading API keys"
        isEmpty={(d) => d.data.length === 0}
        empty="No API keys yet: create one above."
      >
        {(d) => <KeyTable keys={d.data} onRevoke={setRevoking} />}
      </Loadable>
      <Modal
        opened={Boolean(revoking)}
        onClose={() => setRevoking(undefined)}
        title="Revoke this key?"
        closeButtonProps={{ 'aria-label': 'Cancel' }}
      >
        <Stack>
          <div>Requests with “{revoking?.name}” fail with 401 from now on. This cannot be undone.</div>
          <Group justify="flex-end">
            <Button variant="default" onClick={() => setRevoking(undefined)}>
              Cancel
            </Button>
            <Button color="red" onClick={() => revoking && revoke(revoking.id)}>
              Revoke
            </Button>
          </Group>
        </Stack>
      </Modal>
    </Stack>
  );
}

function KeyTable({
  keys,
  onRevoke,
}: {
  keys: components['schemas']['ApiKey'][];
  onRevoke: (k: { id: string; name: string }) => void;
}) {
  return (
    <Table.ScrollContainer minWidth={560}>
      <Table striped aria-label="API keys">
        <Table.Thead>
          <Table.Tr>
            <Table.Th>Name</Table.Th>
            <Table.Th>Prefix</Table.Th>
            <Table.Th>Role</Table.Th>
            <Table.Th>Created</Table.Th>
            <Table.Th>Last used</Table.Th>
            <Table.Th>
              <VisuallyHidden>Actions</VisuallyHidden>
            </Table.Th>
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {keys.map((k) => (
            <Table.Tr key={k.id}>
              <Table.Td>{k.name}</Table.Td>
              <Table.Td>
                <Code>{k.prefix}…</Code>
              </Table.Td>
              <Table.Td>{k.role}</Table.Td>
              <Table.Td>{fmtDate(k.created_at)}</Table.Td>
              <Table.Td>{k.last_used_at ? fmtDate(k.last_used_at) : 'never'}</Table.Td>
              <Table.Td>
                {k.role !== 'operator' && (
                  <Button
                    size="xs"
                    color="red"
                    variant="light"
                    onClick={() => onRevoke(k)}
                    aria-label={`Revoke ${k.name}`}
                  >
                    Revoke
                  </Button>
                )}
              </Table.Td>
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    </Table.ScrollContainer>
  );
}

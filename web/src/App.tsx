import { AppShell, Burger, Button, Group, NavLink, PasswordInput, Paper, Stack, Text, Title } from '@mantine/core';
import { useDisclosure } from '@mantine/hooks';
import { useEffect, useState, type FormEvent } from 'react';
import { api, errorDetail, storedKey, storeKey } from './api/client';
import { ApiKeysPage } from './pages/ApiKeys';
import { DatasetsPage } from './pages/Datasets';
import { EvaluationsPage } from './pages/Evaluations';
import { InferencesPage } from './pages/Inferences';
import { PlaygroundPage } from './pages/Playground';
import { ProjectsPage } from './pages/Projects';
import { TeamPage } from './pages/Team';
import { TrainingPage } from './pages/Training';
import { UsagePage } from './pages/Usage';

const pages = [
  { path: 'settings/api-keys', label: 'Settings → API Keys', Page: ApiKeysPage },
  { path: 'settings/credits', label: 'Settings → Credits / Usage', Page: UsagePage },
  { path: 'settings/team', label: 'Settings → Team', Page: TeamPage },
  { path: 'datasets', label: 'Datasets', Page: DatasetsPage },
  { path: 'training', label: 'Training jobs', Page: TrainingPage },
  { path: 'evaluations', label: 'Evaluations', Page: EvaluationsPage },
  { path: 'inferences', label: 'Inference history', Page: InferencesPage },
  { path: 'projects', label: 'Projects and deployments', Page: ProjectsPage },
  { path: 'playground', label: 'Playground', Page: PlaygroundPage },
] as const;

/** Hash routes (#/datasets): static hosting needs no rewrite rules for deep links. */
const readHashPath = () => location.hash.replace(/^#\/?/, '') || pages[0].path;

function useHashPath() {
  const [path, setPath] = useState(readHashPath);
  useEffect(() => {
    const on = () => setPath(readHashPath());
    addEventListener('hashchange', on);
    return () => removeEventListener('hashchange', on);
  }, []);
  return path;
}

function SignIn({ onSignedIn }: { onSignedIn: () => void }) {
  const [key, setKey] = useState('');
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  async function submit(e: FormEvent) {
    e.preventDefault();
    setBusy(true);
    setError(undefined);
    storeKey(key.trim());
    // a key that can read its team's usage is a key that works
    const { error: err, response } = await api.GET('/billing/usage/requests', { params: { query: { days: 1 } } });
    setBusy(false);
    if (!response.ok) {
      storeKey(null);
      setError(errorDetail(err, response.status));
    } else onSignedIn();
  }
  return (
    <main>
      <Paper maw={440} mx="auto" mt={80} p="lg" withBorder>
        <form onSubmit={submit}>
          <Stack>
            <Title order={1} size="h2">
              Sift console
            </Title>
            <Text size="sm">Sign in with an API key (svc_sk_…). It stays in this tab only.</Text>
            <PasswordInput
              label="API key"
              value={key}
              onChange={(e) => setKey(e.currentTarget.value)}
              required
              autoFocus
              error={error}
              aria-invalid={Boolean(error)}
            />
            <Button type="submit" loading={busy}>
              Sign in
            </Button>
          </Stack>
        </form>
      </Paper>
    </main>
  );
}

export function App() {
  const [signedIn, setSignedIn] = useState(() => Boolean(storedKey()));
  const [opened, { toggle, close }] = useDisclosure();
  const path = useHashPath();
  // a revoked or expired key: back to the sign-in form (the client drops the key on a 401)
  useEffect(() => {
    const out = () => setSignedIn(false);
    addEventListener('sift:signed-out', out);
    return () => removeEventListener('sift:signed-out', out);
  }, []);
  if (!signedIn) return <SignIn onSignedIn={() => setSignedIn(true)} />;
  const current = pages.find((p) => p.path === path) ?? pages[0];
  return (
    <AppShell
      header={{ height: 56 }}
      navbar={{ width: 260, breakpoint: 'sm', collapsed: { mobile: !opened } }}
      padding="md"
    >
      <AppShell.Header>
        <Group h="100%" px="md" justify="space-between">
          <Group>
            <Burger opened={opened} onClick={toggle} hiddenFrom="sm" size="sm" aria-label="Toggle navigation" />
            <Text fw={700}>Sift console</Text>
          </Group>
          <Button
            variant="subtle"
            size="xs"
            onClick={() => {
              storeKey(null);
              setSignedIn(false);
            }}
          >
            Sign out
          </Button>
        </Group>
      </AppShell.Header>
      <AppShell.Navbar p="xs" aria-label="Console pages">
        {pages.map((p) => (
          <NavLink
            key={p.path}
            href={`#/${p.path}`}
            label={p.label}
            active={p === current}
            aria-current={p === current ? 'page' : undefined}
            onClick={close}
          />
        ))}
      </AppShell.Navbar>
      <AppShell.Main>
        <current.Page />
      </AppShell.Main>
    </AppShell>
  );
}

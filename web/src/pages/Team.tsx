import { Alert, Autocomplete, Button, Code, Group, Stack, Text, Title } from '@mantine/core';
import { useEffect, useState, type FormEvent } from 'react';
import { api, must } from '../api/client';
import { FormError, Loadable, useAction, useLoad } from '../components/states';

/** The caller's team settings: the default encoder POST /gliner-2 (the gliner2 client) runs. */
export function TeamPage() {
  const team = useLoad(() => must(api.GET('/team')));
  const models = useLoad(() => must(api.GET('/base-models')));
  const projects = useLoad(() => must(api.GET('/projects')));
  const [value, setValue] = useState('');
  const [saved, setSaved] = useState(false);
  const { busy, error, run } = useAction();
  useEffect(() => setValue(team.data?.default_encoder ?? ''), [team.data]);

  // a catalog or imported encoder, or a project (it serves whatever it has deployed)
  const choices = [
    ...(models.data?.data ?? []).filter((m) => m.type === 'encoder').map((m) => m.id),
    ...(projects.data?.data ?? []).map((p) => p.name),
  ];

  async function save(e: FormEvent, defaultEncoder: string | null) {
    e.preventDefault();
    setSaved(false);
    await run(async () => {
      await must(api.PATCH('/team', { body: { default_encoder: defaultEncoder } }));
      setSaved(true);
      team.reload();
    });
  }

  return (
    <Stack>
      <Title order={1} size="h2">
        Team settings
      </Title>
      <Loadable state={team} label="Loading the team">
        {(t) => (
          <form onSubmit={(e) => save(e, value.trim() || null)} aria-label="Team settings">
            <Stack maw={560}>
              <Text>
                Team <strong>{t.name}</strong>. The <Code>gliner2</Code> client (<Code>GLiNER2.from_api</Code>) sends no
                model: <Code>POST /gliner-2</Code> runs this encoder, or the installation's default when it is unset.
              </Text>
              <Autocomplete
                label="Default encoder"
                description="A catalog or imported encoder, a project, or a deployed training job id"
                placeholder="the installation's default"
                data={choices}
                value={value}
                onChange={setValue}
              />
              <Group>
                <Button type="submit" loading={busy}>
                  Save
                </Button>
                <Button variant="default" disabled={busy || !t.default_encoder} onClick={(e) => save(e, null)}>
                  Use the installation's default
                </Button>
              </Group>
              <FormError error={error} />
              {saved && (
                <Alert color="green" role="status">
                  Saved: {t.default_encoder ?? "the installation's default"}
                </Alert>
              )}
            </Stack>
          </form>
        )}
      </Loadable>
    </Stack>
  );
}

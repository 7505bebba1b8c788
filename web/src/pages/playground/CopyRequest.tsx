import { Button, Code, CopyButton, Paper, Tabs, Title } from '@mantine/core';

/** "Copy this request": one tab per language, each with its copy button. */
export function CopyRequest({ title, code }: { title: string; code: Record<string, string> }) {
  return (
    <Paper withBorder p="md">
      <Title order={2} size="h4" mb="xs">
        {title}
      </Title>
      <Tabs defaultValue="curl">
        <Tabs.List aria-label={title}>
          {Object.keys(code).map((k) => (
            <Tabs.Tab key={k} value={k}>
              {k}
            </Tabs.Tab>
          ))}
        </Tabs.List>
        {Object.entries(code).map(([k, text]) => (
          <Tabs.Panel key={k} value={k} pt="xs">
            <Code block tabIndex={0} aria-label={`${title}, ${k}`}>
              {text}
            </Code>
            <CopyButton value={text}>
              {({ copied, copy }) => (
                <Button size="xs" mt="xs" variant="light" onClick={copy}>
                  {copied ? 'Copied' : `Copy as ${k}`}
                </Button>
              )}
            </CopyButton>
          </Tabs.Panel>
        ))}
      </Tabs>
    </Paper>
  );
}

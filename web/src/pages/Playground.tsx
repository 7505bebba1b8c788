import {
  Badge,
  Button,
  Code,
  Group,
  Paper,
  Select,
  Slider,
  Stack,
  TagsInput,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { useState } from 'react';
import { api, must } from '../api/client';
import { Highlighted } from '../components/Highlighted';
import { FormError, Loadable, useAction, useLoad } from '../components/states';
import { ChatPanel } from './playground/Chat';
import { CopyRequest } from './playground/CopyRequest';
import { snippets } from './playground/snippets';
import {
  RelationTable,
  StructureBuilder,
  structuresSchema,
  StructureTables,
  type RelationResults,
  type Structure,
  type StructureResults,
} from './playground/Structures';

type Span = { text: string; label: string; score: number; start: number; end: number };
type Result = {
  entities?: Span[];
  classifications?: Record<string, { label: string; score: number }[]>;
  structures?: StructureResults;
  relations?: RelationResults;
};

export function PlaygroundPage() {
  const models = useLoad(() => must(api.GET('/base-models')));
  const [model, setModel] = useState<string | null>(null);
  const [custom, setCustom] = useState('');
  const [text, setText] = useState('Tim Cook met Satya Nadella in Zürich to talk about the new Apple campus.');
  const [entities, setEntities] = useState<string[]>(['person', 'location', 'organization']);
  const [task, setTask] = useState('sentiment');
  const [labels, setLabels] = useState<string[]>(['positive', 'negative', 'neutral']);
  const [structures, setStructures] = useState<Structure[]>([]);
  const [relations, setRelations] = useState<string[]>([]);
  const [threshold, setThreshold] = useState(0.5);
  const { busy, error, run: act } = useAction();
  const [res, setRes] = useState<{ result: Result; latency_ms: number; inference_id: string; text: string }>();

  const modelId = custom.trim() || model || '';
  const body = {
    model_id: modelId,
    text,
    threshold,
    schema: {
      ...(entities.length ? { entities } : {}),
      ...(task.trim() && labels.length ? { classifications: [{ task: task.trim(), labels }] } : {}),
      ...(Object.keys(structuresSchema(structures)).length ? { structures: structuresSchema(structures) } : {}),
      ...(relations.length ? { relations } : {}),
    },
  };

  async function run() {
    await act(async () => {
      const out = await must(api.POST('/gliner-2/extract', { body }));
      setRes({ result: out.result as Result, latency_ms: out.latency_ms, inference_id: out.inference_id, text });
    });
  }

  return (
    <Stack>
      <Title order={1} size="h2">
        Playground
      </Title>
      <Loadable
        state={models}
        label="Loading models"
        isEmpty={(d) => d.data.length === 0}
        empty="No base models are installed."
      >
        {(d) => {
          const encoders = d.data.filter((m) => m.type === 'encoder');
          const value = model ?? encoders.find((m) => m.available)?.id ?? null;
          if (model === null && value) queueMicrotask(() => setModel(value));
          return (
            <Paper withBorder p="md">
              <Stack>
                <Group grow align="flex-start">
                  <Select
                    label="Model"
                    description="A catalog encoder (unavailable ones are still building)"
                    data={encoders.map((m) => ({
                      value: m.id,
                      label: `${m.id}${m.available ? '' : ' (building)'}`,
                      disabled: !m.available,
                    }))}
                    value={value}
                    onChange={setModel}
                    allowDeselect={false}
                  />
                  <TextInput
                    label="…or a trained model / project"
                    description="A job's model name or a project id; overrides the catalog choice"
                    value={custom}
                    onChange={(e) => setCustom(e.currentTarget.value)}
                  />
                </Group>
                <Textarea
                  label="Text"
                  autosize
                  minRows={3}
                  value={text}
                  onChange={(e) => setText(e.currentTarget.value)}
                />
                <TagsInput
                  label="Entity types"
                  description="Press Enter after each"
                  value={entities}
                  onChange={setEntities}
                />
                <Group grow align="flex-start">
                  <TextInput
                    label="Classification task"
                    description="Leave empty for none"
                    value={task}
                    onChange={(e) => setTask(e.currentTarget.value)}
                  />
                  <TagsInput label="Its labels" value={labels} onChange={setLabels} />
                </Group>
                <StructureBuilder value={structures} onChange={setStructures} />
                <TagsInput
                  label="Relation types"
                  description="Relations between spans, e.g. works for; press Enter after each"
                  value={relations}
                  onChange={setRelations}
                />
                <div>
                  <Text size="sm" fw={500} id="threshold-label">
                    Threshold: {threshold.toFixed(2)}
                  </Text>
                  <Slider
                    min={0}
                    max={1}
                    step={0.05}
                    value={threshold}
                    onChange={setThreshold}
                    thumbProps={{ 'aria-labelledby': 'threshold-label' }}
                  />
                </div>
                <Group>
                  <Button onClick={run} loading={busy} disabled={!modelId || !text.trim()}>
                    Run
                  </Button>
                </Group>
              </Stack>
            </Paper>
          );
        }}
      </Loadable>
      <FormError error={error} />
      {res && (
        <Paper withBorder p="md" component="section" aria-label="Result">
          <Stack>
            <Group>
              <Title order={2} size="h4">
                Result
              </Title>
              <Badge variant="light">{res.latency_ms.toFixed(0)} ms</Badge>
              <Code>{res.inference_id}</Code>
            </Group>
            {res.result.entities &&
              (res.result.entities.length ? (
                <Highlighted text={res.text} spans={res.result.entities} labels={entities} />
              ) : (
                <Text c="dimmed">No entity above the threshold.</Text>
              ))}
            {res.result.classifications &&
              Object.entries(res.result.classifications).map(([t, ls]) => (
                <Text key={t} size="sm">
                  {t}:{' '}
                  {ls.map((l) => `${l.label} (${l.score.toFixed(3)})`).join(', ') || 'no label above the threshold'}
                </Text>
              ))}
            {res.result.structures && <StructureTables results={res.result.structures} />}
            {res.result.relations && <RelationTable results={res.result.relations} />}
          </Stack>
        </Paper>
      )}
      <CopyRequest title="Copy this request" code={snippets('/gliner-2/extract', body)} />
      <Loadable
        state={models}
        label="Loading decoders"
        isEmpty={(d) => !d.data.some((m) => m.type === 'decoder')}
        empty="No decoder models are installed."
      >
        {(d) => <ChatPanel decoders={d.data.filter((m) => m.type === 'decoder')} />}
      </Loadable>
    </Stack>
  );
}

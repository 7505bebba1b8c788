import {
  Badge,
  Button,
  Group,
  NumberInput,
  Paper,
  Radio,
  Select,
  SimpleGrid,
  Stack,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { createParser } from 'eventsource-parser';
import { useRef, useState } from 'react';
import { apiBase, errorDetail, storedKey } from '../../api/client';
import { CopyRequest } from './CopyRequest';
import { snippets } from './snippets';
import { FormError } from '../../components/states';

type Message = { role: 'user' | 'assistant'; content: string };
type Usage = { prompt_tokens: number; completion_tokens: number; total_tokens: number };
type Chunk = {
  choices?: { delta?: { content?: string | null } }[];
  usage?: Usage | null;
  error?: { message?: string };
};
type AnthropicUsage = {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_input_tokens?: number;
  cache_creation_input_tokens?: number;
};
type AnthropicEvent = {
  type?: string;
  delta?: { text?: string };
  usage?: AnthropicUsage;
  error?: { message?: string };
};
type Decoder = { id: string; available: boolean };
type Flavour = 'openai' | 'anthropic';

const paths: Record<Flavour, string> = { openai: '/v1/chat/completions', anthropic: '/v1/messages' };

/** The chat request in the chosen API's own shape: OpenAI puts the system prompt first in `messages`, Anthropic in `system`. */
function requestBody(
  flavour: Flavour,
  model: string,
  messages: Message[],
  settings: { system: string; temperature: number | ''; maxTokens: number },
) {
  const temperature = settings.temperature === '' ? {} : { temperature: settings.temperature };
  const system = settings.system.trim();
  if (flavour === 'anthropic')
    return {
      model,
      max_tokens: settings.maxTokens,
      ...(system ? { system } : {}),
      messages,
      stream: true,
      ...temperature,
    };
  return {
    model,
    messages: [...(system ? [{ role: 'system', content: system }] : []), ...messages],
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: settings.maxTokens,
    ...temperature,
  };
}

/** Anthropic counts cached prompt tokens apart from `input_tokens`; the panel shows the prompt whole. */
const fromAnthropic = (u: AnthropicUsage): Usage => {
  const prompt = (u.input_tokens ?? 0) + (u.cache_read_input_tokens ?? 0) + (u.cache_creation_input_tokens ?? 0);
  return {
    prompt_tokens: prompt,
    completion_tokens: u.output_tokens ?? 0,
    total_tokens: prompt + (u.output_tokens ?? 0),
  };
};

/** The OpenAI error envelope's message, or the API's `detail`. */
function failure(body: unknown, status: number): string {
  const message = (body as { error?: { message?: unknown } } | undefined)?.error?.message;
  return typeof message === 'string' ? message : errorDetail(body, status);
}

/** A chat with a decoder through POST /v1/chat/completions or POST /v1/messages, the reply streamed token by token (SSE). */
export function ChatPanel({ decoders }: { decoders: Decoder[] }) {
  const [model, setModel] = useState<string | null>(null);
  const [custom, setCustom] = useState('');
  const [messages, setMessages] = useState<Message[]>([]);
  const [draft, setDraft] = useState('What is the capital of France?');
  const [streaming, setStreaming] = useState(false);
  const [usage, setUsage] = useState<Usage>();
  const [error, setError] = useState<string>();
  const [flavour, setFlavour] = useState<Flavour>('openai');
  const [system, setSystem] = useState('');
  const [temperature, setTemperature] = useState<number | string>(''); // a string while typed ("0.") or empty
  const [maxTokens, setMaxTokens] = useState<number | string>(64);
  const abort = useRef<AbortController | null>(null);

  const picked = model ?? decoders.find((m) => m.available)?.id ?? null;
  const modelId = custom.trim() || picked || '';
  const nextMessages: Message[] = [
    ...messages,
    ...(draft.trim() ? [{ role: 'user' as const, content: draft.trim() }] : []),
  ];
  const body = requestBody(flavour, modelId, nextMessages, {
    system,
    temperature: typeof temperature === 'number' ? temperature : '',
    maxTokens: typeof maxTokens === 'number' && maxTokens >= 1 ? maxTokens : 64,
  });

  async function send() {
    const sent = body;
    const sentFlavour = flavour;
    setMessages([...nextMessages, { role: 'assistant', content: '' }]);
    setDraft('');
    setUsage(undefined);
    setError(undefined);
    setStreaming(true);
    const controller = new AbortController();
    abort.current = controller;
    const append = (text: string) =>
      setMessages((ms) => {
        const last = ms[ms.length - 1]!;
        return [...ms.slice(0, -1), { ...last, content: last.content + text }];
      });
    try {
      const res = await fetch(`${apiBase}${paths[sentFlavour]}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', 'x-api-key': storedKey() ?? '' },
        body: JSON.stringify(sent),
        signal: controller.signal,
      });
      if (!res.ok || !res.body) {
        const errBody = await res.json().catch(() => undefined);
        throw new Error(failure(errBody, res.status));
      }
      let streamError: string | undefined;
      let promptUsage: AnthropicUsage = {};
      const parser = createParser({
        onEvent: (e) => {
          if (e.data === '[DONE]') return;
          if (sentFlavour === 'anthropic') {
            // named events: message_start (prompt usage), content_block_delta (text), message_delta (final usage), error
            const ev = JSON.parse(e.data) as AnthropicEvent & { message?: { usage?: AnthropicUsage } };
            if (ev.type === 'error') streamError = failure(ev, 500);
            if (ev.type === 'message_start') promptUsage = ev.message?.usage ?? {};
            if (ev.type === 'content_block_delta' && ev.delta?.text) append(ev.delta.text);
            if (ev.type === 'message_delta' && ev.usage) setUsage(fromAnthropic({ ...promptUsage, ...ev.usage }));
            return;
          }
          const chunk = JSON.parse(e.data) as Chunk;
          if (chunk.error) streamError = failure(chunk, 500);
          const text = chunk.choices?.[0]?.delta?.content;
          if (text) append(text);
          if (chunk.usage) setUsage(chunk.usage);
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
      if (streamError) throw new Error(streamError);
    } catch (err) {
      if (!controller.signal.aborted) setError((err as Error).message);
    } finally {
      // a reply stopped or failed before its first token is not part of the conversation
      setMessages((ms) => (ms[ms.length - 1]?.content === '' ? ms.slice(0, -1) : ms));
      setStreaming(false);
      abort.current = null;
    }
  }

  return (
    <Stack>
      <Paper withBorder p="md" component="section" aria-label="Chat with a decoder">
        <Stack>
          <Title order={2} size="h4">
            Chat with a decoder
          </Title>
          <Group grow align="flex-start">
            <Select
              label="Decoder"
              description="A catalog decoder (unavailable ones are still building)"
              data={decoders.map((m) => ({
                value: m.id,
                label: `${m.id}${m.available ? '' : ' (building)'}`,
                disabled: !m.available,
              }))}
              value={picked}
              onChange={setModel}
              allowDeselect={false}
            />
            <TextInput
              label="…or a trained decoder / project"
              description="A job's model name or a project id; overrides the catalog choice"
              value={custom}
              onChange={(e) => setCustom(e.currentTarget.value)}
            />
          </Group>
          <Radio.Group
            label="API"
            description="The same decoder behind either compatible API; the reply streams from both"
            value={flavour}
            onChange={(v) => setFlavour(v as Flavour)}
          >
            <Group mt="xs">
              <Radio value="openai" label="OpenAI: POST /v1/chat/completions" />
              <Radio value="anthropic" label="Anthropic: POST /v1/messages" />
            </Group>
          </Radio.Group>
          <Textarea
            label="System prompt"
            description="Optional; sent before the conversation"
            autosize
            minRows={1}
            value={system}
            onChange={(e) => setSystem(e.currentTarget.value)}
          />
          <SimpleGrid cols={{ base: 1, sm: 2 }}>
            <NumberInput
              label="Temperature"
              description="0 is greedy (the same reply every time); empty: the server's default"
              min={0}
              max={2}
              step={0.1}
              decimalScale={2}
              value={temperature}
              onChange={setTemperature}
            />
            <NumberInput
              label="Max tokens"
              description="Longest reply, in tokens"
              min={1}
              max={4096}
              step={16}
              allowDecimal={false}
              value={maxTokens}
              onChange={setMaxTokens}
            />
          </SimpleGrid>
          <Stack gap="xs" data-testid="chat-messages" aria-live="polite">
            {messages.length === 0 && <Text c="dimmed">No messages yet.</Text>}
            {messages.map((m, i) => (
              // biome-ignore lint/suspicious/noArrayIndexKey: messages are only appended or all cleared, never reordered, and have no id
              <Paper key={i} p="xs" bg={m.role === 'user' ? 'gray.1' : 'blue.0'} data-role={m.role}>
                <Text size="xs" fw={700}>
                  {m.role === 'user' ? 'You' : 'Assistant'}
                </Text>
                <Text
                  style={{ whiteSpace: 'pre-wrap' }}
                  data-testid={m.role === 'assistant' ? 'assistant-message' : undefined}
                >
                  {m.content || (streaming && i === messages.length - 1 ? '…' : '')}
                </Text>
              </Paper>
            ))}
          </Stack>
          <Textarea
            label="Message"
            autosize
            minRows={2}
            value={draft}
            onChange={(e) => setDraft(e.currentTarget.value)}
          />
          <Group>
            {streaming ? (
              <Button color="red" variant="light" onClick={() => abort.current?.abort()}>
                Stop
              </Button>
            ) : (
              <Button onClick={send} disabled={!modelId || !draft.trim()}>
                Send
              </Button>
            )}
            <Button
              variant="subtle"
              onClick={() => {
                setMessages([]);
                setUsage(undefined);
                setError(undefined);
              }}
              disabled={streaming || messages.length === 0}
            >
              Clear
            </Button>
            {usage && (
              <Badge variant="light" data-testid="chat-usage">
                {usage.prompt_tokens} prompt + {usage.completion_tokens} completion = {usage.total_tokens} tokens
              </Badge>
            )}
          </Group>
          <FormError error={error} />
        </Stack>
      </Paper>
      <CopyRequest title="Copy this chat request" code={snippets(paths[flavour], body, true)} />
    </Stack>
  );
}

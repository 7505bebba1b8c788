/**
 * Tool calls by constrained decoding (docs/reference/decisions.md): the tools are written into the
 * prompt (the catalog decoder's chat template has no tool syntax), and the output is held by a JSON
 * Schema grammar to `{"name": <tool>, "arguments": {...}}` — or, when the model may also answer,
 * `{"answer": "..."}`. The same JSON is how an earlier call is written back into the prompt, so a
 * conversation with tool results reads the way the model is asked to write.
 */
import { BadRequestError } from '../errors';
import { checkJsonSchema, withSystemText } from './structured';
import type { DecoderMessage, JsonSchema, OutputConstraint, ToolCall, ToolChoice, ToolSpec } from './types';

const callSchema = (tool: ToolSpec): JsonSchema => ({
  type: 'object',
  properties: { name: { const: tool.name }, arguments: tool.parameters },
  required: ['name', 'arguments'],
  additionalProperties: false,
});

const ANSWER_SCHEMA: JsonSchema = {
  type: 'object',
  properties: { answer: { type: 'string' } },
  required: ['answer'],
  additionalProperties: false,
};

/**
 * The prompt and constraint for a request with tools. `none`: the tools are not offered and the
 * output is free; `auto`: a call of any tool or an answer; `required`: a call of any tool; `tool`: a
 * call of that one. Each tool's parameters are checked like a response schema (400 naming `field`).
 */
export function planToolUse(
  messages: DecoderMessage[],
  tools: ToolSpec[],
  choice: ToolChoice,
  field: string,
): { messages: DecoderMessage[]; constraint?: OutputConstraint } {
  if (choice.type === 'none' || tools.length === 0) {
    if (choice.type === 'required' || choice.type === 'tool')
      throw new BadRequestError(`${field} is empty, so no tool can be called`, { param: field });
    return { messages };
  }
  const names = new Set<string>();
  tools.forEach((t, i) => {
    if (names.has(t.name))
      throw new BadRequestError(`${field}[${i}] repeats the tool name '${t.name}'`, { param: `${field}[${i}]` });
    names.add(t.name);
    const parameters = checkJsonSchema(t.parameters, `${field}[${i}] (${t.name}) parameters`);
    if (parameters.type !== 'object')
      throw new BadRequestError(`${field}[${i}] (${t.name}) parameters must be an object schema ("type": "object")`, {
        param: `${field}[${i}]`,
      });
  });
  let offered = tools;
  if (choice.type === 'tool') {
    const tool = tools.find((t) => t.name === choice.name);
    if (!tool)
      throw new BadRequestError(`tool_choice names '${choice.name}', which is not one of ${field}`, {
        param: 'tool_choice',
      });
    offered = [tool];
  }
  const alternatives = offered.map(callSchema);
  if (choice.type === 'auto') alternatives.push(ANSWER_SCHEMA);
  const schema = alternatives.length === 1 ? alternatives[0]! : { anyOf: alternatives };
  return {
    messages: withSystemText(messages, toolsPrompt(tools, choice)),
    constraint: { kind: 'json_schema', schema },
  };
}

function toolsPrompt(tools: ToolSpec[], choice: ToolChoice): string {
  const catalog = tools
    .map(
      (t) =>
        `- ${t.name}${t.description ? `: ${t.description}` : ''}\n  arguments schema: ${JSON.stringify(t.parameters)}`,
    )
    .join('\n');
  const how =
    choice.type === 'tool'
      ? `Call the tool ${choice.name}: reply with only {"name": "${choice.name}", "arguments": {...}}.`
      : choice.type === 'required'
        ? 'Call one of the tools: reply with only {"name": "<tool name>", "arguments": {...}}.'
        : 'To call a tool, reply with only {"name": "<tool name>", "arguments": {...}}. To answer without a tool, reply with only {"answer": "<your answer>"}.';
  return `You can use these tools:\n${catalog}\n${how}\nA tool's result comes back in a message starting "Tool result".`;
}

/**
 * The constrained output as calls (arguments as JSON text, ids from `newId`) or answer text. Output
 * that is not the expected JSON (cut by max_tokens, or produced unconstrained) is returned as text.
 */
export function readToolOutput(
  text: string,
  tools: ToolSpec[],
  choice: ToolChoice,
  newId: () => string,
): { text: string | null; calls: ToolCall[] } {
  if (choice.type === 'none' || tools.length === 0) return { text, calls: [] };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { text, calls: [] };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { text, calls: [] };
  const v = value as Record<string, unknown>;
  if (typeof v.answer === 'string' && Object.keys(v).length === 1) return { text: v.answer, calls: [] };
  const named = typeof v.name === 'string' && tools.some((t) => t.name === v.name);
  if (!named || typeof v.arguments !== 'object' || v.arguments === null || Array.isArray(v.arguments))
    return { text, calls: [] };
  return { text: null, calls: [{ id: newId(), name: v.name as string, arguments: JSON.stringify(v.arguments) }] };
}

/** An earlier assistant turn's calls, written as the model is asked to write them (one per line). */
export function toolCallsText(calls: ToolCall[]): string {
  return calls.map((c) => JSON.stringify({ name: c.name, arguments: parseArguments(c.arguments) })).join('\n');
}

/** A tool result as a prompt message's text (the tools prompt tells the model what it is). */
export function toolResultText(call: { id?: string; name?: string }, content: string): string {
  const which = [call.name, call.id && `call ${call.id}`].filter(Boolean).join(', ');
  return `Tool result${which ? ` (${which})` : ''}:\n${content}`;
}

/** Arguments a client sent back are JSON text; text that is not JSON is kept as a string. */
function parseArguments(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return args;
  }
}

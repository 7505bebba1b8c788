/**
 * Structured outputs, tools and logprobs of the OpenAI-family routes (`/v1/chat/completions`, `/v1/responses`):
 * their wire shapes, converted once into the core's vocabulary (core/decoder/types.ts) and planned by the core
 * (structured.ts, tools.ts). docs/reference/decisions.md#structured-outputs-tool-calls-and-logprobs.
 */
import { z } from 'zod';
import type { Principal, Services } from '../../../core/context';
import { checkJsonSchema, structuredOutputMessages } from '../../../core/decoder/structured';
import { planToolUse, readToolOutput } from '../../../core/decoder/tools';
import type {
  DecoderMessage,
  OutputConstraint,
  TokenLogprob,
  ToolCall,
  ToolChoice,
  ToolSpec,
} from '../../../core/decoder/types';
import { BadRequestError } from '../../../core/errors';
import { newUuid } from '../../../core/ids';
import { resolveServable, type ServableDecoder, type ServableEncoder } from '../../../core/models';
import { withHints } from '../generation';
import { extractJsonThroughCompat, extractThroughCompat } from './common';
import { jsonSchemaToGliner } from '../../../core/extraction/jsonSchemaMapping';

/** OpenAI's rule for function and schema names. */
const FunctionName = z.string().regex(/^[a-zA-Z0-9_-]{1,64}$/, 'must be 1 to 64 letters, digits, _ or -');
const SchemaObject = z.record(z.string(), z.unknown());
const strict = z.boolean().nullable().optional();
const description = z.string().nullable().optional();
const TextFormat = z.looseObject({ type: z.literal('text') });
const JsonObjectFormat = z.looseObject({ type: z.literal('json_object') });
const Named = z.looseObject({ name: z.string() });

export const ChatResponseFormat = z.discriminatedUnion('type', [
  TextFormat,
  JsonObjectFormat,
  z.looseObject({
    type: z.literal('json_schema'),
    json_schema: z.looseObject({ name: FunctionName, description, schema: SchemaObject.optional(), strict }),
  }),
]);
export const ChatTool = z.looseObject({
  type: z.literal('function'),
  function: z.looseObject({ name: FunctionName, description, parameters: SchemaObject.optional(), strict }),
});
export const ChatToolChoice = z.union([
  z.enum(['auto', 'none', 'required']),
  z.looseObject({ type: z.literal('function'), function: Named }),
]);

export const ResponsesTextFormat = z.discriminatedUnion('type', [
  TextFormat,
  JsonObjectFormat,
  z.looseObject({ type: z.literal('json_schema'), name: FunctionName, description, schema: SchemaObject, strict }),
]);
export const ResponsesTool = z.looseObject({
  type: z.literal('function'),
  name: FunctionName,
  description,
  parameters: SchemaObject.nullable().optional(),
  strict,
});
export const ResponsesToolChoice = z.union([
  z.enum(['auto', 'none', 'required']),
  z.looseObject({ type: z.literal('function'), name: z.string() }),
]);

/** A requested JSON output; `field` is where its schema was sent (errors name it). */
export type FormatRequest =
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; field: string };

/** What a request asks its output to be, in the core's words. */
export interface OutputRequest {
  format?: FormatRequest | undefined;
  tools: ToolSpec[];
  choice: ToolChoice;
  /** Where a tool's parameters are on the wire, after `tools.<i>.` (chat: `function.parameters`). */
  parametersAt: string;
}

export function toolSpec(t: {
  name: string;
  description?: string | null | undefined;
  parameters?: Record<string, unknown> | null | undefined;
}): ToolSpec {
  return {
    name: t.name,
    ...(t.description ? { description: t.description } : {}),
    parameters: t.parameters ?? { type: 'object', properties: {} },
  };
}

/** `tool_choice` → the core's choice; a choice that names no sent tool, or needs tools none were sent, is a 400. */
export function toolChoiceOf(choice: string | { name: string } | null | undefined, tools: ToolSpec[]): ToolChoice {
  const refuse = (message: string) =>
    withHints(new BadRequestError(`tool_choice: ${message}`), 'tool_choice', 'invalid_value');
  if (choice === undefined || choice === null || choice === 'auto')
    return tools.length > 0 ? { type: 'auto' } : { type: 'none' };
  if (choice === 'none') return { type: 'none' };
  if (tools.length === 0) throw refuse(`'${typeof choice === 'string' ? choice : choice.name}' needs tools`);
  if (choice === 'required') return { type: 'required' };
  if (typeof choice === 'string') throw refuse(`unknown choice '${choice}'`);
  if (!tools.some((t) => t.name === choice.name))
    throw refuse(`'${choice.name}' is not one of the tools sent (${tools.map((t) => t.name).join(', ')})`);
  return { type: 'tool', name: choice.name };
}

/** Whether the request may be answered by an encoder (a JSON schema or a tool to fill): then the model decides. */
const encoderAnswerable = (out: OutputRequest): boolean =>
  out.format?.type === 'json_schema' || out.choice.type === 'tool' || out.choice.type === 'required';

/** The model of an OpenAI-family request: an encoder extracts (`schema` extra, a JSON schema or a tool), a decoder generates. */
export function resolveOpenAiModel(
  svc: Services,
  principal: Principal,
  model: string,
  out: OutputRequest,
  hasSchemaExtra: boolean,
): Promise<ServableEncoder | ServableDecoder> {
  if (hasSchemaExtra) return resolveServable(svc, principal, model, { want: 'encoder' });
  if (encoderAnswerable(out))
    return resolveServable(svc, principal, model) as Promise<ServableEncoder | ServableDecoder>;
  return resolveServable(svc, principal, model, { want: 'decoder' });
}

/**
 * What an encoder fills for a request (a JSON schema, or the one tool it must call): the JSON schema and the field
 * it came from; a request an extractor cannot answer (free text, a choice between tools) is a 400.
 */
export function encoderTarget(
  out: OutputRequest,
  model: string,
): { schema: Record<string, unknown>; field: string; name: string; tool?: string } {
  const tool =
    out.choice.type === 'tool'
      ? out.choice.name
      : out.choice.type === 'required' && out.tools.length === 1
        ? out.tools[0]!.name
        : undefined;
  if (tool !== undefined) {
    const i = out.tools.findIndex((t) => t.name === tool);
    return { schema: out.tools[i]!.parameters, field: `tools.${i}.${out.parametersAt}`, name: tool, tool };
  }
  if (out.tools.length > 0 && out.choice.type !== 'none')
    throw withHints(
      new BadRequestError(
        `'${model}' is an encoder (extraction) model: it can only fill one named tool; set tool_choice to that tool`,
      ),
      'tool_choice',
      'unsupported_parameter',
    );
  if (out.format?.type === 'json_schema')
    return { schema: out.format.schema, field: out.format.field, name: out.format.name };
  throw withHints(
    new BadRequestError(
      `'${model}' is an encoder (extraction) model: send a json_schema response format or a 'schema' field`,
    ),
    'model',
    'unsupported_parameter',
  );
}

/**
 * An encoder's answer to an OpenAI-family request: the `schema` extra's result as is, or the object a JSON schema
 * asked for (core/extraction/jsonSchemaMapping.ts), with the tool it fills when it came as a tool.
 */
export async function extractForOpenAi(args: {
  svc: Services;
  principal: Principal;
  servable: ServableEncoder;
  model: string;
  schemaExtra: Record<string, unknown> | undefined;
  output: OutputRequest;
  text: string;
  threshold?: number | undefined;
  store: boolean;
  endpoint: string;
}): Promise<{ inference_id: string; answer: unknown; tool?: string; input_tokens: number; windows: number }> {
  const { schemaExtra, output, ...rest } = args;
  if (schemaExtra) {
    const out = await extractThroughCompat({ ...rest, schema: schemaExtra });
    return { ...out, answer: out.result };
  }
  const target = encoderTarget(output, args.model);
  const mapping = jsonSchemaToGliner(target.schema, target.field, target.name);
  const out = await extractJsonThroughCompat({ ...rest, mapping, jsonSchema: target.schema });
  return {
    inference_id: out.inferenceId,
    answer: out.object,
    input_tokens: out.usage.input_tokens,
    windows: out.windows,
    ...(target.tool !== undefined ? { tool: target.tool } : {}),
  };
}

/** A decoder generation planned: the prompt, the grammar it runs under, and the tools its output is read back with. */
export interface DecoderPlan {
  messages: DecoderMessage[];
  constraint?: OutputConstraint | undefined;
  tools?: { specs: ToolSpec[]; choice: ToolChoice } | undefined;
}

/**
 * Tools offered (choice not `none`) take the output: the model answers or calls under the tools' grammar. Otherwise
 * a JSON format constrains it and the prompt is told the schema. A format's schema is checked either way.
 */
export function planDecoder(messages: DecoderMessage[], out: OutputRequest): DecoderPlan {
  const constraint: OutputConstraint | undefined =
    out.format?.type === 'json_object'
      ? { kind: 'json_object' }
      : out.format?.type === 'json_schema'
        ? { kind: 'json_schema', schema: checkJsonSchema(out.format.schema, out.format.field) }
        : undefined;
  if (out.tools.length > 0 && out.choice.type !== 'none') {
    const planned = planToolUse(messages, out.tools, out.choice, 'tools');
    return { ...planned, tools: { specs: out.tools, choice: out.choice } };
  }
  if (constraint) return { messages: structuredOutputMessages(messages, constraint), constraint };
  return { messages };
}

/** OpenAI call ids (`call_` + 24 hex). */
export const newCallId = (): string => `call_${newUuid().replace(/-/g, '').slice(0, 24)}`;

/** A finished generation's text read back: tool calls, or the answer text (null when it only called). */
export function readOutput(plan: DecoderPlan, text: string): { text: string | null; calls: ToolCall[] } {
  if (!plan.tools) return { text, calls: [] };
  return readToolOutput(text, plan.tools.specs, plan.tools.choice, newCallId);
}

const utf8 = (s: string): number[] => [...Buffer.from(s, 'utf8')];

/** Chat completions' `logprobs.content` entries. */
export const chatLogprobs = (lps: TokenLogprob[]) =>
  lps.map((l) => ({
    token: l.token,
    logprob: l.logprob,
    bytes: utf8(l.token),
    top_logprobs: l.top.map((t) => ({ token: t.token, logprob: t.logprob, bytes: utf8(t.token) })),
  }));

/** Events already known (an extraction's answer) as a response stream. */
export async function* toAsync(events: Iterable<string>): AsyncGenerator<string> {
  yield* events;
}

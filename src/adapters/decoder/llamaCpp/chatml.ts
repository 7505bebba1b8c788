/** Prompt → tokens with the model's ChatML template, recording cache-marker boundaries as token positions. */
import type { DecoderMessage, DecoderPrompt, TokenizedPrompt } from '../../../core/decoder/types';
import type { Base } from './types';

/** Default system prompt of SmolLM2's chat template (added when the first message is not a system one). */
export const SMOLLM_SYSTEM = 'You are a helpful AI assistant named SmolLM, trained by Hugging Face';

/** ChatML pieces: template text (special tokens allowed) and caller text (never special). */
export function tokenizeChatMl(l: Base, prompt: DecoderPrompt): TokenizedPrompt {
  const tokens: number[] = [];
  const breakpoints: TokenizedPrompt['breakpoints'] = [];
  const special = (t: string) => tokens.push(...(l.model.tokenize(t, true) as number[]));
  const plain = (t: string) => {
    if (t) tokens.push(...(l.model.tokenize(t, false) as number[]));
  };
  if (prompt.kind === 'text') {
    plain(prompt.text);
    return { tokens, breakpoints };
  }
  const messages: DecoderMessage[] = [...prompt.messages];
  if (l.defaultSystem && messages[0]?.role !== 'system')
    messages.unshift({ role: 'system', parts: [{ text: l.defaultSystem }] });
  const last = messages.length - 1;
  messages.forEach((m, i) => {
    const prefill = i === last && m.role === 'assistant' && prompt.continueFinal === true;
    special(`<|im_start|>${m.role}\n`);
    m.parts.forEach((p, j) => {
      if (j > 0) plain('\n');
      plain(p.text);
      if (p.cache) breakpoints.push({ length: tokens.length, ttlSeconds: p.cache.ttlSeconds });
    });
    if (!prefill) special('<|im_end|>\n');
  });
  if (!(messages[last]?.role === 'assistant' && prompt.continueFinal)) special('<|im_start|>assistant\n');
  return { tokens, breakpoints };
}

/**
 * The generation workflow's TextGenerator on this process's decoder (the DecoderRuntime port,
 * `svc.decoder`: llama.cpp locally, the vLLM upstream on the ECS gateway), on the catalog decoder
 * (`svc.config.generationModel`).
 */
import type { Services } from '../context';
import { requireRuntime } from '../models';
import type { TextGenerator } from './workflow';

const noCache = { plan: () => ({ readTokens: 0, writes: [], writeTokens: 0, write5mTokens: 0, write1hTokens: 0 }) };
/**
 * The workflow's own KV scope: its prompts never share computed state with a team's requests (a
 * team id is a UUID, never this), and nothing about its reuse reaches a caller.
 */
const WORKFLOW_SCOPE = 'sift:generation-workflow';

export function decoderTextGenerator(svc: Services, model = svc.config.generationModel): TextGenerator {
  return {
    model,
    async complete(system, user, opts) {
      const { backend } = requireRuntime(svc, 'decoder');
      if (!(await backend.hasModel(model)))
        throw new Error(`the generation model '${model}' is not installed on this deployment`);
      let text = '';
      const events = backend.generate({
        model,
        scope: WORKFLOW_SCOPE,
        prompt: {
          kind: 'chat',
          messages: [
            { role: 'system', parts: [{ text: system }] },
            { role: 'user', parts: [{ text: user }] },
          ],
        },
        params: { maxTokens: opts.maxTokens, temperature: opts.temperature, seed: opts.seed, stop: [] },
        cache: noCache,
      });
      // the tokens come with `done` (the job is billed by them: core/billing/compute.ts)
      let usage = { promptTokens: 0, completionTokens: 0 };
      for await (const ev of events) {
        if (ev.type === 'text') text += ev.text;
        else if (ev.type === 'done') usage = ev.usage;
      }
      return { text, inputTokens: usage.promptTokens, outputTokens: usage.completionTokens };
    },
  };
}

/**
 * One generation on a leased context: tokenize, plan prompt-cache reads/writes, reuse the slot's KV
 * prefix (or restore a snapshot), write new snapshots, then stream text with stop sequences applied.
 */
import { existsSync } from 'node:fs';
import type { LlamaGrammar, LlamaModel, Token } from 'node-llama-cpp';
import { BadRequestError } from '../../../core/errors';
import { StopMatcher } from '../../../core/decoder/stopText';
import type {
  CachePlan,
  FinishReason,
  GenerateRequest,
  GenerationEvent,
  TokenLogprob,
} from '../../../core/decoder/types';
import { tokenizeChatMl } from './chatml';
import type { KvSnapshots } from './kvSnapshots';
import { acquireSlot, releaseSlot, reusablePrefix } from './slots';
import type { Loaded } from './types';

const NO_PLAN: CachePlan = { readTokens: 0, writes: [], writeTokens: 0, write5mTokens: 0, write1hTokens: 0 };

/**
 * Releases the slot in every path: an error, a consumer that stops at any yield, a caller that
 * left during prefill (released before `start` is even read), and the normal end.
 */
export async function* generateOn(
  l: Loaded,
  req: GenerateRequest,
  snapshots: KvSnapshots,
  maxQueue: number,
  signal?: AbortSignal,
  /** The grammar of `req.constraint` (built and cached by the backend). */
  grammar?: LlamaGrammar,
): AsyncGenerator<GenerationEvent> {
  const prompt = tokenizeChatMl(l, req.prompt);
  const tokens = prompt.tokens as Token[];
  const ctxSize = l.context.contextSize;
  if (tokens.length + req.params.maxTokens > ctxSize) {
    throw new BadRequestError(
      `This model's context is ${ctxSize} tokens; the prompt has ${tokens.length} and max tokens asks for ${req.params.maxTokens} more`,
    );
  }
  const slot = await acquireSlot(l, tokens, req.scope, maxQueue, signal);
  let held = true;
  const release = () => {
    if (!held) return;
    held = false;
    releaseSlot(l, slot);
  };
  const seq = slot.seq;
  const gen: Token[] = [];
  // node-llama-cpp ends the iteration itself at an end-of-generation token.
  let finish: FinishReason = 'stop';
  const stop = new StopMatcher(req.params.stop);
  let reused = 0;
  let plan: CachePlan = NO_PLAN;
  try {
    // Planned once the slot is ours: a request refused for capacity records no cache write.
    plan = req.cache.plan(prompt);
    if (slot.scope !== req.scope) {
      // Another team's KV state is never reused (nor its length reported): the slot starts empty.
      slot.scope = undefined;
      await seq.clearHistory();
      slot.scope = req.scope;
    }
    let keep = reusablePrefix(slot, req.scope, tokens);
    const snapshot = plan.hitKey ? snapshots.get(plan.hitKey) : undefined;
    if (snapshot && keep < plan.readTokens && existsSync(snapshot)) {
      await seq.clearHistory();
      await seq.loadStateFromFile(snapshot, { acceptRisk: true });
      keep = reusablePrefix(slot, req.scope, tokens);
    }
    keep = Math.min(keep, tokens.length - 1);
    // A new cache entry snapshots the KV state exactly at its prefix, so evaluation restarts there.
    const firstWrite = plan.writes[0]?.length;
    if (firstWrite !== undefined) keep = Math.min(keep, firstWrite);
    if (seq.nextTokenIndex > keep) await seq.eraseContextTokenRanges([{ start: keep, end: seq.nextTokenIndex }]);
    reused = keep;
    let at = keep;
    for (const w of plan.writes) {
      if (w.length > at) {
        await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(at, w.length));
        at = w.length;
      }
      await snapshots.save(seq, w.key);
    }
    const start: GenerationEvent = {
      type: 'start',
      usage: {
        promptTokens: tokens.length,
        cacheReadTokens: plan.readTokens,
        cacheWriteTokens: plan.writeTokens,
        cacheWrite5mTokens: plan.write5mTokens,
        cacheWrite1hTokens: plan.write1hTokens,
        engineReusedTokens: reused,
      },
    };
    if (signal?.aborted) {
      // The caller left during prefill: the slot is free before anything waits on a consumer. `done`
      // reports the whole prompt: once the engine started on it, a prompt is billed whole however
      // much of it was evaluated (as a reused prefix is), so no disconnect timing lowers a bill.
      finish = 'cancelled';
      release();
      yield start;
    } else {
      yield start;
      let emitted = 0;
      if (signal?.aborted) finish = 'cancelled';
      else if (req.params.maxTokens > 0) {
        const wanted = req.params.logprobs;
        // Imported where it is used (already loaded by then): the Lambda bundles reach this module
        // through the decoder adapters and must not carry node-llama-cpp (scripts' check-bundle).
        const grammarEvaluationState = grammar
          ? new (await import('node-llama-cpp')).LlamaGrammarEvaluationState({ model: l.model, grammar })
          : undefined;
        const it = seq.evaluateWithMetadata(
          tokens.slice(at),
          { probabilities: wanted !== undefined },
          {
            ...(req.params.temperature !== undefined ? { temperature: req.params.temperature } : {}),
            ...(req.params.topP !== undefined ? { topP: req.params.topP } : {}),
            ...(req.params.topK !== undefined ? { topK: req.params.topK } : {}),
            ...(req.params.seed !== undefined ? { seed: req.params.seed } : {}),
            ...(grammarEvaluationState ? { grammarEvaluationState } : {}),
          },
        );
        /** Logprobs of tokens whose text is not out yet (it waits for bytes, or for the stop matcher). */
        let pending: TokenLogprob[] = [];
        for await (const next of it) {
          const tok = next.token;
          if (signal?.aborted) {
            finish = 'cancelled';
            break;
          }
          if (l.model.isEogToken(tok)) break;
          gen.push(tok);
          const probabilities = (next as { probabilities?: Map<Token, number> }).probabilities;
          if (wanted !== undefined && probabilities) pending.push(tokenLogprob(l.model, tok, probabilities, wanted));
          const text = l.model.detokenize(gen);
          // A multi-byte character split across tokens waits for its remaining bytes; a constrained
          // output's whitespace waits for more (the grammar ends the value with newlines, not output).
          let ready = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
          if (grammar) ready = ready.trimEnd();
          if (ready.length > emitted) {
            const out = stop.push(ready.slice(emitted));
            emitted = ready.length;
            if (out) {
              yield { type: 'text', text: out, ...(wanted !== undefined ? { logprobs: pending } : {}) };
              pending = [];
            }
            if (stop.matched !== null) {
              finish = 'stop_sequence';
              break;
            }
          }
          // node-llama-cpp's JSON grammar ends a complete value with four newlines (then only more).
          if (grammar && text.endsWith('\n\n\n\n')) break;
          if (gen.length >= req.params.maxTokens) {
            finish = 'length';
            break;
          }
        }
        if (finish !== 'stop_sequence' && finish !== 'cancelled') {
          const full = l.model.detokenize(gen);
          const text = grammar ? full.trimEnd() : full;
          const tail = stop.push(text.slice(emitted)) + stop.flush();
          if (stop.matched !== null) finish = 'stop_sequence';
          if (tail) yield { type: 'text', text: tail, ...(wanted !== undefined ? { logprobs: pending } : {}) };
        }
      } else finish = 'length';
    }
  } finally {
    release();
  }
  yield {
    type: 'done',
    finishReason: finish,
    stopSequence: stop.matched,
    usage: {
      promptTokens: tokens.length,
      completionTokens: gen.length,
      cacheReadTokens: plan.readTokens,
      cacheWriteTokens: plan.writeTokens,
      cacheWrite5mTokens: plan.write5mTokens,
      cacheWrite1hTokens: plan.write1hTokens,
      engineReusedTokens: reused,
    },
  };
}

/** A token's natural-log probability and its `top` most likely alternatives (the sampler's distribution). */
function tokenLogprob(model: LlamaModel, token: Token, probabilities: Map<Token, number>, top: number): TokenLogprob {
  const text = (t: Token) => model.detokenize([t], true);
  // One pass for the `top` largest (at most 20) over the whole vocabulary; no full sort.
  const ranked: [Token, number][] = [];
  for (const entry of top > 0 ? probabilities : []) {
    if (ranked.length === top && entry[1] <= ranked[top - 1]![1]) continue;
    let i = ranked.length;
    while (i > 0 && ranked[i - 1]![1] < entry[1]) i--;
    ranked.splice(i, 0, entry);
    if (ranked.length > top) ranked.pop();
  }
  return {
    token: text(token),
    logprob: Math.log(probabilities.get(token) ?? 0),
    top: ranked.map(([t, p]) => ({ token: text(t), logprob: Math.log(p) })),
  };
}

/**
 * One generation on a leased context: tokenize, plan prompt-cache reads/writes, reuse the slot's KV
 * prefix (or restore a snapshot), write new snapshots, then stream text with stop sequences applied.
 */
import { existsSync } from 'node:fs';
import type { Token } from 'node-llama-cpp';
import { BadRequestError } from '../../../core/errors';
import { StopMatcher } from '../../../core/decoder/stopText';
import type { CachePlan, FinishReason, GenerateRequest, GenerationEvent } from '../../../core/decoder/types';
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
        const it = seq.evaluate(tokens.slice(at), {
          ...(req.params.temperature !== undefined ? { temperature: req.params.temperature } : {}),
          ...(req.params.topP !== undefined ? { topP: req.params.topP } : {}),
          ...(req.params.topK !== undefined ? { topK: req.params.topK } : {}),
          ...(req.params.seed !== undefined ? { seed: req.params.seed } : {}),
        });
        for await (const tok of it) {
          if (signal?.aborted) {
            finish = 'cancelled';
            break;
          }
          if (l.model.isEogToken(tok)) break;
          gen.push(tok);
          const text = l.model.detokenize(gen);
          // A multi-byte character split across tokens waits for its remaining bytes.
          const ready = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
          if (ready.length > emitted) {
            const out = stop.push(ready.slice(emitted));
            emitted = ready.length;
            if (out) yield { type: 'text', text: out };
            if (stop.matched !== null) {
              finish = 'stop_sequence';
              break;
            }
          }
          if (gen.length >= req.params.maxTokens) {
            finish = 'length';
            break;
          }
        }
        if (finish !== 'stop_sequence' && finish !== 'cancelled') {
          const text = l.model.detokenize(gen);
          const tail = stop.push(text.slice(emitted)) + stop.flush();
          if (stop.matched !== null) finish = 'stop_sequence';
          if (tail) yield { type: 'text', text: tail };
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

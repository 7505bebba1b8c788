/** Options and the in-memory state of the llama.cpp decoder: contexts, their slots, adapters. */
import type { LlamaContext, LlamaContextSequence, LlamaModel } from 'node-llama-cpp';
import type { DecoderAdapterSpec } from '../../../core/decoder/types';
import type { Logger } from '../../../core/logger';

export interface LlamaCppOptions {
  /** Directories searched for `<model id>/*.gguf`, in order. */
  modelDirs: string[];
  /** CPU threads per evaluation. On a busy 2-core box 1 is much faster than 2 (spin-wait contention). */
  threads?: number;
  /** Parallel sequences (slots) per model; each keeps its KV state for prefix reuse. */
  slots?: number;
  contextSize?: number;
  /** Where prefix KV snapshots of cache entries are written. */
  stateDir?: string;
  /** Requests allowed to wait for a slot; beyond it a 503 with Retry-After (before any stream). */
  maxQueue?: number;
  /** Where fine-tuned adapters (`adapter.gguf` of decoder jobs) are cached; default: under stateDir. */
  adapterDir?: string;
  /** Adapter contexts kept at once (LRU; the least recently used idle one is disposed). Default 4. */
  maxAdapterContexts?: number;
  /** Slots per adapter context (each holds its own KV cells). Default: half of `slots`, at least 1. */
  adapterSlots?: number;
  /** How long a ready adapter is served before its blob is checked again for a new version. Default 60 s. */
  adapterRecheckMs?: number;
  /** Where failures that must not stop a request (file clean-up, disposal) are reported. Default: JSON lines on stdout. */
  logger?: Logger;
}

/** One sequence of a context; it keeps its KV state between requests for prefix reuse. */
export interface Slot {
  seq: LlamaContextSequence;
  busy: boolean;
  lastUsed: number;
  /** Whose KV state the slot holds (the team of its last request); undefined when empty or unknown. */
  scope?: string | undefined;
}

/** Loaded base weights, shared by the base context and every adapter context on top of them. */
export interface Base {
  model: LlamaModel;
  defaultSystem: string | null;
}

/** One llama.cpp context: the base model's own, or one per fine-tuned adapter (LoRA applied). */
export interface Loaded extends Base {
  /** The served model id: a catalog id, or an adapter id (training job id). */
  key: string;
  context: LlamaContext;
  slots: Slot[];
  waiters: (() => void)[];
  /** The adapter file applied to this context, for adapter contexts. */
  loraPath?: string;
  /** Generations holding this context (waiting for a slot or running); it is never disposed while > 0. */
  leases: number;
  lastUsed: number;
  /** No longer reachable by new requests (evicted or superseded); disposed once `leases` is 0. */
  detached: boolean;
  disposing?: Promise<void>;
}

/** A fine-tuned adapter made servable by `ensureAdapter`. */
export interface Adapter {
  spec: DecoderAdapterSpec;
  /** Hash of the blob's identity (etag, size, mtime): a new version gets a new file and context. */
  version: string;
  filePath: string;
  checkedAt: number;
}

/**
 * Prompt building and tokenization: each pre-token (schema piece, special token, text word) is
 * tokenized alone with no CLS/SEP, as gliner2 does, and cached; records are the serialized encoder
 * inputs with the positions the heads gather (`[P]`/field markers, first subword of each word).
 */
// Type-only: the native package loads on first use, so Lambda bundles never carry it.
import type { Tokenizer } from 'tokenizers';
import { buildChoicePrefix, buildPromptTasks, SPECIAL, type EncoderSchema, type PromptTask } from './schema';
import type { EncodedRecord } from './types';

const TOKEN_CACHE_MAX = 50_000;

export class PromptTokens {
  private readonly cache = new Map<string, number[]>();
  constructor(private readonly tokenizer: Tokenizer) {}

  /** Ids of a pre-token `tokenizeAll` has seen. */
  ids(token: string): number[] {
    return this.cache.get(token)!;
  }

  /**
   * Subword ids of each pre-token (tokenized in isolation, no CLS/SEP), cached. Least recently
   * requested entries are evicted, never the ones just requested: a request's later steps (windows,
   * label groups) read the cache after further calls.
   */
  async tokenizeAll(tokens: Iterable<string>): Promise<void> {
    const want = new Set(tokens);
    const todo: string[] = [];
    for (const t of want) {
      const ids = this.cache.get(t);
      if (ids === undefined) todo.push(t);
      else {
        this.cache.delete(t); // most recently used last
        this.cache.set(t, ids);
      }
    }
    if (!todo.length) return;
    const enc = await this.tokenizer.encodeBatch(todo, { addSpecialTokens: false });
    todo.forEach((t, i) => {
      this.cache.set(t, enc[i]!.getIds());
    });
    for (const k of this.cache.keys()) {
      if (this.cache.size <= TOKEN_CACHE_MAX) break;
      if (!want.has(k)) this.cache.delete(k);
    }
  }

  /** Token count of the serialized input for one text (same rules as the encoder input). */
  build(rec: Omit<EncodedRecord, 'ids' | 'wordPos' | 'taskPos'>, tasks: PromptTask[]): EncodedRecord {
    const ids: number[] = [];
    const wordPos: number[] = [];
    const taskPos: number[][] = [];
    tasks.forEach((task, ti) => {
      if (ti > 0) ids.push(...this.cache.get(SPECIAL.SEP_STRUCT)!);
      const pos: number[] = [];
      task.tokens.forEach((tok, i) => {
        const marker = i === 1 || (i >= 4 && i < task.tokens.length - 2 && i % 2 === 0);
        if (marker) pos.push(ids.length);
        ids.push(...this.cache.get(tok)!);
      });
      taskPos.push(pos);
    });
    ids.push(...this.cache.get(SPECIAL.SEP_TEXT)!);
    for (const w of [...rec.prefix, ...rec.words]) {
      wordPos.push(ids.length);
      ids.push(...this.cache.get(w)!);
    }
    return { ...rec, ids, wordPos, taskPos };
  }

  /** Tokens of a schema's prompt with no text: schemas, separators, `[SEP_TEXT]` and the choice prefix. */
  async promptTokens(schema: EncoderSchema): Promise<number> {
    const tasks = buildPromptTasks(schema);
    const prefix = buildChoicePrefix(schema);
    await this.tokenizeAll([SPECIAL.SEP_STRUCT, SPECIAL.SEP_TEXT, ...prefix, ...tasks.flatMap((t) => t.tokens)]);
    return this.build({ textIndex: 0, text: '', offset: 0, words: [], starts: [], ends: [], prefix }, tasks).ids.length;
  }
}

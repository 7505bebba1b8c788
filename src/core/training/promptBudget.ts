/**
 * Job-creation check for label sets an encoder can never take (docs/reference/encoder.md "Large label sets").
 *
 * The trainer fits long label sets into the encoder by sampling negative labels per example
 * (containers/training/sift_trainer/encoder/prompt_budget.py) and the engine runs them in label groups, so a
 * large label set is fine. What cannot work is one label whose own prompt — the label in its task
 * wrapper, in the largest form gliner2's training augmentation gives it — leaves less than
 * `MIN_TEXT_TOKENS` of room for text: every example carrying it would fail mid-training. Such a
 * dataset is refused with 422 at job creation.
 *
 * The count is a cheap, conservative lower bound on BERT WordPiece tokens computed from characters
 * (no tokenizer is loaded in the API path): BERT's pre-tokenizer splits on whitespace and makes every
 * punctuation and CJK character a word of its own, and WordPiece gives every word at least one token
 * (a long or unknown word becomes one `[UNK]`). So a label refused here is refused by the trainer's
 * exact count too; a label close to the limit passes here and, if it really does not fit, fails the
 * job early with the trainer's exact message.
 */
import type { FieldError } from '../errors';

/** Root models whose encoder has absolute positions (a hard per-pass limit) and a BERT WordPiece tokenizer. */
export const ENCODER_POSITION_LIMITS: Readonly<Record<string, number>> = {
  'sift/gliner2-mini-v1': 512,
};

/** Least room for text a prompt must leave (tokens); the trainer's `MIN_TEXT_TOKENS`. */
export const MIN_TEXT_TOKENS = 16;

/** Added tokens match as a whole before pre-tokenization: one token each. */
const ADDED_TOKENS = [
  '[SEP_STRUCT]',
  '[SEP_TEXT]',
  '[P]',
  '[C]',
  '[E]',
  '[R]',
  '[L]',
  '[EXAMPLE]',
  '[OUTPUT]',
  '[DESCRIPTION]',
  '[CLS]',
  '[SEP]',
  '[PAD]',
  '[MASK]',
  '[UNK]',
];
const ADDED = new RegExp(ADDED_TOKENS.map((t) => t.replace(/[[\]]/g, '\\$&')).join('|'), 'g');

const isCjk = (cp: number) =>
  (cp >= 0x4e00 && cp <= 0x9fff) ||
  (cp >= 0x3400 && cp <= 0x4dbf) ||
  (cp >= 0x20000 && cp <= 0x2a6df) ||
  (cp >= 0x2a700 && cp <= 0x2b73f) ||
  (cp >= 0x2b740 && cp <= 0x2b81f) ||
  (cp >= 0x2b820 && cp <= 0x2ceaf) ||
  (cp >= 0xf900 && cp <= 0xfaff) ||
  (cp >= 0x2f800 && cp <= 0x2fa1f);
/** BERT `_is_punctuation`: ASCII symbols and Unicode P*. */
const isPunct = (ch: string, cp: number) =>
  (cp >= 33 && cp <= 47) ||
  (cp >= 58 && cp <= 64) ||
  (cp >= 91 && cp <= 96) ||
  (cp >= 123 && cp <= 126) ||
  /\p{P}/u.test(ch);
/** Characters the normalizer may remove or that vanish with accent stripping (controls, format, U+FFFD, combining marks): never counted. */
const isDropped = (ch: string) => /[\p{C}\p{Mn}\uFFFD]/u.test(ch);
/** Whitespace in every BERT variant (others, like U+000B, may be removed instead: counted as neither). */
const isSpace = (ch: string) => /[ \t\n\r\p{Zs}]/u.test(ch);

/** A lower bound on the BERT WordPiece tokens of `s` (see the module comment). */
export function minWordPieceTokens(s: string): number {
  let n = 0;
  const text = s.replace(ADDED, () => {
    n += 1;
    return ' ';
  });
  let inWord = false;
  for (const ch of text) {
    const cp = ch.codePointAt(0)!;
    if (isSpace(ch)) inWord = false;
    else if (isDropped(ch)) continue;
    else if (isPunct(ch, cp) || isCjk(cp)) {
      n += 1;
      inWord = false;
    } else if (!inWord) {
      n += 1;
      inWord = true;
    }
  }
  return n;
}

/** What a dataset version's summary says about its labels (datasets/service.ts `DatasetVersion`). */
export interface LabelSummary {
  label_vocabulary: string[];
  entity_types: string[];
  relation_types: string[];
  structures: Record<string, Record<string, unknown>>;
}

/**
 * The largest prompt each label takes on its own (gliner2 `_transform_schema`; training may rename a
 * label to `label 1` / `field 1` and append the real name as `[DESCRIPTION] label 1: <name>`).
 */
const clip = (s: string) => (s.length > 60 ? `${s.slice(0, 57)}...` : s);

function labelPrompts(v: LabelSummary): Array<{ what: string; prompts: string[] }> {
  const out: Array<{ what: string; prompts: string[] }> = [];
  for (const l of v.label_vocabulary)
    out.push({
      what: `classification label '${clip(l)}'`,
      prompts: [
        `( [P] classification ( [L] ${l} ) )`,
        `( [P] classification [DESCRIPTION] label 1: ${l} ( [L] label 1 ) )`,
      ],
    });
  for (const t of v.entity_types)
    out.push({ what: `entity type '${clip(t)}'`, prompts: [`( [P] entities ( [E] ${t} ) )`] });
  for (const r of v.relation_types)
    out.push({ what: `relation '${clip(r)}'`, prompts: [`( [P] ${r} ( [R] head [R] tail ) )`] });
  for (const [s, fields] of Object.entries(v.structures ?? {}))
    for (const f of Object.keys(fields))
      out.push({
        what: `structure '${clip(s)}' field '${clip(f)}'`,
        prompts: [`( [P] ${s} ( [C] ${f} ) )`, `( [P] ${s} [DESCRIPTION] field 1: ${f} ( [C] field 1 ) )`],
      });
  return out;
}

/**
 * Field errors (at `loc`) for every label of `v` that can never fit `rootModel`'s encoder; empty when
 * all fit or the model has no hard position limit (DeBERTa-based encoders use relative positions).
 */
export function impossibleLabels(
  rootModel: string,
  datasetName: string,
  v: LabelSummary,
  loc: (string | number)[],
): FieldError[] {
  const limit = ENCODER_POSITION_LIMITS[rootModel];
  if (!limit) return [];
  const room = limit - 1 - MIN_TEXT_TOKENS; // [SEP_TEXT] + the least text
  const errors: FieldError[] = [];
  for (const { what, prompts } of labelPrompts(v)) {
    const n = Math.max(...prompts.map(minWordPieceTokens));
    if (n > room) {
      errors.push({
        loc,
        msg: `dataset '${datasetName}': the ${what} alone serializes to at least ${n} prompt tokens; ${rootModel} takes ${limit} tokens per pass (prompt + at least ${MIN_TEXT_TOKENS} of text), so no example with it can be trained — shorten it`,
        type: 'prompt_too_long',
      });
    }
  }
  return errors;
}

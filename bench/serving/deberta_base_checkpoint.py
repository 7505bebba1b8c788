"""A DeBERTa-v3-base-sized GLiNER2 checkpoint (fastino/gliner2-base-v1's architecture: count_lstm_v2,
random weights) whose tokenizer splits English the way a real SentencePiece vocabulary does, for
bench/serving/encoder.ts at base size (issue #27 item 4).

``python -m sift_trainer.build.architectures --size base`` pads its small trained vocabulary with
generated pieces, so English words fall apart into letters (56.0 tokens per wnut17 test tweet, words
lower-cased and tokenized one by one as gliner2 does, vs 24.1 for the mini model's WordPiece and 28.7 here) and every sequence is ~2× longer than deberta-v3's would be — which
changes what a speed ratio measures (the encoder's share grows with length, and attention with its square).
This builds the same checkpoint with a Unigram vocabulary trained on the English text of the shared data
sets' train splits (wnut17, conll04, banking77, restaurant8k, snips; never a test split),
padded with the builder's generated pieces to DeBERTa-v3's 128,000 so the embedding matrix, the model's
size and its memory stay those of the real model.

usage (in containers/training):
  python ../../bench/serving/deberta_base_checkpoint.py OUT_DIR [--pieces 16000] [--arch boundary]
then: python -m sift_trainer.export.import_checkpoint convert --checkpoint OUT_DIR --out MODEL_DIR --model-id fastino/gliner2-base-v1
"""

import argparse
import glob
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "containers", "training"))
from sift_trainer.build import architectures as A  # noqa: E402


def english_lines(data: str) -> list[str]:
    lines = []
    for path in sorted(glob.glob(os.path.join(data, "*", "train*.jsonl"))):
        with open(path) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    text = row.get("text") or " ".join(row.get("tokens", []))
                    if text:
                        lines.append(text)
    return lines


def trained_vocab(lines: list[str], pieces: int) -> list[tuple[str, float]]:
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    trainer = trainers.UnigramTrainer(
        vocab_size=pieces, special_tokens=A.SPECIALS, unk_token="[UNK]", shrinking_factor=0.75, max_piece_length=16
    )
    tok.train_from_iterator(lines + [x.lower() for x in lines], trainer=trainer)  # gliner2 lowercases words
    vocab = [(p, s) for p, s in json.loads(tok.to_str())["model"]["vocab"] if p not in A.SPECIALS]
    return [(p, 0.0) for p in A.SPECIALS] + vocab


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--pieces", type=int, default=16000)
    ap.add_argument("--seed", type=int, default=0)
    # boundary: the GLiNER2.5 architecture on the same backbone (issue #32's speed table)
    ap.add_argument("--arch", default="deberta-v3-count_lstm_v2", choices=("deberta-v3-count_lstm_v2", "boundary"))
    a = ap.parse_args()
    data = os.environ.get("SIFT_SHARED_DATA", os.path.join(os.getcwd(), "..", "..", "..", "shared", "data"))
    lines = english_lines(data)
    trained = trained_vocab(lines, a.pieces)
    floor = min(s for _, s in trained[len(A.SPECIALS) :])
    seen = {p for p, _ in trained}
    # the generated pieces, scored below every trained one, so they only fill the vocabulary
    filler = [(p, floor - 10.0 + s / 100) for p, s in A._synthetic_vocab(A.BASE_VOCAB, a.seed) if p not in seen]
    vocab = (trained + filler)[: A.BASE_VOCAB]

    def build_tokenizer(arch: str, size: str, seed: int):
        from transformers import DebertaV2Tokenizer

        v = [(p, 0.0 if p in A.SPECIALS else s) for p, s in vocab] + [("[MASK]", 0.0)]
        return DebertaV2Tokenizer(vocab=v, unk_id=3, do_lower_case=False, split_by_punct=False)

    A.build_tokenizer = build_tokenizer
    summary = A.build(a.arch, Path(a.out), size="base", seed=a.seed)
    summary["tokenizer"] = f"Unigram, {len(trained) - len(A.SPECIALS)} pieces trained on {len(lines)} train-split lines, padded to {len(vocab)}"
    print(json.dumps({k: v for k, v in summary.items() if k != "files"}))


if __name__ == "__main__":
    main()

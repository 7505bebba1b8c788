"""Random-initialised GLiNER2 checkpoints at the released models' config shapes, built offline (issue #27).

    python -m sift_trainer.build.architectures --arch deberta-v3-count_lstm_v2 --out DIR [--size tiny|base] [--seed N]

Each output is what ``GLiNER2.save_pretrained`` (and so a hub download) holds: ``config.json``,
``encoder_config/config.json``, ``model.safetensors``, ``tokenizer.json`` + ``tokenizer_config.json``.
The model is built by the gliner2 library's own classes (``ExtractorConfig`` + the span/boundary
model with an explicit backbone config and tokenizer, so nothing is fetched from a hub), with seeded
random weights: the checkpoints test import, export and training on the real architectures, never quality.

| --arch                    | released model it stands for      | backbone                   | tokenizer                  |
|---------------------------|-----------------------------------|----------------------------|----------------------------|
| deberta-v3-count_lstm     | fastino/gliner2-large-v1          | DeBERTa-v3 (deberta-v2)    | Unigram, ~2k pieces        |
| deberta-v3-count_lstm_v2  | fastino/gliner2-base-v1 (default) | DeBERTa-v3 (deberta-v2)    | Unigram, ~2k pieces        |
| mdeberta-v3               | fastino/gliner2-multi-v1          | mDeBERTa-v3 (deberta-v2)   | Unigram, 250,000 pieces    |
| boundary                  | the GLiNER2.5 family (not served) | DeBERTa-v3                 | Unigram, ~2k pieces        |

``--size tiny`` (tests: seconds) keeps every config field of microsoft/deberta-v3-* that changes the
graph (relative attention, p2c|c2p, 256 position buckets, layer-normed relative embeddings, shared
attention keys) at 64 hidden × 2 layers; ``--size base`` is DeBERTa-v3-base's 768 × 12 (speed
benchmarks; the vocabulary is synthetic at 128k pieces as in the real one).

The small tokenizer is a SentencePiece-style Unigram trained with the ``tokenizers`` library on the
built-in corpus below; the 250k one is constructed directly (pieces and log-probability scores), since
no small corpus trains that many pieces. Both are saved as transformers' DeBERTa-v2 tokenizer
([PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3 … [MASK] last, Metaspace ``▁``, as microsoft/deberta-v3-*).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

ARCHS = ("deberta-v3-count_lstm", "deberta-v3-count_lstm_v2", "mdeberta-v3", "boundary")
# what each stands for: written into config.json's model_name as the released checkpoints have it
BACKBONE_NAMES = {
    "deberta-v3-count_lstm": "microsoft/deberta-v3-large",
    "deberta-v3-count_lstm_v2": "microsoft/deberta-v3-base",
    "mdeberta-v3": "microsoft/mdeberta-v3-base",
    "boundary": "microsoft/deberta-v3-base",
}
COUNTING = {
    "deberta-v3-count_lstm": "count_lstm",
    "deberta-v3-count_lstm_v2": "count_lstm_v2",
    "mdeberta-v3": "count_lstm",
}
SIZES = {
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128},
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
}
MULTI_VOCAB = 250_000  # mDeBERTa-v3's SentencePiece vocabulary
BASE_VOCAB = 128_000  # DeBERTa-v3's
SPECIALS = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]

# The small tokenizer's training text: enough words (English, a little of other Latin-script languages,
# digits, punctuation) that the schema words and test sentences split into real pieces.
CORPUS = """
Tim Cook leads Apple in Cupertino, California. Satya Nadella is the chief executive of Microsoft in Redmond.
Acme Corp opened an office in Paris on Monday; the company hired 120 people and plans to grow in 2026.
The customer wrote to support about a refund for order 48213: the invoice was wrong and the package late.
Berlin, London, Madrid, Rome, Tokyo, New York and San Francisco are cities. Angela Merkel visited Washington.
Please classify the sentiment of this review: positive, negative or neutral. The product works great!
Extract the person, organization, location, date, email, phone number, product and price from the text.
Relations: works for, located in, founded by, born in, part of, acquired by, subsidiary of, married to.
The meeting is scheduled for March 3rd at 10:30 am. Contact jane.doe@example.com or call +1 555 0100.
Der Kunde bestellte ein neues Telefon. La empresa abrió una oficina en Madrid. Le client a payé la facture.
entities person company city country event title description label output example structure choice
""".strip()


def _trained_vocab(size: int = 2000) -> list[tuple[str, float]]:
    """Unigram pieces trained on CORPUS, scored by their frequency in it: the same list every run."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    lines = CORPUS.splitlines()
    # the corpus lowercased too: gliner2 lowercases words before tokenizing them
    trainer = trainers.UnigramTrainer(
        vocab_size=size, special_tokens=SPECIALS, unk_token="[UNK]", shrinking_factor=0.75, max_piece_length=12
    )
    text = lines + [x.lower() for x in lines]
    tok.train_from_iterator(text, trainer=trainer)
    trained = [p for p, _ in json.loads(tok.to_str())["model"]["vocab"] if p not in SPECIALS]
    # The trainer iterates hash maps (random order per process): the pieces it keeps are the same every
    # run, but their scores vary (the characters it must keep are scored in hash order). So the scores
    # are re-estimated here, deterministically: log relative frequency of each piece in the corpus.
    joined = "\n".join("\u2581" + x.replace(" ", "\u2581") for x in text)
    counts = {p: joined.count(p) + 1 for p in trained}
    total = sum(counts.values())
    pieces = sorted(((p, round(math.log(c / total), 6)) for p, c in counts.items()), key=lambda x: (-x[1], x[0]))
    specials = [(p, 0.0) for p in SPECIALS]
    return specials + pieces


def _synthetic_vocab(size: int, seed: int) -> list[tuple[str, float]]:
    """``size`` pieces: the trained ones (so ordinary text still tokenizes sensibly), then generated
    multi-script pieces with Zipf-like log-probability scores, as a real large SentencePiece vocab has."""
    base = _trained_vocab()
    seen = {p for p, _ in base}
    out = list(base)
    # Latin + Latin-1/Extended-A letters, Greek, Cyrillic, Arabic, Devanagari, Hiragana, CJK: pieces in many scripts
    ranges = [(0x61, 0x7A), (0xE0, 0xFF), (0x100, 0x17F), (0x3B1, 0x3C9), (0x430, 0x44F), (0x627, 0x64A)]
    ranges += [(0x905, 0x939), (0x3041, 0x3096), (0x4E00, 0x4FFF)]
    chars = [chr(c) for lo, hi in ranges for c in range(lo, hi + 1)]
    for c in chars:  # every character alone, so nothing in these scripts falls to [UNK]
        for piece in (c, "▁" + c):
            if piece not in seen:
                seen.add(piece)
                out.append((piece, -12.0))
    rng = random.Random(seed)
    while len(out) < size:
        script = rng.choice(ranges)  # one script per piece, as real pieces are
        n = rng.choice((2, 2, 3, 3, 3, 4, 4, 5, 6))
        piece = ("▁" if rng.random() < 0.6 else "") + "".join(chr(rng.randint(*script)) for _ in range(n))
        if piece not in seen:
            seen.add(piece)
            out.append((piece, -8.0 - math.log1p(len(out)) / 2))
    return out[:size]


def build_tokenizer(arch: str, size: str, seed: int):
    """A DeBERTa-v2 (transformers) tokenizer over a Unigram vocab, [MASK] as the last id like deberta-v3."""
    from transformers import DebertaV2Tokenizer

    if arch == "mdeberta-v3":
        vocab = _synthetic_vocab(MULTI_VOCAB, seed)
    elif size == "base":
        vocab = _synthetic_vocab(BASE_VOCAB, seed)
    else:
        vocab = _trained_vocab()
    assert [p for p, _ in vocab[:4]] == SPECIALS, vocab[:4]
    vocab = [(p, 0.0 if p in SPECIALS else s) for p, s in vocab] + [("[MASK]", 0.0)]
    return DebertaV2Tokenizer(vocab=vocab, unk_id=3, do_lower_case=False, split_by_punct=False)


def encoder_config(arch: str, size: str, vocab_size: int):
    """microsoft/deberta-v3-*'s config (every field that shapes the graph), at ``size``'s dimensions."""
    from transformers import DebertaV2Config

    return DebertaV2Config(
        **SIZES[size],
        vocab_size=vocab_size,
        hidden_act="gelu",
        hidden_dropout_prob=0.1,
        attention_probs_dropout_prob=0.1,
        max_position_embeddings=512,
        type_vocab_size=0,
        initializer_range=0.02,
        layer_norm_eps=1e-7,
        relative_attention=True,
        max_relative_positions=-1,
        position_buckets=256,
        norm_rel_ebd="layer_norm",
        share_att_key=True,
        pos_att_type=["p2c", "c2p"],
        position_biased_input=False,
        pad_token_id=0,
        _name_or_path=BACKBONE_NAMES[arch],
    )


def build(arch: str, out: Path, size: str = "tiny", seed: int = 0) -> dict[str, Any]:
    """Writes the checkpoint to ``out`` and returns a summary (sizes, parameter count, seconds)."""
    if arch not in ARCHS:
        raise ValueError(f"unknown arch {arch!r}: one of {', '.join(ARCHS)}")
    t0 = time.time()
    import torch
    from gliner2 import ExtractorConfig

    tok = build_tokenizer(arch, size, seed)
    # deberta-v3 pads its embedding matrix past the tokenizer (128100 rows for 128001 ids); gliner2 resizes to len(tok)
    enc_cfg = encoder_config(arch, size, vocab_size=len(tok) + 99)
    if arch == "boundary":
        from gliner2.models.boundary.model import BoundaryExtractorModel as Model

        cfg = ExtractorConfig(model_name=BACKBONE_NAMES[arch], architecture="boundary", token_pooling="first")
    else:
        from gliner2.models.span.model import SpanExtractorModel as Model

        cfg = ExtractorConfig(
            model_name=BACKBONE_NAMES[arch], max_width=8, counting_layer=COUNTING[arch], token_pooling="first"
        )
    torch.manual_seed(seed)  # every weight below is drawn from this one seeded generator
    model = Model(cfg, encoder_config=enc_cfg, tokenizer=tok).float().eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    files = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    return {
        "arch": arch,
        "size": size,
        "out": str(out),
        "counting_layer": getattr(cfg, "counting_layer", None),
        "vocab_size": len(model.processor.tokenizer),
        "parameters": int(sum(p.numel() for p in model.parameters())),
        "bytes": sum(files.values()),
        "files": files,
        "seconds": round(time.time() - t0, 2),
    }


def main(argv=None) -> int:
    from ..process import configure_process

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", required=True, choices=ARCHS)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", default="tiny", choices=tuple(SIZES))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args(argv)
    configure_process()
    print(json.dumps(build(a.arch, Path(a.out), a.size, a.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

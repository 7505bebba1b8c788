"""How much of the text reaches the [L] label tokens a classification head scores (docs/experiments/training.md).

Prints, for a base model and banking77 rows (12 labels in each prompt): the share of each [L] token's
attention on text tokens per layer, and the size of the [L] outputs' variation across texts (the
signal the head needs), across labels, and from training-mode dropout (the noise it trains on).

Run (repo root):  ~/.cache/sift/venv/bin/python bench/research/cls_signal.py [--base DIR]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "containers" / "training"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=str(Path.home() / ".cache/sift/models/sift--gliner2-mini-v1"))
    a = ap.parse_args()
    import torch

    from sift_trainer.data.rows import convert, infer_tasks
    from sift_trainer.encoder.training import load_model

    torch.set_num_threads(1)
    torch.manual_seed(0)
    rows = [json.loads(line) for line in open(Path(os.environ.get("SIFT_SHARED_DATA", REPO.parent / "shared" / "data")) / "banking77" / "test.jsonl")]
    rng = random.Random(0)
    labels = sorted({r["label"] for r in rows})
    rng.shuffle(labels)
    labels = labels[:12]
    picked = [rng.choice([r for r in rows if r["label"] == lab]) for lab in labels for _ in range(2)]
    recs = convert(picked, infer_tasks(picked))  # every prompt: the same 12 labels in the same order
    model = load_model(Path(a.base))
    batch = model.processor.collate_fn_inference([(r["input"], copy.deepcopy(r["output"])) for r in recs])

    model.eval()
    model.encoder.config._attn_implementation = "eager"  # attention weights are only returned by eager
    with torch.no_grad():
        att = model.encoder(input_ids=batch.input_ids, attention_mask=batch.attention_mask, output_attentions=True).attentions
    tok = model.processor.tokenizer
    share, text_positions = [0.0] * len(att), 0.0
    for i in range(len(recs)):
        toks = tok.convert_ids_to_tokens(batch.input_ids[i].tolist())
        sep, n = toks.index("[SEP_TEXT]"), int(batch.attention_mask[i].sum())
        lpos = [p for p, t in enumerate(toks[:sep]) if t == "[L]"]
        text_positions += (n - sep - 1) / n / len(recs)
        for layer, w in enumerate(att):
            share[layer] += float(w[i].mean(0)[lpos][:, sep + 1:n].sum(-1).mean()) / len(recs)

    def label_outputs(train: bool):
        model.train(train)
        with torch.no_grad():
            _tok, schema = model._encode_batch(batch)
        return torch.stack([torch.stack(schema[i][0])[1:] for i in range(len(recs))])  # rows x labels x hidden

    ev, tr = label_outputs(False), label_outputs(True)
    print(json.dumps({
        "base": a.base, "rows": len(recs), "labels_per_prompt": ev.shape[1],
        "attention_on_text_per_layer": [round(x, 3) for x in share],
        "text_share_of_positions": round(text_positions, 3),
        "L_norm": round(float(ev.norm(dim=-1).mean()), 2),
        "variation_across_texts": round(float((ev - ev.mean(0, keepdim=True)).norm(dim=-1).mean()), 2),
        "variation_across_labels": round(float((ev - ev.mean(1, keepdim=True)).norm(dim=-1).mean()), 2),
        "dropout_noise": round(float((tr - ev).norm(dim=-1).mean()), 2),
    }))


if __name__ == "__main__":
    main()

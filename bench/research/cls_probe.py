"""What a base model's frozen encoder knows about banking77 intents, read two ways (docs/experiments/training.md).

* **text route**: the text alone through the encoder, mean-pooled (how the MiniLM backbone was trained
  as a sentence embedder), then a linear classifier and a nearest-centroid rule;
* **[L] route**: the classification prompt (every intent as an ``[L]`` label, then the text) through
  the same encoder, and a fresh copy of the model's own classification head fitted on the ``[L]``
  outputs: the only way a GLiNER2 model can classify.

Both are fitted on the same training rows and scored on the same held-out rows as bench/research/cls_curve.py,
so the gap between them is what the ``[L]``-token route loses of what the backbone already encodes.

Run (repo root):  SIFT_TORCH_THREADS=1 ~/.cache/sift/venv/bin/python bench/research/cls_probe.py [--labels 77 --rows 13]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import time
from pathlib import Path

from cls_curve import REPO, banking_subset

sys.path.insert(0, str(REPO / "containers" / "training"))


def fit_linear(X, y, n_classes: int, steps: int = 2000, lr: float = 1e-2):
    import torch

    torch.manual_seed(0)
    w = torch.nn.Linear(X.shape[1], n_classes)
    opt = torch.optim.AdamW(w.parameters(), lr=lr, weight_decay=1e-4)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(w(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return w


def text_embeddings(model, rows):
    import torch

    tok, out = model.processor.tokenizer, []
    with torch.no_grad():
        for i in range(0, len(rows), 32):
            b = tok([r["text"] for r in rows[i:i + 32]], padding=True, truncation=True, return_tensors="pt")
            h = model.encoder(input_ids=b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state
            m = b["attention_mask"].unsqueeze(-1).float()
            out.append((h * m).sum(1) / m.sum(1))
    return torch.nn.functional.normalize(torch.cat(out), dim=-1)


def label_route_accuracy(model, train, test, steps: int) -> float:
    """Fit a fresh copy of the classification head on frozen [L] outputs of all-label prompts; test accuracy."""
    import torch
    import torch.nn.functional as F

    from sift_trainer.data.rows import convert, infer_tasks
    from sift_trainer.encoder.cls_warmup import _features

    tasks = infer_tasks(train)
    rng = random.Random(0)

    def prompts(rows):
        recs = convert(rows, tasks)
        for r in recs:  # one seeded label order per row: the head must read the text, not the position
            rng.shuffle(r["output"]["classifications"][0]["labels"])
        return recs

    Xtr, mtr, ytr = _features(model, prompts(train))
    Xte, mte, yte = _features(model, prompts(test))
    head = copy.deepcopy(model.classifier)
    for layer in head.modules():
        if hasattr(layer, "reset_parameters") and layer is not head:
            layer.reset_parameters()
    head.eval()  # no dropout: the probe measures the features
    opt = torch.optim.AdamW(head.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)

    def logits(X, mask):
        return head(X).squeeze(-1).masked_fill(~mask, float("-inf"))

    for _ in range(steps):
        idx = torch.randint(len(ytr), (8,), generator=gen)
        loss = F.cross_entropy(logits(Xtr[idx], mtr[idx]), ytr[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        return float((logits(Xte, mte).argmax(-1) == yte).float().mean())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--labels", type=int, default=77)
    ap.add_argument("--rows", type=int, default=13, help="training rows per label")
    ap.add_argument("--held-out", type=int, default=4, help="test rows per label")
    ap.add_argument("--base", default=str(Path.home() / ".cache/sift/models/sift--gliner2-mini-v1"))
    ap.add_argument("--head-steps", type=int, default=3000)
    a = ap.parse_args()
    import torch

    from sift_trainer.encoder.training import load_model

    torch.set_num_threads(1)
    train, test = banking_subset(a.labels, a.rows, a.held_out)
    labels = sorted({r["label"] for r in train})
    lid = {lab: i for i, lab in enumerate(labels)}
    ytr = torch.tensor([lid[r["label"]] for r in train])
    yte = torch.tensor([lid[r["label"]] for r in test])
    model = load_model(Path(a.base))
    model.eval()

    t0 = time.time()
    Xtr, Xte = text_embeddings(model, train), text_embeddings(model, test)
    linear = fit_linear(Xtr, ytr, len(labels))
    centroids = torch.stack([Xtr[ytr == k].mean(0) for k in range(len(labels))])
    with torch.no_grad():
        text_linear = float((linear(Xte).argmax(-1) == yte).float().mean())
    text_centroid = float(((Xte @ centroids.T).argmax(-1) == yte).float().mean())
    t1 = time.time()
    label_route = label_route_accuracy(model, train, test, a.head_steps)
    print(json.dumps({
        "labels": len(labels), "train_rows": len(train), "test_rows": len(test), "chance": round(1 / len(labels), 4),
        "text_route_linear": round(text_linear, 4), "text_route_centroid": round(text_centroid, 4),
        "label_route_head": round(label_route, 4),
        "seconds": {"text_route": round(t1 - t0), "label_route": round(time.time() - t1)},
    }))


if __name__ == "__main__":
    main()
